#!/usr/bin/python3
"""PyTorch reference values for tests/unit/test_parity_layers.c.

Usage: /usr/bin/python3 tests/parity/gen_layers.py OUTDIR

For each case it writes OUTDIR/<case>.<tensor>.bin (raw little-endian float32, C order) and
one line "<case>.<tensor> <count>" per tensor in OUTDIR/manifest.txt. Tensors: inputs (x, dy,
labels as floats), parameters under their state_dict names ("layers.0.weight"), outputs (y,
loss), gradients (dx, grad.<param name>) and, for batchnorm, running statistics after the step.
The C test builds the same layers, loads the inputs and parameters and compares the rest.
Cases use the objective sum(y * dy) for single layers, so dx = d/dx of that, and the mean loss
(= sum loss with grad_scale 1/batch) for whole models.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1234)
torch.set_num_threads(1)
OUT = sys.argv[1]
manifest = []


def save(case, name, t):
    a = t.detach().to(torch.float32).contiguous().numpy().astype('<f4')
    key = f"{case}.{name}"
    a.tofile(os.path.join(OUT, key + ".bin"))
    manifest.append(f"{key} {a.size}")


class Seq(nn.Module):
    """Wraps nn.Sequential under `layers`, so state_dict keys are layers.<i>.<name>."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


def layer_case(case, module, shape, train=True, flatten_input=False):
    model = Seq(module)
    for p in model.parameters():  # move batchnorm's gamma/beta off their 1/0 init
        if module.__class__.__name__.startswith("BatchNorm"):
            with torch.no_grad():
                p.copy_(torch.randn_like(p))
    model.train(train)
    x = torch.randn(*shape, requires_grad=True)
    for k, v in model.state_dict().items():
        save(case, k, v)
    y = model(x.flatten(1) if flatten_input else x)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    save(case, "x", x)
    save(case, "y", y)
    save(case, "dy", dy)
    save(case, "dx", x.grad)
    for k, p in model.named_parameters():
        save(case, "grad." + k, p.grad)
    if not train:
        return
    for k, v in model.state_dict().items():
        if "running" in k or "num_batches" in k:
            save(case, "after." + k, v)
    if isinstance(module, nn.BatchNorm2d):
        model.eval()
        save(case, "eval_y", model(x))


def loss_case(case, kind, logits, labels):
    logits = logits.clone().requires_grad_(True)
    inp = F.log_softmax(logits, dim=1).detach().requires_grad_(True) if kind == "nll" else logits
    loss = (F.nll_loss(inp, labels) if kind == "nll" else F.cross_entropy(inp, labels))
    loss.backward()  # mean over the batch: grad_scale = 1 / batch on the C side
    save(case, "x", inp)
    save(case, "labels", labels.float())
    save(case, "loss_sum", loss * labels.numel())
    save(case, "dx", inp.grad)


def dropout_case(case, module, shape):
    x = torch.randn(*shape, requires_grad=True)
    module.train()
    y = module(x)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    save(case, "x", x)
    save(case, "y", y)
    save(case, "dy", dy)
    save(case, "dx", x.grad)
    module.eval()
    save(case, "eval_y", module(x))


def model_case(case, model, shape, classes, loss, train):
    model.train(train)
    x = torch.randn(*shape)
    labels = torch.randint(0, classes, (shape[0],))
    for k, v in model.state_dict().items():
        save(case, k, v)
    out = model(x)
    fn = F.nll_loss if loss == "nll" else F.cross_entropy
    mean = fn(out, labels)
    mean.backward()
    save(case, "x", x)
    save(case, "labels", labels.float())
    save(case, "y", out)
    save(case, "loss_sum", mean * shape[0])
    for k, p in model.named_parameters():
        save(case, "grad." + k, p.grad)
    for k, v in model.state_dict().items():
        if "running" in k or "num_batches" in k:
            save(case, "after." + k, v)


layer_case("conv_s2p1", nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 6))
layer_case("conv_nobias", nn.Conv2d(2, 3, 2, bias=False), (2, 2, 5, 5))
layer_case("conv_k5", nn.Conv2d(3, 8, 5, padding=2), (3, 3, 9, 9))
layer_case("conv_wino", nn.Conv2d(16, 24, 3, padding=1), (2, 16, 9, 10))  # Winograd's shape
layer_case("conv_wino_s2", nn.Conv2d(16, 24, 3, stride=2, padding=1), (2, 16, 9, 10))  # its stride 2
layer_case("linear", nn.Linear(6, 4), (3, 2, 1, 3), flatten_input=True)
layer_case("maxpool", nn.MaxPool2d(3, stride=2, padding=1), (2, 2, 6, 5))
layer_case("maxpool2", nn.MaxPool2d(2), (2, 3, 6, 6))
layer_case("avgpool", nn.AvgPool2d(2, stride=2, padding=1), (2, 2, 5, 5))
layer_case("avgpool3", nn.AvgPool2d(3, stride=1, padding=1), (2, 2, 4, 5))
layer_case("relu", nn.ReLU(), (2, 3, 4, 4))
layer_case("batchnorm", nn.BatchNorm2d(3), (2, 3, 4, 4))
layer_case("batchnorm_mom", nn.BatchNorm2d(2, eps=1e-3, momentum=0.3), (3, 2, 3, 3))
layer_case("batchnorm_eval", nn.BatchNorm2d(3), (2, 3, 4, 4), train=False)
layer_case("log_softmax", nn.LogSoftmax(dim=1), (3, 5))
dropout_case("dropout", nn.Dropout(0.25), (4, 50))
dropout_case("dropout2d", nn.Dropout2d(0.5), (4, 16, 3, 3))

labels = torch.tensor([0, 3, 2, 4])
loss_case("nll", "nll", torch.randn(4, 5) * 3, labels)
big = torch.randn(4, 5) * 50
big[1] += 1000.0  # overflow in a naive exp()
loss_case("cross_entropy", "ce", big, labels)

convnet = Seq(nn.Conv2d(1, 16, 3, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 1), nn.ReLU(),
              nn.MaxPool2d(2), nn.Dropout2d(0.10), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(),
              nn.Dropout(0.25), nn.Linear(64, 10), nn.LogSoftmax(dim=1))
model_case("convnet", convnet, (3, 1, 28, 28), 10, "nll", train=False)
bncnn = Seq(nn.Conv2d(3, 4, 3, padding=1, bias=False),  # a bias before batchnorm has gradient 0
            nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
            nn.Linear(6, 7))
model_case("bncnn", bncnn, (4, 3, 8, 8), 7, "ce", train=True)

with open(os.path.join(OUT, "manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
