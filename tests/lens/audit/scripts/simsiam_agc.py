"""SimSiam with adaptive gradient clipping at a tiny size, written after Chen and He, "Exploring
Simple Siamese Representation Learning" (CVPR 2021, arXiv:2011.10566; Algorithm 1: the
symmetric negative cosine ``D(p1, z2) / 2 + D(p2, z1) / 2`` with ``z`` under a stop-gradient,
facebookresearch/simsiam, main_simsiam.py) and Brock, De, Smith and Simonyan, "High-Performance
Large-Scale Image Recognition Without Normalization" (ICML 2021, arXiv:2102.06171; section 4.1,
adaptive gradient clipping: each unit's gradient scaled down to at most ``lambda`` times the
norm of its weights; google-deepmind/deepmind-research, nfnets/optim.py). The gradient is taken
with ``torch.autograd.grad``, clipped unit by unit, and written into ``.grad`` before the
optimizer's step. Two noisy views of points on a low-dimensional subspace, made in the script.
``--out PATH`` saves the encoder's and the predictor's weights. As published: clean: both
targets are cut where the loss reads them."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--clipping", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width, batch = 10, 16, 32
basis = torch.randn(3, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, width))
predictor = nn.Sequential(nn.Linear(width, 8), nn.ReLU(), nn.Linear(8, width))
params = [*encoder.parameters(), *predictor.parameters()]
optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9)


def unit_norm(t):
    return t.norm(dim=1, keepdim=True) if t.dim() > 1 else t.abs()


for step in range(args.steps):
    x = torch.randn(batch, 3) @ basis
    x1, x2 = x + 0.2 * torch.randn_like(x), x + 0.2 * torch.randn_like(x)
    z1, z2 = encoder(x1), encoder(x2)
    p1, p2 = predictor(z1), predictor(z2)
    d12 = F.cosine_similarity(p1, z2.detach()).mean()
    d21 = F.cosine_similarity(p2, z1.detach()).mean()
    loss = -(d12 + d21) / 2
    grads = torch.autograd.grad(loss, params)
    for p, g in zip(params, grads):
        limit = args.clipping * unit_norm(p).clamp(min=1e-3)
        norm = unit_norm(g).clamp(min=1e-6)
        p.grad = torch.where(norm > limit, g * (limit / norm), g)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"predictor.{k}": v for k, v in predictor.state_dict().items()}}, args.out)
