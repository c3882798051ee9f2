"""VICReg at a tiny size, written after Bardes, Ponce and LeCun, "VICReg: Variance-Invariance-
Covariance Regularization for Self-Supervised Learning" (ICLR 2022, arXiv:2105.04906), with the loss
of facebookresearch/vicreg (https://github.com/facebookresearch/vicreg, main_vicreg.py
VICReg.forward) and its linear evaluation (evaluate.py, ``--weights freeze``): two augmented views
go through one backbone and one expander, both branches keep their graphs, and the loss is the
invariance term (mean squared error between the two embeddings), the variance term (a hinge on the
standard deviation of each dimension, per branch) and the covariance term (the squared off-diagonal
covariances, per branch), weighted 25, 25 and 1. Two phases: the backbone is pretrained with VICReg,
then frozen (``requires_grad_(False)``) while a linear classifier is trained on its features, the
optimizer built from the parameters that still require gradients (as in facebookresearch/moco
main_lincls.py). Adam stands in for LARS. An MLP backbone on vectors of a few classes made in the
script. Injected bug: the second view's embedding is computed under torch.no_grad(), as if it were a
target (as in BYOL), so the invariance term and the second branch's variance and covariance terms
train the backbone and the expander through the first view only; first phase."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--sim-coeff", type=float, default=25.0)
parser.add_argument("--std-coeff", type=float, default=25.0)
parser.add_argument("--cov-coeff", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, rep, emb, classes = 16, 24, 32, 4
means = 2.0 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


def augment(x):
    return x * (1 + 0.2 * torch.randn_like(x)) + 0.3 * torch.randn_like(x)


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def vicreg_loss(x, y):
    repr_loss = F.mse_loss(x, y)
    x = x - x.mean(dim=0)
    y = y - y.mean(dim=0)
    std_x = torch.sqrt(x.var(dim=0) + 0.0001)
    std_y = torch.sqrt(y.var(dim=0) + 0.0001)
    std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
    cov_x = (x.T @ x) / (x.shape[0] - 1)
    cov_y = (y.T @ y) / (y.shape[0] - 1)
    cov_loss = (off_diagonal(cov_x).pow(2).sum().div(emb)
                + off_diagonal(cov_y).pow(2).sum().div(emb))
    return args.sim_coeff * repr_loss + args.std_coeff * std_loss + args.cov_coeff * cov_loss


backbone = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, rep))
projector = nn.Sequential(nn.Linear(rep, emb), nn.BatchNorm1d(emb), nn.ReLU(), nn.Linear(emb, emb))
optimizer = torch.optim.Adam([*backbone.parameters(), *projector.parameters()], lr=2e-3)

# phase 1: self-supervised pretraining
for step in range(args.pretrain_steps):
    x, _ = batch(args.batch_size)
    z1 = projector(backbone(augment(x)))
    with torch.no_grad():
        z2 = projector(backbone(augment(x)))
    loss = vicreg_loss(z1, z2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"pretrain {step} vicreg loss {loss.item():.4f}")

# phase 2: linear evaluation on the frozen backbone
backbone.requires_grad_(False)
head = nn.Linear(rep, classes)
model = nn.Sequential(backbone, head)
probe_optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05,
                                  momentum=0.9, weight_decay=1e-6)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    probe_optimizer.zero_grad()
    loss.backward()
    probe_optimizer.step()
    print(f"probe {step} cross-entropy {loss.item():.4f}")

if args.out:
    torch.save({"backbone": backbone.state_dict(), "projector": projector.state_dict(),
                "head": head.state_dict()}, args.out)
