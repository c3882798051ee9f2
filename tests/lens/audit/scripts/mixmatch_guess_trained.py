"""MixMatch at a tiny size, written after Berthelot, Carlini, Goodfellow, Papernot, Oliver and
Raffel, "MixMatch: A Holistic Approach to Semi-Supervised Learning" (NeurIPS 2019,
arXiv:1905.02249, Algorithm 1 and eqs. 2-5; google-research/mixmatch, its label guess under
``tf.stop_gradient``; the PyTorch port YU1ut/MixMatch-pytorch, its ``targets_u.detach()``): the
classifier's softmax on K = 2 augmentations of each unlabelled sample is averaged and sharpened
by the temperature ``T`` into a guessed label; labelled rows (one-hot) and unlabelled rows
(their guess) are mixed by MixUp with ``lambda' = max(lambda, 1 - lambda)``; the loss is the
cross-entropy on the mixed labelled rows plus ``lambda_u`` times the squared error between the
softmax on the mixed unlabelled rows and their mixed targets (the L2 loss, as published). The
guessed label is made by the same classifier, but from other inputs (the unmixed
augmentations), through an average and a sharpening: it is a target, not a mirror of the
prediction, and the published code cuts it. The first ``--warmup`` steps train on the labelled
rows alone; from then on the unlabelled term is on, its weight ramped up linearly (the paper
ramps ``lambda_u`` from zero). The bug: the guessed label is not detached, so the unlabelled
term also trains the classifier through its own sharpened guess, from the warm-up's end on.
Data: three Gaussian clusters, 24 labelled rows and 192 unlabelled ones, made in the script.
``--out PATH`` saves the classifier's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=18)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--rampup", type=int, default=6)
parser.add_argument("--lambda-u", type=float, default=75.0)
parser.add_argument("--T", type=float, default=0.5)
parser.add_argument("--alpha", type=float, default=0.75)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centres = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (24,))
labelled = centres[labels] + torch.randn(24, dim)
unlabelled = centres[torch.randint(0, classes, (192,))] + torch.randn(192, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                      nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def augment(x):
    return x + 0.3 * torch.randn_like(x)


def sharpen(p, T):
    p = p ** (1 / T)
    return p / p.sum(dim=1, keepdim=True)


def soft_cross_entropy(logits, targets):
    return -(F.log_softmax(logits, dim=1) * targets).sum(dim=1).mean()


for step in range(args.steps):
    rows = torch.randperm(24)[:args.batch_size]
    x, y = augment(labelled[rows]), F.one_hot(labels[rows], classes).float()
    if step < args.warmup:
        loss = soft_cross_entropy(model(x), y)
    else:
        u = unlabelled[torch.randperm(192)[:args.batch_size]]
        u1, u2 = augment(u), augment(u)
        p_u = (F.softmax(model(u1), dim=1) + F.softmax(model(u2), dim=1)) / 2
        guess = sharpen(p_u, args.T)
        inputs, targets = torch.cat([x, u1, u2]), torch.cat([y, guess, guess])
        lam = torch.distributions.Beta(args.alpha, args.alpha).sample()
        lam = torch.max(lam, 1 - lam)
        perm = torch.randperm(inputs.shape[0])
        mixed_inputs = lam * inputs + (1 - lam) * inputs[perm]
        mixed_targets = lam * targets + (1 - lam) * targets[perm]
        logits = model(mixed_inputs)
        n = x.shape[0]
        loss_x = soft_cross_entropy(logits[:n], mixed_targets[:n])
        loss_u = F.mse_loss(F.softmax(logits[n:], dim=1), mixed_targets[n:])
        ramp = min(1.0, (step - args.warmup + 1) / args.rampup)
        loss = loss_x + args.lambda_u * ramp * loss_u
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
