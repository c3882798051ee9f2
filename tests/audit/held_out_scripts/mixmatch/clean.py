"""MixMatch at a tiny size, written after Berthelot et al., "MixMatch: A Holistic Approach to
Semi-Supervised Learning" (arXiv:1905.02249) and YU1ut/MixMatch-pytorch train.py: labels
guessed for two augmentations of each unlabelled batch, averaged and sharpened under
``torch.no_grad()``, MixUp of labelled and unlabelled examples with ``lam = max(lam, 1 - lam)``,
cross entropy on the mixed labelled part and a squared error on the mixed unlabelled part
weighted by a linear ramp-up. The repository's ``interleave`` (a batch-norm detail) and its
EMA model are left out. Data: Gaussian blobs made in the script, 24 labelled points.
As published: clean."""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=12)
parser.add_argument("--alpha", type=float, default=0.75)
parser.add_argument("--lambda-u", type=float, default=75.0)
parser.add_argument("--T", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
np.random.seed(args.seed)
torch.manual_seed(args.seed)

dim, classes = 6, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (24,))
labelled = centers[labels] + torch.randn(24, dim)
unlabelled = centers[torch.randint(0, classes, (240,))] + torch.randn(240, dim)


def augment(x):
    return x + 0.3 * torch.randn_like(x)


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

for batch_idx in range(args.iters):
    idx = torch.randint(0, len(labelled), (args.batch_size,))
    inputs_x, targets_x = augment(labelled[idx]), labels[idx]
    u = unlabelled[torch.randint(0, len(unlabelled), (args.batch_size,))]
    inputs_u, inputs_u2 = augment(u), augment(u)
    targets_x = torch.zeros(args.batch_size, classes).scatter_(1, targets_x.view(-1, 1), 1)

    with torch.no_grad():
        outputs_u = model(inputs_u)
        outputs_u2 = model(inputs_u2)
        p = (torch.softmax(outputs_u, dim=1) + torch.softmax(outputs_u2, dim=1)) / 2
        pt = p ** (1 / args.T)
        targets_u = pt / pt.sum(dim=1, keepdim=True)
        targets_u = targets_u.detach()

    all_inputs = torch.cat([inputs_x, inputs_u, inputs_u2], dim=0)
    all_targets = torch.cat([targets_x, targets_u, targets_u], dim=0)
    lam = np.random.beta(args.alpha, args.alpha)
    lam = max(lam, 1 - lam)
    idx = torch.randperm(all_inputs.size(0))
    mixed_input = lam * all_inputs + (1 - lam) * all_inputs[idx]
    mixed_target = lam * all_targets + (1 - lam) * all_targets[idx]

    logits = model(mixed_input)
    logits_x, logits_u = logits[:args.batch_size], logits[args.batch_size:]
    Lx = -torch.mean(torch.sum(F.log_softmax(logits_x, dim=1) * mixed_target[:args.batch_size],
                               dim=1))
    Lu = torch.mean((torch.softmax(logits_u, dim=1) - mixed_target[args.batch_size:]) ** 2)
    w = args.lambda_u * min(batch_idx / args.iters, 1.0)
    loss = Lx + w * Lu
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if batch_idx % 8 == 0:
        print(f"iter {batch_idx} Lx {Lx.item():.4f} Lu {Lu.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
