"""Barlow Twins at a tiny size, written after Zbontar et al., "Barlow Twins: Self-Supervised Learning
via Redundancy Reduction" (arXiv:2103.03230) and facebookresearch/barlowtwins
(https://github.com/facebookresearch/barlowtwins/blob/main/main.py): two augmented views through
one backbone and projector, the cross-correlation matrix of their batch-normalised embeddings, the
loss ``sum (1 - C_ii)^2 + lambda * sum_{i != j} C_ij^2``, and the optimizer's two parameter
groups, weights and biases (every tensor of one dimension: biases and BatchNorm's scales), the
second left out of weight decay. Adam with weight decay stands in for LARS. Then, as the
repository's evaluate.py does for the linear protocol, a linear classifier is trained on the
frozen backbone's features. Data: Gaussian blobs, views by noise and feature masking, made in the
script. Two phases: pre-training, then the linear probe. Injected bug, in the pre-training phase:
the parameter groups are written with weight decay for all, ``[{"params": param_weights}]``, and
the biases' group is dropped with it, so the biases and BatchNorm's scales, which the loss trains,
are stepped by no optimizer."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--probe-epochs", type=int, default=3)
parser.add_argument("--lambd", type=float, default=0.0051)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (128,))
inputs = centers[labels] + torch.randn(128, dim)
batches = list(zip(inputs.split(32), labels.split(32)))


def augment(x):
    return (x + 0.3 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2).float()


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
        self.projector = nn.Sequential(nn.Linear(16, 32, bias=False), nn.BatchNorm1d(32),
                                       nn.ReLU(), nn.Linear(32, 32, bias=False))
        self.bn = nn.BatchNorm1d(32, affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(y1.size(0))
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + args.lambd * off_diag


model = BarlowTwins()
param_weights = []
param_biases = []
for param in model.parameters():
    if param.ndim == 1:
        param_biases.append(param)
    else:
        param_weights.append(param)
parameters = [{"params": param_weights}]
optimizer = torch.optim.AdamW(parameters, lr=3e-3, weight_decay=1e-2)
model.train()
for epoch in range(args.epochs):
    for x, _ in batches:
        loss = model(augment(x), augment(x))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"pre-training epoch {epoch} loss {loss.item():.4f}")

classifier = nn.Linear(16, classes)
probe_optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1, momentum=0.9)
model.eval()
for epoch in range(args.probe_epochs):
    for x, y in batches:
        with torch.no_grad():
            features = model.backbone(x)
        loss = F.cross_entropy(classifier(features), y)
        probe_optimizer.zero_grad()
        loss.backward()
        probe_optimizer.step()
    print(f"probe epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "classifier": classifier.state_dict()}, args.out)
