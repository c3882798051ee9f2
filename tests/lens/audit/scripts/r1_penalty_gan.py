"""A GAN with the R1 gradient penalty at a tiny size, written after Mescheder, Geiger and Nowozin,
"Which Training Methods for GANs do actually Converge?" (ICML 2018, arXiv:1801.04406; section
4.1, ``R1 = gamma / 2 * E |grad_x D(x)|^2`` on real data; LMescheder/GAN_stability,
gan_training/train.py, ``compute_grad2``): the penalty's gradient of the discriminator's output
with respect to its real input is taken by ``torch.autograd.grad`` with ``create_graph=True``
inside the discriminator's loss, which one ``backward()`` differentiates; the non-saturating
losses of both players. A two-dimensional ring of Gaussians made in the script. ``--out PATH``
saves both networks' weights. Clean: the penalty is differentiated on purpose."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--gamma", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], 1) * 2
generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
discriminator = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.0, 0.99))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.0, 0.99))

for step in range(args.steps):
    real = modes[torch.randint(0, 8, (32,))] + 0.05 * torch.randn(32, 2)
    real.requires_grad_(True)
    d_real = discriminator(real)
    with torch.no_grad():
        fake = generator(torch.randn(32, 4))
    d_fake = discriminator(fake)
    grad_real = torch.autograd.grad(d_real.sum(), real, create_graph=True)[0]
    penalty = args.gamma / 2 * grad_real.pow(2).sum(1).mean()
    d_loss = F.softplus(-d_real).mean() + F.softplus(d_fake).mean() + penalty
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()

    g_loss = F.softplus(-discriminator(generator(torch.randn(32, 4)))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step} d {d_loss.item():.4f} g {g_loss.item():.4f}")

if args.out:
    torch.save({**{f"generator.{k}": v for k, v in generator.state_dict().items()},
                **{f"discriminator.{k}": v for k, v in discriminator.state_dict().items()}},
               args.out)
