"""Reference for tests/unit/test_parity_bf16.c: one training step's gradients of a small conv
net under torch.autocast('cpu', dtype=torch.bfloat16) (PyTorch 1.13), and in fp32.

Net (dtrain's layer list in the test): conv2d 3->16 3x3 pad 1, relu, conv2d 16->16 3x3 pad 1,
relu, flatten, linear 1024->10 (no max-pool: bf16-rounded activations tie often, and
autocast's pool and dtrain's, which sees fp32 values, then route the gradient differently); cross-entropy (mean) over a batch of 8 3x8x8 inputs.
Writes OUTDIR/params.f32 (the parameters in state_dict order, dtrain's arena order), x.f32,
labels.u8, grads_bf16.f32 (autocast) and grads_fp32.f32 (plain fp32), all little-endian."""
import sys

import numpy as np
import torch

out = sys.argv[1]
torch.manual_seed(3)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Flatten(), torch.nn.Linear(1024, 10))
x = torch.randn(8, 3, 8, 8)
y = torch.randint(0, 10, (8,))


def grads(autocast):
    net.zero_grad()
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
        logits = net(x)
    loss = torch.nn.functional.cross_entropy(logits.float(), y)
    loss.backward()
    return np.concatenate([p.grad.numpy().ravel() for p in net.parameters()])


np.concatenate([p.detach().numpy().ravel() for p in net.parameters()]).astype('<f4').tofile(
    f"{out}/params.f32")
x.numpy().astype('<f4').tofile(f"{out}/x.f32")
y.numpy().astype(np.uint8).tofile(f"{out}/labels.u8")
grads(True).astype('<f4').tofile(f"{out}/grads_bf16.f32")
grads(False).astype('<f4').tofile(f"{out}/grads_fp32.f32")
