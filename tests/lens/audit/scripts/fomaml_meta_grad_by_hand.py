"""First-order MAML on sine regression at a tiny size, written after Finn, Abbeel and Levine,
"Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks" (ICML 2017,
arXiv:1703.03400; section 5.2, the first-order approximation, and the sinusoid tasks of section
5.1) and Nichol, Achiam and Schulman, "On First-Order Meta-Learning Algorithms"
(arXiv:1803.02999): each task's adapted weights are one plain SGD step from the shared ones (the
inner gradient taken by ``torch.autograd.grad`` without a graph), the query loss's gradient with
respect to the adapted weights, again by ``torch.autograd.grad``, is averaged over the tasks and
written into the shared weights' ``.grad`` before the meta-optimizer's step (as
learnables/learn2learn's first-order MAML leaves it there). Tasks made in the script. ``--out
PATH`` saves the shared weights. Clean: the labels are the only targets."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--tasks", type=int, default=3)
parser.add_argument("--inner-lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

model = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))
params = list(model.parameters())
meta_optimizer = torch.optim.Adam(params, lr=1e-3)


def forward(weights, x):
    w1, b1, w2, b2, w3, b3 = weights
    h = F.relu(F.linear(x, w1, b1))
    h = F.relu(F.linear(h, w2, b2))
    return F.linear(h, w3, b3)


for step in range(args.steps):
    meta_grads = [torch.zeros_like(p) for p in params]
    for _ in range(args.tasks):
        amplitude, phase = 0.1 + 4.9 * torch.rand(()), torch.pi * torch.rand(())
        x = 10 * torch.rand(20, 1) - 5
        y = amplitude * torch.sin(x + phase)
        support, query = slice(0, 10), slice(10, 20)
        inner = F.mse_loss(forward(params, x[support]), y[support])
        grads = torch.autograd.grad(inner, params)
        fast = [p - args.inner_lr * g for p, g in zip(params, grads)]
        outer = F.mse_loss(forward(fast, x[query]), y[query])
        for total, g in zip(meta_grads, torch.autograd.grad(outer, fast)):
            total.add_(g / args.tasks)
    for p, g in zip(params, meta_grads):
        p.grad = g
    meta_optimizer.step()
    print(f"step {step} last query loss {outer.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
