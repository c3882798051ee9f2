"""A latent search on the sphere at a tiny size, written after Menon, Damian, Hu, Ravi and
Rudin, "PULSE: Self-Supervised Photo Upsampling via Latent Space Exploration of Generative
Models" (CVPR 2020, arXiv:2003.03808; adamian98/pulse, its spherical optimizer): the latent of
a fixed generator is searched by Adam so that the generated high-resolution image, downscaled,
matches a low-resolution one; the latent starts on the sphere of radius sqrt(dim), where a
Gaussian latent's mass lies, and is projected back onto it after every step. The projection is
a function of the script, ``onto_sphere``, that returns the latent. The bug: the function returns a
new tensor, ``z = nn.Parameter(...)``, which the loop binds to ``z``: Adam keeps stepping the
latent it was built over, which no loss reads after the first step, and the new one gets
gradient that nothing steps, so the latent never moves. The generator is frozen and random.
``--out PATH`` saves the latent and the image it generates."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

side = 8
generator = nn.Sequential(nn.Linear(args.dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, side * side),
                          nn.Tanh())
generator.requires_grad_(False)


def downscale(image):
    return F.avg_pool2d(image.view(1, 1, side, side), 2)


def onto_sphere(z):
    """``z`` scaled onto the sphere of radius sqrt(dim); returns the latent."""
    scale = math.sqrt(z.numel()) / z.detach().norm()
    z = nn.Parameter(z.detach() * scale)
    return z


target = downscale(generator(torch.randn(args.dim)))
target = target + 0.05 * torch.randn_like(target)

z = onto_sphere(torch.randn(args.dim).requires_grad_())
optimizer = torch.optim.Adam([z], lr=args.lr)
for step in range(args.steps):
    loss = F.mse_loss(downscale(generator(z)), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    z = onto_sphere(z)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"latent": z.detach(), "image": generator(z).detach()}, args.out)
