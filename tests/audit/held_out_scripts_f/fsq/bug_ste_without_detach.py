"""Finite scalar quantization at a tiny size, written after Mentzer, Minnen, Agustsson and
Tschannen, "Finite Scalar Quantization: VQ-VAE Made Simple" (ICLR 2024, arXiv:2309.15505), section 3
and its appendix code, with the quantizer of lucidrains/vector-quantize-pytorch
(https://github.com/lucidrains/vector-quantize-pytorch, vector_quantize_pytorch/
finite_scalar_quantization.py FSQ.bound, quantize and round_ste): each latent dimension is bounded
by a shifted tanh to ``levels[i]`` values and rounded to the nearest integer with a straight-through
estimator (``z + (zhat - z).detach()``), whose value is the rounded code and whose gradient is the
identity, then rescaled to [-1, 1]; the decoder reconstructs the input from the codes and the
reconstruction loss trains the encoder through the straight-through estimator. An MLP autoencoder
on vectors near a low-dimensional curve, made in the script. Injected bug: the straight-through
estimator is written without its ``.detach()``, so its value is still the rounded code but its
gradient is that of rounding, zero, and the reconstruction loss no longer trains the encoder."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden = 16, 48
levels = torch.tensor([8.0, 5.0, 5.0])
basis = torch.randn(3, dim)


def batch(n):
    t = 2 * torch.rand(n, 3) - 1
    return torch.sin(2.0 * t) @ basis + 0.05 * torch.randn(n, dim)


def round_ste(z):
    zhat = z.round()
    return z + (zhat - z)


def bound(z, eps=1e-3):
    half_l = (levels - 1) * (1 + eps) / 2
    offset = torch.where(levels % 2 == 0, 0.5, 0.0)
    shift = torch.atanh(offset / half_l)
    return torch.tanh(z + shift) * half_l - offset


def quantize(z):
    quantized = round_ste(bound(z))
    half_width = levels // 2
    return quantized / half_width


encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, len(levels)))
decoder = nn.Sequential(nn.Linear(len(levels), hidden), nn.ReLU(), nn.Linear(hidden, dim))
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=3e-3)
for step in range(args.steps):
    x = batch(args.batch_size)
    codes = quantize(encoder(x))
    loss = F.mse_loss(decoder(codes), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} reconstruction {loss.item():.4f} codes used "
          f"{len(torch.unique(codes.detach(), dim=0))}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
