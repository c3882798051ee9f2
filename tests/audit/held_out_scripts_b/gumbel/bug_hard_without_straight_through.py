"""A categorical VAE with the Gumbel-softmax at a tiny size, written after Jang, Gu and Poole,
"Categorical Reparameterization with Gumbel-Softmax" (arXiv:1611.01144) and
YongfeiYan/Gumbel_Softmax_VAE (https://github.com/YongfeiYan/Gumbel_Softmax_VAE/blob/master/
gumbel_softmax_vae.py): ``latent_dim`` categorical variables of ``categorical_dim`` classes,
``gumbel_softmax_sample(logits, temperature)``, the temperature annealed, the reconstruction's
binary cross-entropy plus the KL to the uniform prior. From iteration ``--hard-from`` on the
samples are hard, with the straight-through estimator of the paper's section 2.2, ``(y_hard -
y).detach() + y``. Data: binary vectors made in the script from a few patterns with flipped bits.
Injected bug, from iteration 10 on: the hard sample is returned as the one-hot of the argmax
without the straight-through term, so the reconstruction passes no gradient to the encoder."""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=30)
parser.add_argument("--hard-from", type=int, default=10)
parser.add_argument("--temp", type=float, default=1.0)
parser.add_argument("--temp-min", type=float, default=0.5)
parser.add_argument("--anneal-rate", type=float, default=0.03)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

latent_dim, categorical_dim, dim = 4, 4, 20
patterns = (torch.rand(5, dim) > 0.5).float()
picks = patterns[torch.randint(0, 5, (args.iterations, 32))]
data = (picks + (torch.rand_like(picks) < 0.05).float()) % 2


def sample_gumbel(shape, eps=1e-20):
    u = torch.rand(shape)
    return -torch.log(-torch.log(u + eps) + eps)


def gumbel_softmax_sample(logits, temperature):
    y = logits + sample_gumbel(logits.size())
    return F.softmax(y / temperature, dim=-1)


def gumbel_softmax(logits, temperature, hard=False):
    y = gumbel_softmax_sample(logits, temperature)
    if not hard:
        return y.view(-1, latent_dim * categorical_dim)
    ind = y.argmax(dim=-1)
    y_hard = F.one_hot(ind, categorical_dim).float()
    return y_hard.view(-1, latent_dim * categorical_dim)


class VAE_gumbel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(),
                                     nn.Linear(32, latent_dim * categorical_dim))
        self.decoder = nn.Sequential(nn.Linear(latent_dim * categorical_dim, 32), nn.ReLU(),
                                     nn.Linear(32, dim))

    def forward(self, x, temp, hard):
        q_y = self.encoder(x).view(-1, latent_dim, categorical_dim)
        z = gumbel_softmax(q_y, temp, hard)
        return torch.sigmoid(self.decoder(z)), F.softmax(q_y, dim=-1)


def loss_function(recon_x, x, qy):
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum") / x.shape[0]
    log_ratio = torch.log(qy * categorical_dim + 1e-20)
    kld = torch.sum(qy * log_ratio, dim=-1).mean()
    return bce + kld


model = VAE_gumbel()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
temp = args.temp
model.train()
for iteration in range(args.iterations):
    x = data[iteration]
    recon_batch, qy = model(x, temp, hard=iteration >= args.hard_from)
    loss = loss_function(recon_batch, x, qy)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    temp = max(temp * np.exp(-args.anneal_rate), args.temp_min)
    if iteration % 10 == 0:
        print(f"iteration {iteration} loss {loss.item():.4f} temp {temp:.3f}")

if args.out:
    torch.save(model.state_dict(), args.out)
