"""LSGAN at a tiny size, written after Mao et al., "Least Squares Generative Adversarial
Networks" (arXiv:1611.04076) and eriklindernoren/PyTorch-GAN (implementations/lsgan/lsgan.py):
an MSE adversarial loss, the generator's step, then the discriminator's on real samples and on
the generator's samples detached. Data: a 2-D Gaussian made in the script. Bug: `optimizer_D`
is built over the generator (the line above copied): the discriminator never steps."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--n-epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--latent-dim", type=int, default=4)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)

data = torch.randn(128, 2) * 0.5 + torch.tensor([2.0, -1.0])
generator = nn.Sequential(nn.Linear(args.latent_dim, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
adversarial_loss = nn.MSELoss()

optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))

for epoch in range(args.n_epochs):
    for i in range(0, len(data), args.batch_size):
        real = data[i:i + args.batch_size]
        valid = torch.ones(real.size(0), 1)
        fake = torch.zeros(real.size(0), 1)

        optimizer_G.zero_grad()
        z = torch.randn(real.size(0), args.latent_dim)
        gen = generator(z)
        g_loss = adversarial_loss(discriminator(gen), valid)
        g_loss.backward()
        optimizer_G.step()

        optimizer_D.zero_grad()
        real_loss = adversarial_loss(discriminator(real), valid)
        fake_loss = adversarial_loss(discriminator(gen.detach()), fake)
        d_loss = 0.5 * (real_loss + fake_loss)
        d_loss.backward()
        optimizer_D.step()
    print(f"epoch {epoch} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")

if args.out:
    torch.save({"G": generator.state_dict(), "D": discriminator.state_dict()}, args.out)
