"""A universal adversarial perturbation learned by an optimizer, at a tiny size, written after
Moosavi-Dezfooli, Fawzi, Fawzi and Frossard, "Universal Adversarial Perturbations" (CVPR 2017,
arXiv:1610.08401; LTS4/universal) for the one perturbation shared by every input and kept in
an epsilon ball, and after Shafahi, Najibi, Xu, Dickerson, Davis and Goldstein, "Universal
Adversarial Training" (AAAI 2020, arXiv:1811.11304) for learning it by stochastic gradient
ascent on the classifier's loss, projected back onto the ball after every step. Two phases: a
small classifier is trained and frozen; then the perturbation ``delta``, a plain tensor that
requires grad, is trained by Adam to raise the frozen classifier's loss on every batch. As
published: the projection clamps ``delta`` in place (``delta.data.clamp_``), so the optimizer
built over it keeps training it. Data: three Gaussian classes, made in the script. ``--out
PATH`` saves the classifier's weights and the perturbation."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--train-steps", type=int, default=20, help="the classifier's phase")
parser.add_argument("--steps", type=int, default=20, help="the perturbation's phase")
parser.add_argument("--eps", type=float, default=0.5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--delta-lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 3
means = 0.7 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


classifier = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(classifier.parameters(), lr=args.lr, momentum=0.9)

# the classifier
for step in range(args.train_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(classifier(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"classifier {step} loss {loss.item():.4f}")

classifier.requires_grad_(False)

# one perturbation for every input, kept in the eps ball
delta = torch.zeros(dim, requires_grad=True)
attack = torch.optim.Adam([delta], lr=args.delta_lr)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = -F.cross_entropy(classifier(x + delta), y)
    attack.zero_grad()
    loss.backward()
    attack.step()
    delta.data.clamp_(-args.eps, args.eps)
    print(f"perturbation {step} loss {-loss.item():.4f}")

if args.out:
    torch.save({"classifier": classifier.state_dict(), "delta": delta.detach()}, args.out)
