"""The Pi-model at a tiny size, written after Laine and Aila, "Temporal Ensembling for
Semi-Supervised Learning" (ICLR 2017, arXiv:1610.02242, Algorithm 1 and Section 2.1;
smlaine2/tempens): each minibatch, labelled and unlabelled rows together, goes twice through
one classifier with stochastic augmentation (Gaussian input noise) and dropout, and the loss is
the cross-entropy of the first pass on the labelled rows plus ``w(t)`` times the mean squared
difference of the two passes' softmax outputs on every row, with the unsupervised weight ramped
up along a Gaussian curve, ``w(t) = w_max * exp(-5 (1 - t / T)^2)``. The two passes are the same
network on the same inputs, under different noise and dropout, and the squared difference pulls
each toward the other: both branches carry gradient on purpose (Section 2.1; the temporal
ensemble, whose target is an average of earlier epochs, is the variant without it). As
published: clean. Data: three Gaussian clusters, 12 labelled rows out of 96 (4 in each
minibatch), made in the script. ``--out PATH`` saves the classifier's weights."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--rampup", type=int, default=10)
parser.add_argument("--w-max", type=float, default=30.0)
parser.add_argument("--input-noise", type=float, default=0.15)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centres = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
inputs = centres[labels] + torch.randn(96, dim)
labelled = torch.zeros(96, dtype=torch.bool)
labelled[:12] = True

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 32),
                      nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999))


def unsupervised_weight(step):
    """The Gaussian ramp-up of Laine and Aila's Appendix A, then ``w_max``."""
    t = min(step / args.rampup, 1.0)
    return args.w_max * math.exp(-5.0 * (1.0 - t) ** 2)


for step in range(args.steps):
    rows = torch.cat([torch.randperm(12)[:4], 12 + torch.randperm(84)[:args.batch_size - 4]])
    x, y, mask = inputs[rows], labels[rows], labelled[rows]
    z = model(x + args.input_noise * torch.randn_like(x))
    z_tilde = model(x + args.input_noise * torch.randn_like(x))
    supervised = F.cross_entropy(z[mask], y[mask], reduction="sum") / args.batch_size
    consistency = F.mse_loss(F.softmax(z, dim=1), F.softmax(z_tilde, dim=1))
    loss = supervised + unsupervised_weight(step) * consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} consistency {consistency.item():.5f}")

if args.out:
    torch.save(model.state_dict(), args.out)
