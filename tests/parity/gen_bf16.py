"""Reference for tests/unit/test_parity_bf16.c: one training step's gradients of a small conv
net under torch.autocast('cpu', dtype=torch.bfloat16) (PyTorch 1.13), and in fp32.

Net (dtrain's layer list in the test): conv2d 3->16 3x3 pad 1, relu, conv2d 16->16 3x3 pad 1,
relu, flatten, linear 1024->10 (no max-pool: bf16-rounded activations tie often, and
autocast's pool and dtrain's, which sees fp32 values, then route the gradient differently); cross-entropy (mean) over a batch of 8 3x8x8 inputs.
Writes OUTDIR/params.f32 (the parameters in state_dict order, dtrain's arena order), x.f32,
labels.u8, grads_bf16.f32 (autocast) and grads_fp32.f32 (plain fp32), all little-endian.

Then the same files prefixed "down_" for a downsampling net (the stride-2 tile conv and a
projection shortcut): conv2d 3->16 3x3 pad 1, relu, then a block relu(relu(conv2d 16->32 3x3
stride 2 pad 1 (h)) + conv2d 16->32 1x1 stride 2 (h)) (dtrain: conv2d, relu, add with
shortcut = "projection", batchnorm = false, relu), flatten, linear 512->10, same batch."""
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


class Down(torch.nn.Module):
    """conv (stride 2) - relu - add (1x1 stride-2 projection of the block input) - relu."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.proj = torch.nn.Conv2d(16, 32, 1, stride=2)

    def forward(self, h):
        return torch.relu(torch.relu(self.conv(h)) + self.proj(h))


def grads(net, autocast):
    net.zero_grad()
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
        logits = net(x)
    loss = torch.nn.functional.cross_entropy(logits.float(), y)
    loss.backward()
    return np.concatenate([p.grad.numpy().ravel() for p in net.parameters()])


def write(net, prefix):
    np.concatenate([p.detach().numpy().ravel() for p in net.parameters()]).astype(
        '<f4').tofile(f"{out}/{prefix}params.f32")
    grads(net, True).astype('<f4').tofile(f"{out}/{prefix}grads_bf16.f32")
    grads(net, False).astype('<f4').tofile(f"{out}/{prefix}grads_fp32.f32")


x.numpy().astype('<f4').tofile(f"{out}/x.f32")
y.numpy().astype(np.uint8).tofile(f"{out}/labels.u8")
write(net, "")
torch.manual_seed(4)
write(torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), Down(),
    torch.nn.Flatten(), torch.nn.Linear(512, 10)), "down_")
