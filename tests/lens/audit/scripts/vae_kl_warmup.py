"""A variational autoencoder with a warm-up of the KL term at a tiny size, written after Kingma
and Welling, "Auto-Encoding Variational Bayes" (ICLR 2014, arXiv:1312.6114) and pytorch/examples
(vae/main.py: the ``VAE`` module, ``fc1``, ``fc21``, ``fc22``, ``fc3``, ``fc4``, and
``loss_function``, the Bernoulli reconstruction plus ``KLD = -0.5 * torch.sum(1 + logvar -
mu.pow(2) - logvar.exp())``), with the deterministic warm-up of Sonderby, Raiko, Maaloe, Sonderby
and Winther, "Ladder Variational Autoencoders" (NeurIPS 2016, arXiv:1602.02282; casperkaae/LVAE):
the KL term's weight ``beta`` grows linearly with the epoch, from 0 in the first epoch to 1. The
KL term trains the encoder's mean and log-variance heads and the layer below them. Binary
vectors made in the script (noisy copies of a few patterns), a few batches per epoch. Adam. As
published: clean. ``--out PATH`` saves the model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--warmup", type=int, default=2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, latent, batch = 16, 2, 16
patterns = (torch.rand(4, dim) > 0.5).float()
flips = (torch.rand(64, dim) < 0.1).float()
data = (patterns[torch.randint(0, 4, (64,))] - flips).abs()


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(dim, 24)
        self.fc21 = nn.Linear(24, latent)
        self.fc22 = nn.Linear(24, latent)
        self.fc3 = nn.Linear(latent, 24)
        self.fc4 = nn.Linear(24, dim)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def loss_function(recon_x, x, mu, logvar, beta):
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + beta * kld) / len(x)


model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

step = 0
for epoch in range(args.epochs):
    beta = min(1.0, epoch / args.warmup)
    for i in range(0, len(data), batch):
        x = data[i:i + batch]
        recon, mu, logvar = model(x)
        loss = loss_function(recon, x, mu, logvar, beta)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} step {step} beta {beta:.2f} loss {loss.item():.4f}")
        step += 1

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
