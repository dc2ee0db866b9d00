#!/usr/bin/python3
"""PyTorch reference for tests/unit/test_parity_recipe.c: the training-recipe options.

usage: gen_recipe.py OUTDIR

Writes text files of numbers (whitespace separated, %.9g floats, %.17g rates):
  lr_one_cycle.txt     T, max_lr, pct_start, div_factor, final_div_factor, then the T rates
                       OneCycleLR(anneal_strategy="cos", cycle_momentum=False) gives
  lr_warmup_cosine.txt T, lr, warmup, min_lr, then the T rates of
                       SequentialLR(LinearLR(1/warmup, 1, warmup - 1), CosineAnnealingLR(
                       T - warmup, min_lr), milestones=[warmup])
  label_smoothing.txt  B, C, eps, logits (B x C), labels (B), mean loss, grad of the mean (B x C)
  clip.txt             n, max_norm, grads (n), total norm, clipped grads (n)   (twice: one
                       clipping case, one below the limit)
  wd_skip.txt          n_weight (a 2-D tensor), n_bias, lr, momentum, wd, steps, initial weight,
                       initial bias, grads of each step (steps x (n_weight + n_bias)), final weight
                       and bias after SGD(nesterov) with two groups: the bias with weight_decay 0
  wd_skip_adamw.txt    the same with AdamW (default betas and eps; momentum unused)
"""
import math
import os
import sys

import warnings

import torch

# SequentialLR steps its second scheduler with an explicit epoch, which 1.13 warns about.
warnings.filterwarnings("ignore", category=UserWarning)

torch.manual_seed(17)
out = sys.argv[1]


def write(name, *parts):
    with open(os.path.join(out, name), "w") as f:
        for p in parts:
            if isinstance(p, torch.Tensor):
                f.write(" ".join("%.9g" % v for v in p.detach().flatten().tolist()) + "\n")
            elif isinstance(p, (list, tuple)):
                f.write(" ".join("%.17g" % v for v in p) + "\n")
            else:
                f.write("%.17g\n" % p)


def rates(opt, sched, steps):
    seq = []
    for _ in range(steps):
        seq.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return seq


def one_cycle():
    T, max_lr, pct, div, fdiv = 97, 0.4, 0.25, 20.0, 1e3
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=max_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=T, pct_start=pct,
                                                div_factor=div, final_div_factor=fdiv,
                                                anneal_strategy="cos", cycle_momentum=False)
    write("lr_one_cycle.txt", T, max_lr, pct, div, fdiv, rates(opt, sched, T))


def warmup_cosine():
    T, lr, warm, min_lr = 60, 0.2, 8, 0.01
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    s1 = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warm, end_factor=1.0,
                                           total_iters=warm - 1)
    s2 = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=T - warm, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [s1, s2], milestones=[warm])
    write("lr_warmup_cosine.txt", T, lr, warm, min_lr, rates(opt, sched, T))


def label_smoothing():
    B, C, eps = 7, 10, 0.1
    x = (torch.randn(B, C) * 3).requires_grad_()
    y = torch.randint(0, C, (B,))
    loss = torch.nn.CrossEntropyLoss(label_smoothing=eps)(x, y)
    loss.backward()
    write("label_smoothing.txt", B, C, eps, x, y.float(), float(loss), x.grad)


def clip():
    parts = []
    for n, max_norm, scale in ((1000, 1.0, 1.0), (300, 50.0, 0.5)):
        ws = [torch.nn.Parameter(torch.zeros(k)) for k in (n // 3, n - n // 3)]
        for w in ws:
            w.grad = torch.randn(w.shape) * scale
        before = torch.cat([w.grad.clone() for w in ws])
        norm = torch.nn.utils.clip_grad_norm_(ws, max_norm)
        parts += [n, max_norm, before, float(norm), torch.cat([w.grad for w in ws])]
    write("clip.txt", *parts)


def wd_skip(name, kind):
    nw, nb, lr, mom, wd, steps = (12, 30), 12, 0.05, 0.9, 5e-2, 6
    w = torch.nn.Parameter(torch.randn(nw))
    b = torch.nn.Parameter(torch.randn(nb))
    w0, b0 = w.detach().clone(), b.detach().clone()
    groups = [{"params": [w]}, {"params": [b], "weight_decay": 0.0}]
    if kind == "sgd":
        opt = torch.optim.SGD(groups, lr=lr, momentum=mom, nesterov=True, weight_decay=wd,
                              foreach=False)
    else:
        opt = torch.optim.AdamW(groups, lr=lr, weight_decay=wd, foreach=False)
    grads = []
    for _ in range(steps):
        w.grad, b.grad = torch.randn(nw), torch.randn(nb)
        grads.append(torch.cat([w.grad.flatten(), b.grad]))
        opt.step()
    write(name, nw[0] * nw[1], nb, lr, mom, wd, steps, w0, b0, torch.stack(grads), w, b)


one_cycle()
warmup_cosine()
label_smoothing()
clip()
wd_skip("wd_skip.txt", "sgd")
wd_skip("wd_skip_adamw.txt", "adamw")
