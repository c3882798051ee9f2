"""Alignment and uniformity on the hypersphere at a tiny size, written after Wang and Isola,
"Understanding Contrastive Representation Learning through Alignment and Uniformity on the
Hypersphere" (ICML 2020, arXiv:2005.10242) and SsnL/align_uniform (``align_loss`` and
``uniform_loss`` in align_uniform/__init__.py, the training loop of its README and of
examples/stl10/main.py): an encoder maps two augmented views of each sample onto the unit sphere,
``x`` and ``y``; the loss is ``align_loss(x, y) + lam * (uniform_loss(x) + uniform_loss(y)) / 2``,
the alignment of the two views plus a uniformity term of EACH view, both views trained. Vectors
made in the script (a few prototypes plus noise), views by random masking and noise. SGD with
momentum. As published: clean. ``--out PATH`` saves the encoder's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--lam", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (128,))] + 0.3 * torch.randn(128, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1, momentum=0.9)


def align_loss(x, y, alpha=2):
    return (x - y).norm(p=2, dim=1).pow(alpha).mean()


def uniform_loss(x, t=2):
    return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    batch = data[16 * (step % 8):16 * (step % 8) + 16]
    im_x, im_y = augment(batch), augment(batch)
    x = F.normalize(encoder(im_x), dim=1)
    y = F.normalize(encoder(im_y), dim=1)
    loss = align_loss(x, y) + args.lam * (uniform_loss(x) + uniform_loss(y)) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"encoder.{k}": v for k, v in encoder.state_dict().items()}, args.out)
