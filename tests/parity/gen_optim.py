#!/usr/bin/python3
"""PyTorch reference for tests/unit/test_parity_optim.c.

usage: gen_optim.py OUTDIR

For every optimizer/option case below, writes raw little-endian float32 files
  OUTDIR/<case>.init   initial parameters (n)
  OUTDIR/<case>.grads  the gradient of each step (steps x n)
  OUTDIR/<case>.final  torch.optim's parameters after those steps (n)
and one line per case in OUTDIR/manifest.txt:
  name type n steps lr lr_decay momentum dampening nesterov weight_decay beta1 beta2 amsgrad eps rho
The learning rate of step k (0-based) is lr * lr_decay**k, set on the param group before the
step, as a schedule would. Uses the single-tensor path (foreach=False), which is 1.13's default.
"""
import os
import sys

import numpy as np
import torch

DEFAULTS = dict(lr_decay=1.0, momentum=0.0, dampening=0.0, nesterov=0, weight_decay=0.0,
                beta1=0.9, beta2=0.999, amsgrad=0, eps=1e-8, rho=0.9)

CASES = [
    ("sgd_plain", "sgd", dict(lr=0.1)),
    ("sgd_wd", "sgd", dict(lr=0.1, weight_decay=0.01)),
    ("sgd_momentum", "sgd", dict(lr=0.05, momentum=0.9)),
    ("sgd_dampening", "sgd", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=1e-3)),
    ("sgd_nesterov", "sgd", dict(lr=0.05, momentum=0.8, nesterov=1, weight_decay=5e-4)),
    ("sgd_sched", "sgd", dict(lr=0.1, momentum=0.9, lr_decay=0.9)),
    ("adam", "adam", dict(lr=1e-3)),
    ("adam_wd", "adam", dict(lr=2e-3, weight_decay=0.01, beta1=0.8, beta2=0.99)),
    ("adam_amsgrad", "adam", dict(lr=1e-3, amsgrad=1)),
    ("adam_amsgrad_wd", "adam", dict(lr=1e-2, amsgrad=1, weight_decay=0.1, eps=1e-6)),
    ("adamw", "adamw", dict(lr=1e-3, weight_decay=1e-2)),
    ("adamw_amsgrad", "adamw", dict(lr=5e-3, weight_decay=0.1, amsgrad=1, lr_decay=0.95)),
    ("adadelta", "adadelta", dict(lr=1.0, eps=1e-6)),
    ("adadelta_wd", "adadelta", dict(lr=0.5, rho=0.95, eps=1e-5, weight_decay=0.01)),
    ("adam_large", "adam", dict(lr=1e-3, weight_decay=1e-4)),  # big enough for OpenMP
]
N, STEPS, N_LARGE = 4099, 12, 70001


def make_optimizer(kind, p, c):
    if kind == "sgd":
        return torch.optim.SGD([p], lr=c["lr"], momentum=c["momentum"], dampening=c["dampening"],
                               weight_decay=c["weight_decay"], nesterov=bool(c["nesterov"]),
                               foreach=False)
    betas = (c["beta1"], c["beta2"])
    if kind == "adam":
        return torch.optim.Adam([p], lr=c["lr"], betas=betas, eps=c["eps"],
                                weight_decay=c["weight_decay"], amsgrad=bool(c["amsgrad"]),
                                foreach=False)
    if kind == "adamw":
        return torch.optim.AdamW([p], lr=c["lr"], betas=betas, eps=c["eps"],
                                 weight_decay=c["weight_decay"], amsgrad=bool(c["amsgrad"]),
                                 foreach=False)
    return torch.optim.Adadelta([p], lr=c["lr"], rho=c["rho"], eps=c["eps"],
                                weight_decay=c["weight_decay"], foreach=False)


def run_case(outdir, name, kind, options, index):
    c = dict(DEFAULTS, **options)
    n = N_LARGE if name.endswith("_large") else N
    rng = np.random.default_rng(1000 + index)
    init = rng.uniform(-1, 1, n).astype(np.float32)
    # gradients of varying scale, shrinking over time so AMSGrad's max matters
    grads = (rng.standard_normal((STEPS, n)) *
             np.linspace(1.0, 0.05, STEPS)[:, None]).astype(np.float32)
    p = torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt = make_optimizer(kind, p, c)
    for k in range(STEPS):
        opt.param_groups[0]["lr"] = c["lr"] * c["lr_decay"] ** k
        p.grad = torch.from_numpy(grads[k].copy())
        opt.step()
    init.tofile(os.path.join(outdir, name + ".init"))
    grads.tofile(os.path.join(outdir, name + ".grads"))
    p.detach().numpy().astype(np.float32).tofile(os.path.join(outdir, name + ".final"))
    fields = [name, kind, n, STEPS] + [repr(float(c[k])) for k in
                                       ("lr", "lr_decay", "momentum", "dampening")]
    fields += [int(c["nesterov"])] + [repr(float(c[k])) for k in
                                      ("weight_decay", "beta1", "beta2")]
    fields += [int(c["amsgrad"]), repr(float(c["eps"])), repr(float(c["rho"]))]
    return " ".join(str(f) for f in fields)


def main():
    outdir = sys.argv[1]
    torch.set_num_threads(1)
    lines = [run_case(outdir, name, kind, opts, i) for i, (name, kind, opts) in enumerate(CASES)]
    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
