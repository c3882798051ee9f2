"""Soft-IntroVAE on 2D data at a tiny size, written after Daniel and Tamar, "Soft-IntroVAE:
Analyzing and Improving the Introspective Variational Autoencoder" (CVPR 2021, arXiv:2012.13253),
section 3 and algorithm 1, with taldatech/soft-intro-vae-pytorch
(https://github.com/taldatech/soft-intro-vae-pytorch, soft_intro_vae_2d/train_soft_intro_vae_2d.py
train_soft_intro_vae_toy, SoftIntroVAESimple, calc_kl, calc_reconstruction_loss and
reparameterize): an encoder Adam and a decoder Adam; num_vae iterations of a plain VAE first,
both optimizers cleared and stepped on the ELBO; then each iteration an encoder step, with the
encoder trainable and the decoder's parameters set to requires_grad = False, on the real ELBO
plus 0.25 * the exponentiated negative ELBOs (expELBO) of the generated samples and of the
reconstructions, both fed to the encoder detached (model(fake.detach()) and model(rec.detach())
in the reference) and, here, also detached as the targets of their reconstruction terms, so
that the expELBO reaches the encoder through its own outputs only; then a decoder step, with the
requires_grad flags swapped, on the reconstruction of z.detach(), the KL of the encoder's outputs
on the generated samples and reconstructions (which trains the decoder through the frozen
encoder), and gamma_r times their reconstruction errors from the detached latents. Each
optimizer is cleared before its own backward. All losses scaled by 1 / x_dim. Eight Gaussians in
a ring, made in the script. Injected bug: the encoder step runs the encoder on the
reconstructions with their graph (model(rec) for the reference's model(rec.detach())), so the
expELBO of the reconstructions, which should treat them as data, also backpropagates through
rec = D(z) (the decoder frozen but on the graph) and the reparameterised z into the encoder, and
each encoder step moves the real latents to raise the reconstructions' expELBO; second phase of a
two-phase script."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-vae", type=int, default=15)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--beta-kl", type=float, default=0.3)
parser.add_argument("--beta-rec", type=float, default=0.2)
parser.add_argument("--beta-neg", type=float, default=0.9)
parser.add_argument("--gamma-r", type=float, default=1e-8)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, z_dim, hidden_dim = 2, 2, 64
scale = 1.0 / x_dim
angles = torch.arange(8).float() * torch.pi / 4
centres = torch.stack([angles.cos(), angles.sin()], dim=1)


def sample_data(n):
    return centres[torch.randint(0, 8, (n,))] + 0.05 * torch.randn(n, x_dim)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                         nn.ReLU(), nn.Linear(hidden_dim, n_out))


def reparameterize(mu, logvar):
    return mu + (0.5 * logvar).exp() * torch.randn_like(mu)


def calc_kl(logvar, mu):
    return -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)


def calc_rec(x, rec):
    return (x - rec).pow(2).sum(1)


class SoftIntroVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = mlp(x_dim, 2 * z_dim)
        self.decoder = mlp(z_dim, x_dim)

    def encode(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        return mu, logvar

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = reparameterize(mu, logvar)
        return mu, logvar, z, self.decoder(z)


model = SoftIntroVAE()
optimizer_e = torch.optim.Adam(model.encoder.parameters(), lr=args.lr)
optimizer_d = torch.optim.Adam(model.decoder.parameters(), lr=args.lr)

# phase 1: a plain VAE, both optimizers on the ELBO
for it in range(args.num_vae):
    real = sample_data(args.batch_size)
    mu, logvar, z, rec = model(real)
    loss = args.beta_rec * calc_rec(real, rec).mean() + args.beta_kl * calc_kl(logvar, mu).mean()
    optimizer_e.zero_grad()
    optimizer_d.zero_grad()
    loss.backward()
    optimizer_e.step()
    optimizer_d.step()
    print(f"vae {it} loss {loss.item():.4f}")

# phase 2: Soft-IntroVAE, an encoder step then a decoder step
for it in range(args.steps):
    real = sample_data(args.batch_size)
    noise = torch.randn(args.batch_size, z_dim)
    model.encoder.requires_grad_(True)
    model.decoder.requires_grad_(False)
    fake = model.decoder(noise)
    real_mu, real_logvar = model.encode(real)
    z = reparameterize(real_mu, real_logvar)
    rec = model.decoder(z)
    loss_rec = calc_rec(real, rec).mean()
    loss_kl = calc_kl(real_logvar, real_mu).mean()
    fake_mu, fake_logvar, _, rec_fake = model(fake.detach())
    rec_mu, rec_logvar, _, rec_rec = model(rec)
    elbo_fake = args.beta_rec * calc_rec(fake.detach(), rec_fake) + args.beta_neg * calc_kl(
        fake_logvar, fake_mu)
    elbo_rec = args.beta_rec * calc_rec(rec.detach(), rec_rec) + args.beta_neg * calc_kl(
        rec_logvar, rec_mu)
    exp_elbo = (-2 * scale * elbo_fake).exp().mean() + (-2 * scale * elbo_rec).exp().mean()
    loss_e = scale * (args.beta_kl * loss_kl + args.beta_rec * loss_rec) + 0.25 * exp_elbo
    optimizer_e.zero_grad()
    loss_e.backward()
    optimizer_e.step()

    model.encoder.requires_grad_(False)
    model.decoder.requires_grad_(True)
    fake = model.decoder(noise)
    rec = model.decoder(z.detach())
    loss_rec = calc_rec(real, rec).mean()
    rec_mu, rec_logvar = model.encode(rec)
    fake_mu, fake_logvar = model.encode(fake)
    rec_rec = model.decoder(reparameterize(rec_mu, rec_logvar).detach())
    rec_fake = model.decoder(reparameterize(fake_mu, fake_logvar).detach())
    loss_rr = calc_rec(rec.detach(), rec_rec).mean() + calc_rec(fake.detach(), rec_fake).mean()
    kl_neg = calc_kl(fake_logvar, fake_mu).mean() + calc_kl(rec_logvar, rec_mu).mean()
    loss_d = scale * (args.beta_rec * loss_rec + 0.5 * args.beta_kl * kl_neg
                      + args.gamma_r * 0.5 * args.beta_rec * loss_rr)
    optimizer_d.zero_grad()
    loss_d.backward()
    optimizer_d.step()
    print(f"intro {it} rec {loss_rec.item():.4f} kl {loss_kl.item():.4f} "
          f"expelbo {exp_elbo.item():.4f} kl_neg {kl_neg.item():.4f}")

model.requires_grad_(True)
if args.out:
    torch.save({"encoder": model.encoder.state_dict(), "decoder": model.decoder.state_dict()},
               args.out)
