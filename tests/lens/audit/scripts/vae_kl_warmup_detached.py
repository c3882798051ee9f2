"""A variational autoencoder with a warm-up of the KL term at a tiny size, written after Kingma
and Welling, "Auto-Encoding Variational Bayes" (arXiv:1312.6114), pytorch/examples (vae/main.py,
``loss_function``) and the warm-up of Sonderby et al., "Ladder Variational Autoencoders" (NeurIPS
2016, arXiv:1602.02282; casperkaae/LVAE): the KL term's weight grows from 0 in the first epoch
to 1, and the KL term trains the encoder. Bug twin of vae_kl_warmup.py: the loss is called with
the detached mean and log-variance (``loss_function(recon, x, mu.detach(), logvar.detach(),
beta)``), so the KL term is made of cut values only: it changes the printed loss and trains
nothing. Its weight is 0 in the first epoch: the bug changes the first update of the second
epoch, iteration 4. The fix is that line, with ``mu, logvar``. ``--out PATH`` saves the model's
weights."""

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
        loss = loss_function(recon, x, mu.detach(), logvar.detach(), beta)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} step {step} beta {beta:.2f} loss {loss.item():.4f}")
        step += 1

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
