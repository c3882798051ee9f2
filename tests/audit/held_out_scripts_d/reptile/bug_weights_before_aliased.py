"""Reptile at a tiny size, written after Nichol, Achiam and Schulman, "On First-Order Meta-Learning
Algorithms" (arXiv:1803.02999), Algorithm 1 on the paper's sine-wave regression, with the outer
update of openai/supervised-reptile (https://github.com/openai/supervised-reptile, reptile.py):
the weights are exported before the inner loop (a copy), a few steps of SGD are taken on one
task's samples, and the weights are then set to ``phi + epsilon (W - phi)`` between the exported
copy ``phi`` and the adapted ``W``, with ``epsilon`` annealed linearly to zero; at the end a
copy of the meta-learned weights is adapted to a new task. An MLP on sine tasks (amplitude and
phase drawn per task) made in the script. Injected bug: the weights before the inner loop are taken
as ``model.state_dict()`` without ``copy.deepcopy``, so the snapshot shares its storage with the
parameters the inner SGD updates in place; at each outer update ``W - phi`` is zero and the weights
are left at the adapted ``W``, a full step instead of ``epsilon``, from the first outer update
on."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=8)
parser.add_argument("--inner-steps", type=int, default=4)
parser.add_argument("--inner-batch", type=int, default=10)
parser.add_argument("--inner-lr", type=float, default=0.02)
parser.add_argument("--outer-stepsize", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)


def sample_task(n=50):
    amplitude = 0.1 + 4.9 * torch.rand(())
    phase = math.pi * torch.rand(())
    x = 10 * torch.rand(n, 1) - 5
    return x, amplitude * torch.sin(x + phase)


model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
inner_optimizer = torch.optim.SGD(model.parameters(), lr=args.inner_lr)
for iteration in range(args.iterations):
    x, y = sample_task()
    weights_before = model.state_dict()
    for _ in range(args.inner_steps):
        idx = torch.randperm(len(x))[: args.inner_batch]
        loss = F.mse_loss(model(x[idx]), y[idx])
        inner_optimizer.zero_grad()
        loss.backward()
        inner_optimizer.step()
    weights_after = model.state_dict()
    epsilon = args.outer_stepsize * (1 - iteration / args.iterations)
    model.load_state_dict({name: weights_before[name]
                           + (weights_after[name] - weights_before[name]) * epsilon
                           for name in weights_before})
    print(f"iteration {iteration} task loss {loss.item():.4f}")

# evaluation: a copy of the meta-learned weights adapted to a new task
x, y = sample_task()
adapted = copy.deepcopy(model)
eval_optimizer = torch.optim.SGD(adapted.parameters(), lr=args.inner_lr)
for _ in range(args.inner_steps):
    loss = F.mse_loss(adapted(x), y)
    eval_optimizer.zero_grad()
    loss.backward()
    eval_optimizer.step()
print(f"adapted to a new task: loss {F.mse_loss(adapted(x), y).item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
