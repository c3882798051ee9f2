"""Barlow Twins with a collapse monitor at a tiny size, written after Zbontar, Jing, Misra, LeCun
and Deny, "Barlow Twins: Self-Supervised Learning via Redundancy Reduction" (ICML 2021,
arXiv:2103.03230) and facebookresearch/barlowtwins (main.py, ``BarlowTwins.forward`` and
``off_diagonal``): the cross-correlation matrix of the batch-normalised embeddings of two views,
its diagonal pulled to one and its off-diagonal terms to zero. Each step also logs the standard
deviation of the l2-normalised embeddings of the first view, the collapse monitor of Chen and
He, "Exploring Simple Siamese Representation Learning" (CVPR 2021, arXiv:2011.10566, section
4.1), computed from the detached embeddings and only printed, never added to the loss. Vectors
made in the script. SGD with momentum. Clean: the cut value is only logged. ``--out PATH``
saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lambd", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(5, dim)
data = prototypes[torch.randint(0, 5, (96,))] + 0.2 * torch.randn(96, dim)

backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
projector = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, feat))
bn = nn.BatchNorm1d(feat, affine=False)
optimizer = torch.optim.SGD([*backbone.parameters(), *projector.parameters()], lr=0.05,
                            momentum=0.9)


def off_diagonal(x):
    n = x.shape[0]
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    x = data[16 * (step % 6):16 * (step % 6) + 16]
    z1, z2 = projector(backbone(augment(x))), projector(backbone(augment(x)))
    c = bn(z1).T @ bn(z2) / len(x)
    on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
    off_diag = off_diagonal(c).pow_(2).sum()
    loss = on_diag + args.lambd * off_diag
    collapse = F.normalize(z1.detach(), dim=1).std(0).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} output std {collapse.item():.4f}")

if args.out:
    torch.save({**{f"backbone.{k}": v for k, v in backbone.state_dict().items()},
                **{f"projector.{k}": v for k, v in projector.state_dict().items()}}, args.out)
