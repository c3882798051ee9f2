"""Projecting an image into a generator's latent and noise inputs, at a tiny size, written after
Karras, Laine, Aittala, Hellsten, Lehtinen and Aila, "Analyzing and Improving the Image
Quality of StyleGAN" (CVPR 2020, arXiv:1912.04958; NVlabs/stylegan2, its projector) and the
PyTorch port rosinality/stylegan2-pytorch (projector.py): the latent and the per-layer noise
maps are optimised together by one Adam to reproduce a target image, with a penalty on the
noise maps' autocorrelation, a noise on the latent that ramps down (the name ``noisy`` bound to
a new tensor each step, never trained) and, after every step, each noise map renormalised to
zero mean and unit variance. The noise maps are a plain list of tensors that require grad; the
renormalisation writes each of them in place under ``torch.no_grad()`` (``noise.sub_(...)
.div_(...)``): the optimizer keeps training the maps the generator reads. Correct. The
generator is a random network made in the script, its weights frozen; the target is its image
of a random latent and random noise maps. ``--out PATH`` saves the latent and the noise maps."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--noise", type=float, default=0.05, help="the latent's noise at the start")
parser.add_argument("--noise-ramp", type=float, default=0.75)
parser.add_argument("--noise-regularize", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)


class Synthesis(nn.Module):
    """A 4x4 map from the latent, its noise added, upsampled to 8x8, a convolution, noise."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(args.dim, 16)
        self.conv = nn.Conv2d(1, 1, 3, padding=1)

    def forward(self, latent, noises):
        h = F.leaky_relu(self.fc(latent).view(1, 1, 4, 4) + 0.2 * noises[0], 0.2)
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        return torch.tanh(self.conv(h) + 0.2 * noises[1])


def noise_regularize(noises):
    """The squared autocorrelation of each noise map at a shift of one pixel, both ways."""
    return sum((n * torch.roll(n, 1, dims=3)).mean() ** 2
               + (n * torch.roll(n, 1, dims=2)).mean() ** 2 for n in noises)


generator = Synthesis()
generator.requires_grad_(False)
shapes = [(1, 1, 4, 4), (1, 1, 8, 8)]
target = generator(torch.randn(args.dim), [torch.randn(s) for s in shapes])

latent = torch.zeros(args.dim, requires_grad=True)
noises = [torch.randn(s).requires_grad_() for s in shapes]
optimizer = torch.optim.Adam([latent, *noises], lr=args.lr)
for step in range(args.steps):
    strength = args.noise * max(0.0, 1 - step / (args.noise_ramp * args.steps)) ** 2
    noisy = latent + strength * torch.randn(args.dim)
    image = generator(noisy, noises)
    loss = F.mse_loss(image, target) + args.noise_regularize * noise_regularize(noises)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for noise in noises:
            noise.sub_(noise.mean()).div_(noise.std())
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"latent": latent.detach(), "noises": [n.detach() for n in noises]}, args.out)
