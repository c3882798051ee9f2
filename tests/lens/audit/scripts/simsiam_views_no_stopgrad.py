"""SimSiam at a tiny size, written after Chen and He, "Exploring Simple Siamese Representation
Learning" (arXiv:2011.10566, Algorithm 1) and facebookresearch/simsiam
(https://github.com/facebookresearch/simsiam/blob/main/simsiam/builder.py): an encoder ``f``
(backbone and projection MLP) and a prediction MLP ``h``, two noisy views of each sample, and the
symmetric loss ``D(p1, z2) / 2 + D(p2, z1) / 2`` with ``D(p, z) = -cos(p, z.detach())``: each
view's projection is the other view's target and also feeds its own prediction. Vectors made
in the script (a few prototypes plus noise). SGD with momentum over both networks. Bug: ``D``
has no stop-gradient (``-cos(p, z)``), so each projection is also trained toward the other
view's prediction through its own target (the collapse of Chen and He's Section 4.1)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

dim, feat = 12, 8
prototypes = torch.randn(5, dim)
data = prototypes[torch.randint(0, 5, (96,))] + 0.2 * torch.randn(96, dim)

f = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, feat), nn.BatchNorm1d(feat))
h = nn.Sequential(nn.Linear(feat, 4), nn.ReLU(), nn.Linear(4, feat))
optimizer = torch.optim.SGD([*f.parameters(), *h.parameters()], lr=0.05, momentum=0.9)


def D(p, z):
    """The negative cosine similarity."""
    return -F.cosine_similarity(p, z, dim=-1).mean()


for step in range(args.steps):
    x = data[16 * (step % 6):16 * (step % 6) + 16]
    x1 = x + 0.1 * torch.randn_like(x)
    x2 = x * (torch.rand_like(x) > 0.2)
    z1, z2 = f(x1), f(x2)
    p1, p2 = h(z1), h(z2)
    loss = D(p1, z2) / 2 + D(p2, z1) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"f.{k}": v for k, v in f.state_dict().items()},
                **{f"h.{k}": v for k, v in h.state_dict().items()}}, args.out)
