"""SimSiam with its loss written as a normalized mean squared error, at a tiny size, after Chen
and He, "Exploring Simple Siamese Representation Learning" (CVPR 2021, arXiv:2011.10566,
Algorithm 1 and Section 4.1; facebookresearch/simsiam, its ``SimSiam.forward`` in
simsiam/builder.py, which returns the projections detached) and the normalized MSE of Grill et
al., "Bootstrap Your Own Latent" (NeurIPS 2020, arXiv:2006.07733, eq. 2): the squared distance
of two l2-normalized vectors is ``2 - 2 cos``, SimSiam's ``D`` up to an affine map. An encoder
(backbone and projection MLP, BatchNorm at its output) embeds two views of each sample; a
prediction MLP maps each view's projection toward the OTHER view's projection. The two sides
are not mirror images: one is a prediction (through the predictor), the other a projection,
the target, which the published code cuts (the stop-gradient without which SimSiam collapses,
Section 4.1). As published: each projection is detached where it is normalized as a target.
Data: noisy copies of a few random prototypes, made in the script; the views are a Gaussian
jitter and a random feature mask. ``--out PATH`` saves the encoder's and the predictor's
weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(5, dim)


def batch(n):
    return prototypes[torch.randint(0, 5, (n,))] + 0.2 * torch.randn(n, dim)


def augment(x):
    """A view: Gaussian jitter, then each feature dropped with probability 0.2."""
    return (x + 0.1 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)


encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat),
                        nn.BatchNorm1d(feat))
predictor = nn.Sequential(nn.Linear(feat, 4), nn.ReLU(), nn.Linear(4, feat))
optimizer = torch.optim.SGD([*encoder.parameters(), *predictor.parameters()], lr=args.lr,
                            momentum=0.9)

for step in range(args.steps):
    x = batch(args.batch_size)
    z1, z2 = encoder(augment(x)), encoder(augment(x))
    p1, p2 = F.normalize(predictor(z1), dim=1), F.normalize(predictor(z2), dim=1)
    t1, t2 = F.normalize(z1.detach(), dim=1), F.normalize(z2.detach(), dim=1)
    loss = (F.mse_loss(p1, t2) + F.mse_loss(p2, t1)) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"predictor.{k}": v for k, v in predictor.state_dict().items()}}, args.out)
