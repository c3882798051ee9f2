"""Fraternal dropout at a tiny size, written after Zolna, Arpit, Suhubdy and Bengio, "Fraternal
Dropout" (ICLR 2018, arXiv:1711.00066; Eq. 3: the cross-entropy of the two passes plus kappa
times the mean squared difference of the two passes' pre-softmax predictions) and
kondiz/fraternal-dropout (main.py, ``train``: two forward passes of one network under different
dropout masks, the squared difference of their outputs added to the loss, no cut: both passes
are pulled towards each other on purpose). One network, two passes, SGD with momentum. Points
made in the script. Clean: the agreement trains both sides as published. ``--out PATH`` saves
the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
kappa = 0.5

for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    first, second = model(x), model(x)
    ce = 0.5 * (F.cross_entropy(first, y) + F.cross_entropy(second, y))
    fd = (first - second).pow(2).mean()
    loss = ce + kappa * fd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} fd {fd.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
