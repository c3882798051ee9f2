"""Sharpness-aware minimization at a tiny size, written after Foret, Kleiner, Mobahi and
Neyshabur, "Sharpness-Aware Minimization for Efficiently Improving Generalization" (ICLR 2021,
arXiv:2010.01412), Algorithm 1, in the form of davda54/sam (https://github.com/davda54/sam,
``sam.py`` and ``example/train.py``): SAM is an optimizer that wraps a base optimizer over the
same parameter groups; ``first_step`` climbs to ``w + e(w)``, ``e(w) = rho g / ||g||``, and
clears the gradients when asked (``zero_grad=True``); the second pass's gradient, taken at
``w + e(w)``, is applied at ``w`` by ``second_step``, which moves back and steps the base
optimizer. A two-layer classifier on three Gaussian classes with a tenth of the labels flipped,
made in the script. The bug: ``first_step()`` called without ``zero_grad=True`` (its default
is ``False``), so the second pass's gradient is added to the first's and the base optimizer steps
with the sum of the gradients at ``w`` and at ``w + e(w)``."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--rho", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)
centres = 2 * torch.randn(3, 6)


def batch(n):
    y = torch.randint(0, 3, (n,))
    x = centres[y] + torch.randn(n, 6)
    noisy = torch.rand(n) < 0.1
    return x, torch.where(noisy, torch.randint(0, 3, (n,)), y)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        norm = torch.norm(torch.stack([p.grad.norm() for group in self.param_groups
                                       for p in group["params"] if p.grad is not None]))
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.detach().clone()
                p.add_(p.grad * scale)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if "old_p" in self.state[p]:
                    p.copy_(self.state[p]["old_p"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=args.rho, lr=0.1, momentum=0.9)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.first_step()
    F.cross_entropy(model(x), y).backward()
    optimizer.second_step(zero_grad=True)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
