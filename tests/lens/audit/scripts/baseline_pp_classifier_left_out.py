"""Baseline++ at a tiny size, written after Chen, Liu, Kira, Wang and Huang, "A Closer Look at
Few-shot Classification" (ICLR 2019, arXiv:1904.04232), section 3.2, with the distance-based
classifier of wyharveychen/CloserLookFewShot (https://github.com/wyharveychen/CloserLookFewShot,
backbone.py, ``distLinear``): the logits are the cosine similarities between the normalised
features and the normalised class weights, times a fixed scale. The feature network and the
classifier are trained together by one optimizer. Feature vectors of eight classes (a cluster
each) made in the script. The bug: the optimizer built over the feature network alone, so the
class weights keep their initial values while the features are trained against them."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)
centres = 3 * torch.randn(8, 12)


def batch(n):
    y = torch.randint(0, 8, (n,))
    return centres[y] + torch.randn(n, 12), y


class DistLinear(nn.Module):
    def __init__(self, dim, classes, scale=10.0):
        super().__init__()
        self.weight = nn.Parameter(0.1 * torch.randn(classes, dim))
        self.scale = scale

    def forward(self, x):
        return self.scale * F.linear(F.normalize(x, dim=1), F.normalize(self.weight, dim=1))


features = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16))
classifier = DistLinear(16, 8)
optimizer = torch.optim.Adam(features.parameters(), lr=1e-2)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(classifier(features(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"features": features.state_dict(), "classifier": classifier.state_dict()},
               args.out)
