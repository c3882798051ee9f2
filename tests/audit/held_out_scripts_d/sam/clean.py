"""Sharpness-aware minimization at a tiny size, written after Foret, Kleiner, Mobahi and Neyshabur,
"Sharpness-Aware Minimization for Efficiently Improving Generalization" (ICLR 2021), Algorithm 1,
with the two-step optimizer of davda54/sam (https://github.com/davda54/sam, sam.py): the gradient
at ``w`` gives the ascent step ``e(w) = rho g / ||g||``, the gradients are cleared, the gradient
is taken again at ``w + e(w)``, and the base optimizer (SGD with momentum) steps from ``w`` with
it. Two phases, as in the paper's fine-tuning experiments: the model is first trained with plain
SGD, then fine-tuned with SAM. An MLP classifier on vectors made in the script, with a tenth of the
labels flipped. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--rho", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 4
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    x = means[y] + torch.randn(n, dim)
    flip = torch.rand(n) < 0.1
    return x, torch.where(flip, torch.randint(0, classes, (n,)), y)


class SAM:
    def __init__(self, base_optimizer, rho):
        self.base_optimizer, self.rho = base_optimizer, rho
        self.params = [p for group in base_optimizer.param_groups for p in group["params"]]
        self.e_w = {}

    def zero_grad(self):
        self.base_optimizer.zero_grad()

    @torch.no_grad()
    def first_step(self):
        grad_norm = torch.stack([p.grad.norm() for p in self.params if p.grad is not None]).norm()
        for p in self.params:
            if p.grad is None:
                continue
            self.e_w[p] = p.grad * (self.rho / (grad_norm + 1e-12))
            p.add_(self.e_w[p])

    @torch.no_grad()
    def second_step(self):
        for p in self.params:
            if p in self.e_w:
                p.sub_(self.e_w.pop(p))
        self.base_optimizer.step()


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
base_optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

# phase 1: plain SGD
for step in range(args.warmup_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    base_optimizer.zero_grad()
    loss.backward()
    base_optimizer.step()
    print(f"sgd {step} loss {loss.item():.4f}")

# phase 2: fine-tuning with SAM
optimizer = SAM(base_optimizer, args.rho)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.first_step()
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.second_step()
    print(f"sam {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
