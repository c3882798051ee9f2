"""The binary hashing autoencoder of ``hash_ae.py`` (Li and van Gemert, arXiv:2012.12334;
https://github.com/liyunqianggyn/Deep-Unsupervised-Image-Hashing; Bengio et al.'s
straight-through estimator, arXiv:1308.3432), with what its training loop also does with hard
codes that need no straight-through: a bit agreement with the previous batch's codes, an
argmax over the decoder's output for a logged "pattern accuracy" (with gradients on), and an
evaluation under ``no_grad`` every few iterations that feeds the hard codes of held-out data
to the decoder. None of these reaches a loss. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--bits", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

dim = 24
patterns = torch.randn(6, dim)
labels = torch.randint(0, 6, (args.iterations, 32))
data = patterns[labels] + 0.1 * torch.randn(args.iterations, 32, dim)
held_out = patterns + 0.1 * torch.randn(6, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, args.bits))
decoder = nn.Sequential(nn.Linear(args.bits, 32), nn.ReLU(), nn.Linear(32, dim))
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)

for iteration in range(args.iterations):
    x = data[iteration]
    p = torch.sigmoid(encoder(x))
    b = (p > 0.5).float()
    b = (b - p).detach() + p
    out = decoder(b)
    reconstruction = F.mse_loss(out, x)
    balance = (p.mean(dim=0) - 0.5).pow(2).sum()
    loss = reconstruction + 0.1 * balance
    nearest = (out @ patterns.T).argmax(dim=1)
    accuracy = (nearest == labels[iteration]).float().mean()
    bits_on = (p > 0.5).float().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if iteration % 4 == 0:
        with torch.no_grad():
            codes = (torch.sigmoid(encoder(held_out)) > 0.5).float()
            error = F.mse_loss(decoder(codes), held_out)
        print(f"iteration {iteration} loss {loss.item():.4f} accuracy {accuracy.item():.2f} "
              f"bits on {bits_on.item():.2f} held-out error {error.item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"decoder.{k}": v for k, v in decoder.state_dict().items()}}, args.out)
