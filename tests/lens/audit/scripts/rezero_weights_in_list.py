"""ReZero at a tiny size, after Bachlechner et al., "ReZero is All You Need: Fast Convergence at
Large Depth" (UAI 2021) and its reference code majumderb/rezero (``x = x + self.resweight *
sublayer(x)``): a deep residual MLP whose every block is scaled by a learned scalar that starts
at zero, so the network starts as the identity. The scalars are kept in an
``nn.ParameterList`` in the published code. Regression on data made in the
script. Bug: the scalars are kept in a plain list, which torch does not register, so the
optimizer built from ``model.parameters()`` never steps them and every block stays switched
off. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)


class ReZeroMLP(nn.Module):
    def __init__(self, width=16, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU())
                                    for _ in range(depth))
        self.resweights = [nn.Parameter(torch.zeros(1)) for _ in range(depth)]

    def forward(self, x):
        for block, alpha in zip(self.blocks, self.resweights):
            x = x + alpha * block(x)
        return x


x = torch.randn(64, 16)
y = torch.tanh(x @ torch.randn(16, 16) / 4)
model = ReZeroMLP()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(args.steps):
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
