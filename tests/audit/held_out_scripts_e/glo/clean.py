"""Generative Latent Optimization at a tiny size, written after Bojanowski, Joulin, Lopez-Paz and
Szlam, "Optimizing the Latent Space of Generative Networks" (ICML 2018, arXiv:1707.05776), section
3, with the training loop of tneumann/minimal_glo (https://github.com/tneumann/minimal_glo, glo.py):
every training image has its own learnable code, initialised from a PCA of the images and kept in
the unit L2 ball; one SGD optimizer holds two parameter groups, the generator and the codes (a
larger learning rate), the loss is the Laplacian-pyramid L1 distance between the generated and the
real images, and after every step the codes are projected back onto the ball by rewriting their
values in place (``.data``), so that the optimizer keeps stepping the same tensor. A small MLP
generator on 8x8 images of stripes made in the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--code-dim", type=int, default=6)
parser.add_argument("--lr-g", type=float, default=0.5)
parser.add_argument("--lr-z", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_images, side = 64, 8
grid = torch.arange(side).float()
angle = math.pi * torch.rand(n_images, 1, 1)
freq = 0.5 + torch.rand(n_images, 1, 1)
images = torch.sin(freq * (grid.view(1, side, 1) * torch.cos(angle)
                           + grid.view(1, 1, side) * torch.sin(angle)))
images = images.unsqueeze(1)  # (n, 1, side, side)


def gauss_kernel(size=3, sigma=1.0):
    x = torch.arange(size).float() - size // 2
    g = torch.exp(-x.pow(2) / (2 * sigma**2))
    kernel = g[:, None] * g[None, :]
    return (kernel / kernel.sum()).view(1, 1, size, size)


KERNEL = gauss_kernel()


def laplacian_pyramid(img, max_levels=2):
    pyramid, current = [], img
    for _ in range(max_levels):
        filtered = F.conv2d(F.pad(current, (1, 1, 1, 1), mode="replicate"), KERNEL)
        pyramid.append(current - filtered)
        current = F.avg_pool2d(filtered, 2)
    pyramid.append(current)
    return pyramid


def lap_loss(output, target):
    return sum(F.l1_loss(a, b) for a, b in zip(laplacian_pyramid(output),
                                                laplacian_pyramid(target)))


def project_l2_ball(z):
    return z / z.norm(dim=1, keepdim=True).clamp(min=1)


class Generator(nn.Module):
    def __init__(self, code_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(code_dim, 64), nn.ReLU(), nn.Linear(64, side * side),
                                 nn.Tanh())

    def forward(self, code):
        return self.net(code).view(-1, 1, side, side)


# codes initialised from the PCA projections of the images
flat = images.flatten(1)
centred = flat - flat.mean(0)
_, _, v = torch.linalg.svd(centred, full_matrices=False)
codes = nn.Parameter(project_l2_ball(centred @ v[:args.code_dim].t()))

g = Generator(args.code_dim)
optimizer = torch.optim.SGD([{"params": g.parameters(), "lr": args.lr_g},
                             {"params": [codes], "lr": args.lr_z}])
for step in range(args.steps):
    idx = torch.randperm(n_images)[:args.batch_size]
    rec = g(codes[idx])
    loss = lap_loss(rec, images[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    codes.data = project_l2_ball(codes.data)
    print(f"step {step} laplacian l1 {loss.item():.4f}")

if args.out:
    torch.save({"generator": g.state_dict(), "codes": codes.detach().clone()}, args.out)
