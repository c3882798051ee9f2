"""Learned ISTA with tied weights at a tiny size, written after Gregor and LeCun, "Learning Fast
Approximations of Sparse Coding" (ICML 2010), and the PyTorch LISTA of AbhyudayPuri/
learnable-ISTA (https://github.com/AbhyudayPuri/learnable-ISTA/blob/master/lista/lista.py): ISTA
unfolded for a fixed number of steps, one step's weights (``W``, ``S``, the threshold) shared by
every step, each step reading the measurement and the code the step before made (zeros before
the first), and the whole unfolding trained end to end by the loss on the last code against the
sparse code the measurement was made from. Here the step is a module that the training loop
calls once per unfolded step; ``--deep`` samples the number of steps (1 to ``--unfolded``) each
iteration and puts every step's code in the loss (deep supervision, as unrolled solvers are
often trained). Data: sparse codes and a random dictionary made in the script. The same network
is called again on the same measurement with its own earlier output, and the loss trains it
through every call, on purpose: no finding."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=8)
parser.add_argument("--unfolded", type=int, default=3)
parser.add_argument("--deep", action="store_true", help="random depth, every step in the loss")
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

MEASURED, CODE, BATCH = 12, 24, 32
dictionary = torch.randn(MEASURED, CODE) / MEASURED ** 0.5


class ListaStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Linear(MEASURED, CODE, bias=False)
        self.S = nn.Linear(CODE, CODE, bias=False)
        self.threshold = nn.Parameter(torch.full((CODE,), 0.1))

    def forward(self, y, z):
        u = self.W(y) + self.S(z)
        return torch.sign(u) * F.relu(u.abs() - self.threshold)


step = ListaStep()
optimizer = torch.optim.Adam(step.parameters(), lr=1e-2)
for iteration in range(args.iterations):
    support = torch.rand(BATCH, CODE) < 0.15
    z_true = torch.randn(BATCH, CODE) * support
    y = z_true @ dictionary.T + 0.01 * torch.randn(BATCH, MEASURED)
    depth = int(torch.randint(1, args.unfolded + 1, ())) if args.deep else args.unfolded
    z = torch.zeros(BATCH, CODE)
    loss = 0.0
    for _ in range(depth):
        z = step(y, z)
        if args.deep:
            loss = loss + F.mse_loss(z, z_true) / depth
    if not args.deep:
        loss = F.mse_loss(z, z_true)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save(step.state_dict(), args.out)
