"""Compressed sensing with a generative model and random restarts, at a tiny size, written after
Bora, Jalal, Price and Dimakis, "Compressed Sensing using Generative Models" (ICML 2017,
arXiv:1703.03208; AshishBora/csgm): a signal is recovered from a few random linear
measurements by searching the latent of a fixed generator, minimising the measurement error
plus a penalty on the latent's norm; the search is restarted from several random latents and
the best recovery kept. Each restart rebinds the latent ``z`` to a new tensor that requires
grad and builds a NEW Adam over it right after: the optimizer that steps each search holds the
latent the loss reads, and the earlier one is never stepped again. Correct. The generator is a
random network made in the script, its weights frozen; the signal is the image of a random
latent. ``--out PATH`` saves every restart's latent and the best one."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--restarts", type=int, default=3)
parser.add_argument("--steps", type=int, default=10, help="per restart")
parser.add_argument("--dim", type=int, default=10)
parser.add_argument("--measurements", type=int, default=16)
parser.add_argument("--reg", type=float, default=0.01, help="the latent's penalty")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

signal = 48
generator = nn.Sequential(nn.Linear(args.dim, 32), nn.ReLU(), nn.Linear(32, signal))
generator.requires_grad_(False)
A = torch.randn(args.measurements, signal) / args.measurements ** 0.5
y = A @ generator(torch.randn(args.dim)) + 0.01 * torch.randn(args.measurements)

latents, best, best_loss = [], None, float("inf")
for restart in range(args.restarts):
    z = torch.randn(args.dim, requires_grad=True)
    optimizer = torch.optim.Adam([z], lr=args.lr)
    for step in range(args.steps):
        loss = (A @ generator(z) - y).pow(2).sum() + args.reg * z.pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"restart {restart} step {step} loss {loss.item():.4f}")
    latents.append(z.detach().clone())
    if loss.item() < best_loss:
        best, best_loss = z.detach().clone(), loss.item()

if args.out:
    torch.save({"latents": latents, "best": best}, args.out)
