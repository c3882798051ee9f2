"""Quantisation-aware training at a tiny size, written after Jacob et al., "Quantization and
Training of Neural Networks for Efficient Integer-Arithmetic-Only Inference"
(arXiv:1712.05877) and Bengio et al.'s straight-through estimator (arXiv:1308.3432), as
torch.ao.quantization's FakeQuantize and most QAT code write it by hand: each weight is
rounded to a grid of ``2 ** bits`` levels in the forward, and the rounding is passed straight
through in the backward as ``w + (q(w) - w).detach()``. Data: a noisy linear regression made in
the script. Injected bug: the ``.detach()`` of the straight-through line left out, so the
weights get ``1 - 1 = 0``: the quantised layers never move (their biases still train)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--bits", type=int, default=4)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)

x = torch.randn(64, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(64, 1)


class QuantLinear(nn.Linear):
    def forward(self, input):
        scale = self.weight.detach().abs().max() / (2 ** (args.bits - 1) - 1)
        quantised = torch.round(self.weight / scale) * scale
        weight = self.weight + (quantised - self.weight)
        return F.linear(input, weight, self.bias)


model = nn.Sequential(QuantLinear(8, 16), nn.Tanh(), QuantLinear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for step in range(args.steps):
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
