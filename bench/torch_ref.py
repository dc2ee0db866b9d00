#!/usr/bin/python3
"""PyTorch reference runs for dtrain's benchmarks (BENCHMARKS.md).

Trains the background documents' two models the way REFERENCE.md measured them: data held in
memory as tensors (no DataLoader), one process with T threads or DDP over gloo with P processes
x T threads. Prints one JSON object per run on stdout, the same fields dtrain's --json "final"
event has, so bench/compare.py can put both side by side.

--precision fp32 (the default) trains in float32. --precision bf16 is PyTorch's mixed-precision
recipe, the counterpart of dtrain's train.precision = "bf16": forward and loss inside
torch.autocast('cpu', dtype=torch.bfloat16), backward and the optimizer step outside it, fp32
master weights and optimizer state, no GradScaler (bf16 has fp32's exponent range). Evaluation
(--eval) runs under the same autocast. An op that this torch build's CPU autocast cannot run in
bfloat16 ends the run with one line naming the op's module (exit 1).

    /usr/bin/python3 bench/torch_ref.py convnet --procs 1 --threads 1 --epochs 1
    /usr/bin/python3 bench/torch_ref.py cnn --procs 2 --threads 1 --steps 300
    /usr/bin/python3 bench/torch_ref.py allreduce --procs 2
    /usr/bin/python3 bench/torch_ref.py fashion-resnet --epochs 5 --seed 3 --eval
    /usr/bin/python3 bench/torch_ref.py resnet20 --procs 2 --steps 100
    /usr/bin/python3 bench/torch_ref.py resnet20 --steps 40 --precision bf16

The ResNets are docs/resnet.md's module (the same state_dict names as dtrain's checkpoints)
trained with configs/fashion-resnet.cfg's and configs/cifar10-resnet20.cfg's recipe: SGD with
Nesterov momentum 0.9, weight decay 5e-4 on weights only (not biases or batchnorm), label
smoothing 0.1 (fashion), OneCycleLR (fashion) or linear warmup + cosine (resnet20), random
horizontal flips and, for resnet20, 4-pixel-padded random crops, done on the whole batch in
tensors. Several processes use DDP with per-process batchnorm statistics: torch 1.13's
SyncBatchNorm runs on CUDA only, so the reference does less work there than dtrain, whose
batchnorm statistics are global by default.

Needs Debian's python3-torch; never used by dtrain itself.
"""
import argparse, gzip, json, math, os, re, struct, sys, time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

FASHION = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion(root, mean=0.1302, std=0.3069):
    xs = read_idx(f"{root}/train-images-idx3-ubyte.gz")
    ys = read_idx(f"{root}/train-labels-idx1-ubyte.gz")
    xt = read_idx(f"{root}/t10k-images-idx3-ubyte.gz")
    yt = read_idx(f"{root}/t10k-labels-idx1-ubyte.gz")
    norm = lambda x: ((torch.from_numpy(x.copy()).float() / 255 - mean) / std).unsqueeze(1)
    return norm(xs), torch.from_numpy(ys.astype(np.int64)), norm(xt), torch.from_numpy(yt.astype(np.int64))


def load_cifar_format(n_train=50000, n_test=10000):
    # CIFAR-10-shaped random data: the speed of a step does not depend on pixel values.
    g = torch.Generator().manual_seed(0)
    return (torch.rand(n_train, 3, 32, 32, generator=g), torch.randint(0, 10, (n_train,), generator=g),
            torch.rand(n_test, 3, 32, 32, generator=g), torch.randint(0, 10, (n_test,), generator=g))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Dropout2d(0.10), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(64, 10), nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.layers(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(4096, 512), nn.Linear(512, 10))

    def forward(self, x):
        return self.layers(x)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resnet(blocks, in_channels, num_classes=10):
    """A 3-stage ResNet of basic blocks (16/32/64 channels) as docs/resnet.md's DtrainNet:
    blocks=3 is configs/cifar10-resnet20.cfg, blocks=2 with one input channel
    configs/fashion-resnet.cfg."""
    doc = open(os.path.join(ROOT, "docs/resnet.md")).read()
    env = {}
    exec(re.search(r"<!-- torch:begin -->\n```python\n(.*?)```", doc, re.S).group(1), env)
    layers = [nn.Conv2d(in_channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for stage, c in enumerate([16, 32, 64]):
        for block in range(blocks):
            s = 2 if stage and block == 0 else 1
            layers += [nn.Conv2d(cin, c, 3, stride=s, padding=1, bias=False), nn.BatchNorm2d(c),
                       nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                       env["Add"](-6, cin, c, s, projection=cin != c or s != 1), nn.ReLU()]
            cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes)]
    return env["DtrainNet"](layers)


def sgd_no_decay_on_norm(model, lr):
    """weight_decay_skip = "bias_and_norm": decay conv and linear weights only."""
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    rest = [p for n, p in model.named_parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0}],
                           lr=lr, momentum=0.9, nesterov=True)


def augment(x, g, crop):
    """Random horizontal flip per sample, then (crop > 0) a random crop of the image padded by
    crop zeros. Only resnet20 crops, and only on the random CIFAR-format data of the speed
    runs, so the pad value (dtrain pads with black pixels) does not matter here."""
    b, c, h, w = x.shape
    flip = torch.rand(b, generator=g) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    if crop:
        xp = F.pad(x, (crop, crop, crop, crop))
        oy = torch.randint(0, 2 * crop + 1, (b,), generator=g)
        ox = torch.randint(0, 2 * crop + 1, (b,), generator=g)
        rows = (oy[:, None] + torch.arange(h))[:, :, None]
        cols = (ox[:, None] + torch.arange(w))[:, None, :]
        x = xp.permute(0, 2, 3, 1)[torch.arange(b)[:, None, None], rows, cols].permute(0, 3, 1, 2)
    return x.contiguous()


def autocast(precision):
    """The context forward and loss run in: for bf16, torch.autocast on the CPU in bfloat16
    (conv and linear in bf16, the ops on autocast's fp32 list in fp32); for fp32, none."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def where_bf16_fails(model, x, y, loss_fn):
    """Re-runs one bf16 step of a model whose step raised, without DDP, with hooks that keep the
    stack of modules whose forward is running: returns where it fails ("the forward of
    layers.5 (MaxPool2d)", "the loss", "the backward pass") and the exception, or (None, None)
    when the re-run passes."""
    net = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    names = {m: n for n, m in net.named_modules()}
    running, hooks = [], []
    def enter(mod, inp):
        running.append(mod)  # a hook's non-None return would replace the input or output

    def leave(mod, inp, out):
        running.pop()

    for m in names:
        hooks.append(m.register_forward_pre_hook(enter))
        hooks.append(m.register_forward_hook(leave))
    stage = "forward"
    try:
        with autocast("bf16"):
            out = net(x)
            stage = "loss"
            loss = loss_fn(out, y)
        stage = "backward pass"
        loss.backward()
    except Exception as e:
        if stage != "forward":
            return f"the {stage}", e
        m = running[-1] if running else net
        return f"the forward of {names[m] or 'the model'} ({type(m).__name__})", e
    finally:
        for h in hooks:
            h.remove()
    return None, None


def train_worker(rank, args, data, queue):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.procs > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", rank=rank, world_size=args.procs)
        if args.pin:
            os.sched_setaffinity(0, set(range(rank * args.threads, (rank + 1) * args.threads)))
    xs, ys, xt, yt = data
    if args.model == "convnet":
        model, loss_fn = ConvNet(), F.nll_loss
        opt = torch.optim.Adadelta(model.parameters(), lr=0.5, rho=0.9, eps=1e-6)
    elif args.model == "cnn":
        model, loss_fn = CNN(), F.cross_entropy
        opt = torch.optim.Adam(model.parameters(), lr=1e-5, weight_decay=0.005)
    else:
        fashion = args.model == "fashion-resnet"
        model = resnet(2, 1) if fashion else resnet(3, 3)
        smoothing = 0.1 if fashion else 0.0
        loss_fn = lambda out, y: F.cross_entropy(out, y, label_smoothing=smoothing)
        opt = sgd_no_decay_on_norm(model, 0.1)
    if args.procs > 1:
        model = nn.parallel.DistributedDataParallel(model)
    batch = args.batch
    n = xs.shape[0]
    # One generator, seeded alike on every rank: each epoch draws a fresh permutation (as
    # DataLoader(shuffle=True) / DistributedSampler.set_epoch do) and every rank draws the same.
    # An epoch is whole batches only (DataLoader's drop_last=True; the reference config sets
    # train.drop_last the same way): 60,000 / 128 -> 468 steps.
    g = torch.Generator().manual_seed(args.seed)
    steps = (n // args.procs) // batch if args.steps == 0 else args.steps
    sched = None
    total = steps * args.epochs
    if args.model == "fashion-resnet":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=total,
                                                    cycle_momentum=False)
    elif args.model == "resnet20":  # configs/cifar10-resnet20.cfg: 1 epoch warmup, then cosine
        warm = steps
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: (t + 1) / warm if t < warm else
                                                  (1 + math.cos(math.pi * min(t - warm, total - warm)
                                                                / max(1, total - warm))) / 2)
    crop = 4 if args.model == "resnet20" else 0
    aug = torch.Generator().manual_seed(args.seed * 1000 + rank)
    model.train()
    t0 = time.perf_counter()
    done = 0
    x = y = xs[:0]
    try:
        for epoch in range(args.epochs):
            shard = torch.randperm(n, generator=g)[rank::args.procs]
            for s in range(steps):
                idx = shard[(s * batch) % len(shard):][:batch]
                x, y = xs[idx], ys[idx]
                if sched is not None:
                    x = augment(x, aug, crop)
                opt.zero_grad(set_to_none=True)
                with autocast(args.precision):  # the optimizer stays outside: fp32 master weights
                    loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                done += len(idx)
        elapsed = time.perf_counter() - t0
        acc = None
        if rank == 0 and args.eval:
            x = None  # a failure from here on is the evaluation's
            model.eval()
            with torch.no_grad(), autocast(args.precision):
                correct = sum((model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
                              for i in range(0, xt.shape[0], 1000))
            acc = correct / xt.shape[0]
    except (RuntimeError, NotImplementedError) as e:
        if args.precision != "bf16":
            raise
        where, err = ("the evaluation (--eval)", e) if x is None else where_bf16_fails(model, x, y, loss_fn)
        if where is None:
            where, err = "a step (a re-run of one step without DDP passed)", e
        if rank == 0:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            print(f"torch_ref.py: {args.model}: the CPU autocast of torch {torch.__version__} cannot "
                  f"train this model in bfloat16: {where} raised: {first}", file=sys.stderr, flush=True)
        os._exit(1)  # no traceback, and no DDP teardown waiting on the other ranks
    if rank == 0:
        queue.put({"event": "final", "impl": "pytorch", "torch": torch.__version__, "model": args.model,
                   "precision": args.precision, "instances": args.procs, "threads": args.threads,
                   "batch_per_instance": batch, "steps": steps * args.epochs, "seconds": elapsed,
                   "samples_per_s": done * args.procs / elapsed, "test_accuracy": acc})
    if args.procs > 1:
        dist.destroy_process_group()


def allreduce_worker(rank, args, queue):
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    size = 1024
    while size <= args.max_bytes:
        t = torch.ones(size // 4)
        iters = max(5, min(1000, (64 << 20) // size))
        for _ in range(3):
            dist.all_reduce(t)
        dist.barrier()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        med = sorted(times)[len(times) // 2]
        if rank == 0:
            algbw = size / med / 1e9
            queue.put({"event": "allreduce", "impl": "gloo", "ranks": args.procs, "bytes": size,
                       "us": med * 1e6, "algbw_GBs": algbw,
                       "busbw_GBs": algbw * 2 * (args.procs - 1) / args.procs})
        size *= 4 if size < (1 << 20) else 2
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=["convnet", "cnn", "fashion-resnet", "resnet20", "allreduce"])
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0, help="per-process batch (default 128/procs or 32)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="steps per epoch (0 = full epoch)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--eval", action="store_true", help="report test accuracy")
    ap.add_argument("--pin", action="store_true", help="pin process r to cores r*T..r*T+T-1")
    ap.add_argument("--data", default=FASHION)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    args = ap.parse_args()
    if args.model == "allreduce" and args.precision != "fp32":
        ap.error("--precision applies to the training models; allreduce sums float32")
    os.environ["MASTER_PORT"] = str(29500 + os.getpid() % 1000)
    ctx = mp.get_context("fork")
    queue = ctx.SimpleQueue()
    if args.model == "allreduce":
        procs = [ctx.Process(target=allreduce_worker, args=(r, args, queue)) for r in range(args.procs)]
    else:
        if args.batch == 0:
            args.batch = 32 if args.model == "cnn" else 128 // args.procs
        if args.model == "convnet":
            data = load_fashion(args.data)
        elif args.model == "fashion-resnet":  # configs/fashion-resnet.cfg's statistics
            data = load_fashion(args.data, 0.2860, 0.3530)
        else:
            data = load_cifar_format()
        procs = [ctx.Process(target=train_worker, args=(r, args, data, queue)) for r in range(args.procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    while not queue.empty():
        print(json.dumps(queue.get()), flush=True)
    return max(p.exitcode for p in procs)


if __name__ == "__main__":
    sys.exit(main())
