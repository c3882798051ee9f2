"""DCGAN at a tiny size, written after pytorch/examples dcgan/main.py
(https://github.com/pytorch/examples/blob/13caa078cd69d74ffb447a9eda09f0a81b809480/dcgan/main.py):
the discriminator's step on real and on detached fake images, then the generator's step, each
with its own zero_grad. Injected change: the fake is not detached in D's step, but G's zero_grad stays before G's
backward: D's loss's gradient reaches G's .grad and is cleared unused (harmless, wasted)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--niter", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--nz", type=int, default=4)
parser.add_argument("--size", type=int, default=16)
parser.add_argument("--seed", type=int, default=1)
opt = parser.parse_args()
torch.manual_seed(opt.seed)

netG = nn.Sequential(nn.Linear(opt.nz, 32), nn.ReLU(), nn.Linear(32, opt.size), nn.Tanh())
netD = nn.Sequential(nn.Linear(opt.size, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
data = torch.randn(64, opt.size).tanh()
real_label, fake_label = 1.0, 0.0

for i in range(opt.niter):
    real = data[torch.randint(0, len(data), (opt.batch_size,))]
    # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
    netD.zero_grad()
    label = torch.full((opt.batch_size, 1), real_label)
    errD_real = criterion(netD(real), label)
    errD_real.backward()
    noise = torch.randn(opt.batch_size, opt.nz)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake)
    errD_fake = criterion(output, label)
    errD_fake.backward(retain_graph=True)
    optimizerD.step()
    # (2) Update G: maximize log(D(G(z)))
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    optimizerG.step()
    print(f"[{i}/{opt.niter}] Loss_D: {(errD_real + errD_fake).item():.4f} "
          f"Loss_G: {errG.item():.4f}")
