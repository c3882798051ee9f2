"""VICReg at a tiny size, written after Bardes, Ponce and LeCun, "VICReg: Variance-Invariance-
Covariance Regularization for Self-Supervised Learning" (ICLR 2022, arXiv:2105.04906, Algorithm
1; facebookresearch/vicreg, its ``VICReg.forward`` in main_vicreg.py): a backbone and an
expander (the projector: Linear, BatchNorm, ReLU, Linear) embed two augmented views of each
sample, and the loss sums the invariance term, the mean squared error between the two views'
embeddings, the variance term (a hinge on each dimension's standard deviation, per branch) and
the covariance term (the squared off-diagonal covariances, per branch). The two branches are the
same network on two views and the invariance term pulls each embedding toward the other: both
sides carry gradient on purpose (there is no stop-gradient anywhere in VICReg). As published:
clean. Data: noisy copies of a few random prototypes, made in the script; the views are a
Gaussian jitter and a random feature mask. ``--out PATH`` saves the backbone's and the
projector's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--sim-coeff", type=float, default=25.0)
parser.add_argument("--std-coeff", type=float, default=25.0)
parser.add_argument("--cov-coeff", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, rep, emb = 10, 8, 16
prototypes = torch.randn(4, dim)


def batch(n):
    return prototypes[torch.randint(0, 4, (n,))] + 0.3 * torch.randn(n, dim)


def augment(x):
    """A view: Gaussian jitter, then each feature dropped with probability 0.2."""
    return (x + 0.1 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)


def off_diagonal(m):
    n = m.shape[0]
    return m.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, rep))
projector = nn.Sequential(nn.Linear(rep, emb), nn.BatchNorm1d(emb), nn.ReLU(),
                          nn.Linear(emb, emb))
optimizer = torch.optim.Adam([*backbone.parameters(), *projector.parameters()], lr=args.lr)

for step in range(args.steps):
    x = batch(args.batch_size)
    z_a = projector(backbone(augment(x)))
    z_b = projector(backbone(augment(x)))
    invariance = F.mse_loss(z_a, z_b)
    z_a = z_a - z_a.mean(dim=0)
    z_b = z_b - z_b.mean(dim=0)
    std_a = torch.sqrt(z_a.var(dim=0) + 1e-4)
    std_b = torch.sqrt(z_b.var(dim=0) + 1e-4)
    variance = F.relu(1 - std_a).mean() / 2 + F.relu(1 - std_b).mean() / 2
    cov_a = z_a.T @ z_a / (args.batch_size - 1)
    cov_b = z_b.T @ z_b / (args.batch_size - 1)
    covariance = off_diagonal(cov_a).pow(2).sum() / emb + off_diagonal(cov_b).pow(2).sum() / emb
    loss = args.sim_coeff * invariance + args.std_coeff * variance + args.cov_coeff * covariance
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} invariance {invariance.item():.4f}")

if args.out:
    torch.save({**{f"backbone.{k}": v for k, v in backbone.state_dict().items()},
                **{f"projector.{k}": v for k, v in projector.state_dict().items()}}, args.out)
