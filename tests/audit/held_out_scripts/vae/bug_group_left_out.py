"""A variational autoencoder at a tiny size, written after Kingma and Welling, "Auto-Encoding
Variational Bayes" (arXiv:1312.6114) and pytorch/examples vae/main.py: ``fc1`` then the two
heads ``fc21`` (mean) and ``fc22`` (log-variance), the reparameterization
``mu + eps * exp(0.5 * logvar)``, the decoder ``fc3``/``fc4`` with a sigmoid, and the loss
``BCE + KLD`` summed over the batch. The optimizer is built from parameter groups, one per
part, the decoder's at twice the learning rate. Data: binary vectors drawn from a few
prototypes, made in the script. Injected bug: the log-variance head ``fc22`` has no
parameter group; the loss trains it and no optimizer steps it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, latent = 16, 2
prototypes = (torch.rand(4, dim) > 0.5).float()
flips = (torch.rand(128, dim) < 0.1).float()
data = (prototypes[torch.randint(0, 4, (128,))] - flips).abs()


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(dim, 32)
        self.fc21 = nn.Linear(32, latent)
        self.fc22 = nn.Linear(32, latent)
        self.fc3 = nn.Linear(latent, 32)
        self.fc4 = nn.Linear(32, dim)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


model = VAE()
optimizer = optim.Adam([
    {"params": model.fc1.parameters()},
    {"params": model.fc21.parameters()},
    {"params": [*model.fc3.parameters(), *model.fc4.parameters()], "lr": 2e-2},
], lr=1e-2)

model.train()
for epoch in range(args.epochs):
    train_loss = 0.0
    for batch_idx in range(0, len(data), args.batch_size):
        x = data[batch_idx:batch_idx + args.batch_size]
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(x)
        loss = loss_function(recon_batch, x, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(data):.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
