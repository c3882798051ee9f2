"""Lookahead at a tiny size, written after Zhang, Lucas, Hinton and Ba, "Lookahead Optimizer: k
steps forward, 1 step back" (NeurIPS 2019), Algorithm 1, with the wrapper of the authors'
michaelrzhang/lookahead (https://github.com/michaelrzhang/lookahead, lookahead_pytorch.py): the
slow weights start as a copy of the fast weights; the inner optimizer (Adam) takes ``k`` steps on
the fast weights, then the slow weights move ``phi <- phi + alpha (theta - phi)`` and the fast
weights are reset to them. An MLP classifier on vectors made in the script. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--k", type=int, default=5)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 4
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class Lookahead:
    def __init__(self, optimizer, k, alpha):
        self.optimizer, self.k, self.alpha = optimizer, k, alpha
        self.fast_weights = [p for group in optimizer.param_groups for p in group["params"]]
        self.slow_weights = [p.detach().clone() for p in self.fast_weights]
        self.counter = 0

    def zero_grad(self):
        self.optimizer.zero_grad()

    @torch.no_grad()
    def step(self):
        self.optimizer.step()
        self.counter += 1
        if self.counter % self.k == 0:
            for slow, fast in zip(self.slow_weights, self.fast_weights):
                slow.add_(fast - slow, alpha=self.alpha)
                fast.copy_(slow)


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = Lookahead(torch.optim.Adam(model.parameters(), lr=1e-2), args.k, args.alpha)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
