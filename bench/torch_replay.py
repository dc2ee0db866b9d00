#!/usr/bin/python3
"""Replays a dtrain run of configs/fashion-convnet.cfg in PyTorch, to tell implementation
differences from seed luck: dtrain's initial weights (read from a checkpoint), dtrain's sample
order and dtrain's dropout masks (util/rng.c's xoshiro256** streams, keyed as data/sampler.c and
nn/layer_dropout.c key them, re-implemented here), with torch's layers, loss and Adadelta.

    # dtrain's initial weights: one step at a learning rate too small to move a float
    # (optimizer.lr = 0 means "the optimizer's default" in the config)
    dtrain train configs/fashion-convnet.cfg --set train.seed=1 --set optimizer.lr=1e-30 \
        --set train.max_steps=1 --set checkpoint.dir=/tmp/init1
    bench/torch_replay.py /tmp/init1/last.safetensors --seed 1 --dmask --eval
    bench/torch_replay.py /tmp/init1/last.safetensors --seed 1 --dmask --steps 10 --out w.npz
    bench/torch_replay.py /tmp/init1/last.safetensors --seed 1 --dmask --epochs 5 --drop-last --eval

--out saves the weights (npz) to compare with dtrain's checkpoint after --set
train.max_steps=K: they agree to float rounding (1e-7 after 1-3 steps); training is chaotic
in float32, so after ~50 steps the runs differ in detail but not in distribution. Without
--dmask torch draws its own masks; --torch-init / --torch-order use torch's init and
torch.randperm instead of dtrain's. Needs Debian's python3-torch and numpy."""
import argparse, json, struct, sys, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from torch_ref import load_fashion, FASHION

M = (1 << 64) - 1
def mix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
def key(seed, a, b, c):
    k = mix64(seed); k = mix64(k ^ a); k = mix64(k ^ b); return mix64(k ^ c)
class Rng:
    def __init__(self, k):
        self.s = []
        x = k
        for _ in range(4):
            x = mix64(x); self.s.append(x)
    def next(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M
        r = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)
        return r
    def below(self, n):
        limit = M - M % n
        while True:
            x = self.next()
            if x < limit: return x % n
def perm(seed, epoch, n):
    p = list(range(n)); r = Rng(key(seed, 2, epoch, 0))
    for i in range(n, 1, -1):
        j = r.below(i); p[i - 1], p[j] = p[j], p[i - 1]
    return p

U64 = np.uint64
def vmix(x):
    with np.errstate(over="ignore"):
        x = x + U64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> U64(30))) * U64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> U64(27))) * U64(0x94d049bb133111eb)
    return x ^ (x >> U64(31))
def vrotl(x, k):
    return (x << U64(k)) | (x >> U64(64 - k))
def dmask(seed, epoch, ids, layer, units, p):
    k = vmix(np.full(len(ids), seed, dtype=U64)); k = vmix(k ^ U64(3)); k = vmix(k ^ U64(epoch))
    k = vmix(k ^ (ids.astype(U64) * U64(64) + U64(layer)))
    s = []; x = k
    for _ in range(4):
        x = vmix(x); s.append(x)
    out = np.empty((len(ids), units), dtype=bool)
    with np.errstate(over="ignore"):
        for u in range(units):
            r = vrotl(s[1] * U64(5), 7) * U64(9)
            t = s[1] << U64(17)
            s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = vrotl(s[3], 45)
            out[:, u] = (r >> U64(40)).astype(np.float32) * np.float32(2.0 ** -24) >= np.float32(p)
    return torch.from_numpy(out)

def load_st(path):
    b = open(path, "rb").read(); n, = struct.unpack("<Q", b[:8]); h = json.loads(b[8:8 + n]); d = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32": continue
        a, e = v["data_offsets"]; out[k] = torch.from_numpy(np.frombuffer(d[a:e], dtype=np.float32).reshape(v["shape"]).copy())
    return out

ap = argparse.ArgumentParser()
ap.add_argument("init"); ap.add_argument("--seed", type=int, default=1); ap.add_argument("--steps", type=int, default=0)  # 0: every step of --epochs
ap.add_argument("--p2d", type=float, default=0.1); ap.add_argument("--p", type=float, default=0.25)
ap.add_argument("--torch-init", action="store_true"); ap.add_argument("--torch-order", action="store_true")
ap.add_argument("--dmask", action="store_true"); ap.add_argument("--out"); ap.add_argument("--eval", action="store_true"); ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--drop-last", action="store_true")  # whole batches only, as the config's train.drop_last
a = ap.parse_args()
torch.set_num_threads(1); torch.manual_seed(a.seed)
xs, ys, xt, yt = load_fashion(FASHION)
layers = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Dropout2d(a.p2d), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(), nn.Dropout(a.p), nn.Linear(64, 10), nn.LogSoftmax(dim=1))
model = nn.Module(); model.layers = layers
if not a.torch_init:
    sd = {k: v for k, v in load_st(a.init).items() if k.startswith("layers.")}
    model.load_state_dict(sd)
opt = torch.optim.Adadelta(model.parameters(), lr=0.5, rho=0.9, eps=1e-6)
n = xs.shape[0]; B = 128; steps_per_epoch = n // B if a.drop_last else (n + B - 1) // B
if a.steps == 0: a.steps = steps_per_epoch * a.epochs
step = 0; acc468 = None
for epoch in range(a.epochs):
    if a.torch_order:
        g = torch.Generator().manual_seed(a.seed + epoch); p = torch.randperm(n, generator=g)
    else:
        p = torch.tensor(perm(a.seed, epoch, n))
    for s in range(steps_per_epoch):
        if step >= a.steps: break
        if a.eval and not a.drop_last and s == steps_per_epoch - 1:
            model.eval()
            with torch.no_grad():
                acc468 = (torch.cat([layers(xt[i:i + 1000]) for i in range(0, 10000, 1000)]).argmax(1) == yt).float().mean().item()
        idx = p[s * B:(s + 1) * B]
        model.train(); opt.zero_grad()
        if a.dmask:
            ids = idx.numpy()
            m5 = dmask(a.seed, epoch, ids, 5, 32, a.p2d).float() * (1.0 / (1.0 - np.float32(a.p2d)))
            m9 = dmask(a.seed, epoch, ids, 9, 64, a.p).float() * (1.0 / (1.0 - np.float32(a.p)))
            h = layers[:5](xs[idx]) * m5[:, :, None, None]
            h = layers[6:9](h) * m9
            out = layers[10:](h)
        else:
            out = layers(xs[idx])
        loss = F.nll_loss(out, ys[idx]); loss.backward(); opt.step(); step += 1
if a.out:
    np.savez(a.out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if a.eval:
    model.eval()
    with torch.no_grad():
        out = torch.cat([layers(xt[i:i + 1000]) for i in range(0, 10000, 1000)])
    print(json.dumps({"acc_before_last_step": acc468, "steps": step, "test_accuracy": (out.argmax(1) == yt).float().mean().item(),
                      "test_loss": F.nll_loss(out, yt).item()}))
