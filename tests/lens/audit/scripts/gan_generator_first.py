"""A GAN at a tiny size on one-dimensional data, written after Goodfellow et al., "Generative
Adversarial Nets" (NeurIPS 2014) and pytorch/examples dcgan/main.py
(https://github.com/pytorch/examples/blob/13caa078cd69d74ffb447a9eda09f0a81b809480/dcgan/main.py),
with the generator's update made first in each iteration: the generator's non-saturating loss
goes through the discriminator, so its ``backward()`` also writes the discriminator's ``.grad``;
``optimizerG.step()`` uses the generator's part, then ``optimizerD.zero_grad()`` clears the
discriminator's part before the discriminator's own loss (real and detached fake samples) and
step. Data: samples of N(2, 0.5), made in the script. Clean: the gradient cleared was read by the
optimizer that steps the generator (must not be flagged as a lost gradient)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--niter", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

netG = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
netD = nn.Sequential(nn.Linear(1, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
for i in range(args.niter):
    real = 2 + 0.5 * torch.randn(args.batch_size, 1)
    noise = torch.randn(args.batch_size, 2)
    fake = netG(noise)
    # (1) update G: maximize log(D(G(z)))
    optimizerG.zero_grad()
    errG = criterion(netD(fake), torch.ones(args.batch_size, 1))
    errG.backward()
    optimizerG.step()
    # (2) update D: maximize log(D(x)) + log(1 - D(G(z)))
    optimizerD.zero_grad()
    errD_real = criterion(netD(real), torch.ones(args.batch_size, 1))
    errD_fake = criterion(netD(fake.detach()), torch.zeros(args.batch_size, 1))
    errD = errD_real + errD_fake
    errD.backward()
    optimizerD.step()
    print(f"[{i}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, args.out)
