"""An adversarial autoencoder at a tiny size, written after Makhzani et al., "Adversarial
Autoencoders" (arXiv:1511.05644) and eriklindernoren/PyTorch-GAN implementations/aae/aae.py:
an encoder with a reparameterized latent code, a decoder, a discriminator on the latent space
telling prior samples from codes; ``optimizer_G`` over the encoder and the decoder (reconstruction
plus 0.001 of the adversarial loss), ``optimizer_D`` over the discriminator, the codes detached
for the discriminator's loss. Data: vectors near a few prototypes, made in the script.
Injected bug: ``optimizer_D`` is built over the encoder's parameters (a line copied from the
one above): the discriminator is never stepped, and the encoder is held by two optimizers."""

import argparse
import itertools

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--n-epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--latent-dim", type=int, default=2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim = 12
prototypes = torch.randn(3, dim)
data = prototypes[torch.randint(0, 3, (128,))] + 0.1 * torch.randn(128, dim)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(dim, 32), nn.LeakyReLU(0.2))
        self.mu = nn.Linear(32, args.latent_dim)
        self.logvar = nn.Linear(32, args.latent_dim)

    def forward(self, img):
        x = self.model(img)
        mu, logvar = self.mu(x), self.logvar(x)
        return torch.randn_like(mu) * torch.exp(logvar / 2) + mu


decoder = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, dim))
discriminator = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.LeakyReLU(0.2),
                              nn.Linear(32, 1), nn.Sigmoid())
encoder = Encoder()
adversarial_loss = nn.BCELoss()
pixelwise_loss = nn.L1Loss()

optimizer_G = torch.optim.Adam(itertools.chain(encoder.parameters(), decoder.parameters()),
                               lr=args.lr, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(encoder.parameters(), lr=args.lr, betas=(0.5, 0.999))

for epoch in range(args.n_epochs):
    for i in range(0, len(data), args.batch_size):
        real_imgs = data[i:i + args.batch_size]
        valid = torch.ones(real_imgs.size(0), 1)
        fake = torch.zeros(real_imgs.size(0), 1)

        optimizer_G.zero_grad()
        encoded_imgs = encoder(real_imgs)
        decoded_imgs = decoder(encoded_imgs)
        g_loss = 0.001 * adversarial_loss(discriminator(encoded_imgs), valid) + \
            0.999 * pixelwise_loss(decoded_imgs, real_imgs)
        g_loss.backward()
        optimizer_G.step()

        optimizer_D.zero_grad()
        z = torch.randn(real_imgs.shape[0], args.latent_dim)
        real_loss = adversarial_loss(discriminator(z), valid)
        fake_loss = adversarial_loss(discriminator(encoded_imgs.detach()), fake)
        d_loss = 0.5 * (real_loss + fake_loss)
        d_loss.backward()
        optimizer_D.step()
    print(f"[Epoch {epoch}] [D loss: {d_loss.item():.4f}] [G loss: {g_loss.item():.4f}]")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
