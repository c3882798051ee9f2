"""FactorVAE at a tiny size, written after Kim and Mnih, "Disentangling by Factorising" (ICML 2018,
arXiv:1802.05983), Algorithm 2: a VAE whose objective, the evidence lower bound, is penalised by
gamma times the total correlation of the aggregate posterior q(z), TC = KL(q(z) || prod_j q(z_j)),
estimated with the density-ratio trick by a discriminator D that tells codes z ~ q(z|x) (label 0)
from codes whose dimensions have each been shuffled independently across a second batch, samples of
prod_j q(z_j) (label 1): TC ~ E[log D_0(z) - log D_1(z)]. The VAE and the discriminator have their
own Adam optimizers and take turns within an iteration. With 1Konny/FactorVAE
(https://github.com/1Konny/FactorVAE, solver.py Solver.train, ops.py recon_loss, kl_divergence and
permute_dims): each iteration takes two batches x_true1 and x_true2; the VAE loss is the summed
Bernoulli reconstruction error and the KL to N(0, I), averaged over the batch, plus gamma times
(D_z[:, :1] - D_z[:, 1:]).mean() on the discriminator's two logits of the sampled codes z, and
optim_VAE.zero_grad(), vae_loss.backward(retain_graph=True) and optim_VAE.step() come first; then
the codes of x_true2 are permuted dimension by dimension (permute_dims) and detached, and the
discriminator is trained with 0.5 * (cross_entropy(D(z), 0) + cross_entropy(D(z_pperm), 1)) after
optim_D.zero_grad(). The reference reuses the logits D_z of the VAE's pass in the discriminator's
loss, which newer PyTorch rejects once optim_VAE.step() has changed the encoder in place
(1Konny/FactorVAE issue #15); here the discriminator's logits of the same codes are recomputed on
z.detach(), the same values, as the discriminator has not moved yet, and the same gradient for D,
with no path back into the VAE. The data: points in [0, 1]^16 made by a fixed random network from
three independent factors, made in the script.
Bug: the discriminator's optimizer is built over the VAE's parameters, d_optimizer =
torch.optim.Adam(vae.parameters(), ...), a copy of the line above with only the name changed, where
it should be over discriminator.parameters() (1Konny/FactorVAE's Solver.__init__ builds optim_D over
self.D.parameters()): the discriminator's loss still fills the discriminator's gradients, but no
optimizer steps them, and its zero_grad() and step() touch only the VAE, whose parameters have no
gradient from that loss; the discriminator stays at its random initialisation and the VAE's
total-correlation penalty is read off an untrained classifier."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=6.4, help="weight of the TC penalty")
parser.add_argument("--out", default=None, help="where to save the VAE and the discriminator")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, z_dim, n_factors, hidden = 16, 4, 3, 64

# data: three independent factors pushed through a fixed random network into [0, 1]^16
n_data = 1024
factors = torch.rand(n_data, n_factors) * 2 - 1
mix1, mix2 = torch.randn(n_factors, 32), torch.randn(32, x_dim)
data = torch.sigmoid(2.0 * torch.tanh(factors @ mix1) @ mix2 / 32 ** 0.5)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(x_dim, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 2 * z_dim))
        self.decoder = nn.Sequential(nn.Linear(z_dim, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, x_dim))

    def forward(self, x, no_dec=False):
        stats = self.encoder(x)
        mu, logvar = stats[:, :z_dim], stats[:, z_dim:]
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        if no_dec:
            return z
        return self.decoder(z), mu, logvar, z


discriminator = nn.Sequential(nn.Linear(z_dim, hidden), nn.LeakyReLU(0.2),
                              nn.Linear(hidden, hidden), nn.LeakyReLU(0.2),
                              nn.Linear(hidden, 2))


def permute_dims(z):
    """Shuffle each dimension independently across the batch: samples of prod_j q(z_j)."""
    columns = [z[torch.randperm(z.size(0)), j] for j in range(z.size(1))]
    return torch.stack(columns, 1)


vae = VAE()
vae_optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3, betas=(0.9, 0.999))
d_optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3, betas=(0.5, 0.9))

zeros = torch.zeros(args.batch_size, dtype=torch.long)
ones = torch.ones(args.batch_size, dtype=torch.long)
for step in range(args.steps):
    x_true1 = data[torch.randint(0, n_data, (args.batch_size,))]
    x_true2 = data[torch.randint(0, n_data, (args.batch_size,))]

    # VAE update: ELBO plus gamma times the discriminator's estimate of the total correlation
    x_recon, mu, logvar, z = vae(x_true1)
    recon_loss = F.binary_cross_entropy_with_logits(x_recon, x_true1, reduction="sum")
    recon_loss = recon_loss / args.batch_size
    kld = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1).mean()
    d_z = discriminator(z)
    vae_tc_loss = (d_z[:, :1] - d_z[:, 1:]).mean()
    vae_loss = recon_loss + kld + args.gamma * vae_tc_loss
    vae_optimizer.zero_grad()
    vae_loss.backward(retain_graph=True)
    vae_optimizer.step()

    # discriminator update: codes of x_true1 (label 0) against permuted codes of x_true2 (label 1)
    z_prime = vae(x_true2, no_dec=True)
    z_pperm = permute_dims(z_prime).detach()
    d_real = discriminator(z.detach())
    d_z_pperm = discriminator(z_pperm)
    d_tc_loss = 0.5 * (F.cross_entropy(d_real, zeros) + F.cross_entropy(d_z_pperm, ones))
    d_optimizer.zero_grad()
    d_tc_loss.backward()
    d_optimizer.step()

    if step % 25 == 0:
        print(f"step {step} recon {recon_loss.item():.3f} kld {kld.item():.3f} "
              f"tc {vae_tc_loss.item():.3f} d_loss {d_tc_loss.item():.3f}")

if args.out:
    torch.save({"vae": vae.state_dict(), "discriminator": discriminator.state_dict()}, args.out)
