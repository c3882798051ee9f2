"""A binary hashing autoencoder at a tiny size, written after Li and van Gemert, "Deep
Unsupervised Image Hashing by Maximizing Bit Entropy" (AAAI 2021, arXiv:2012.12334;
liyunqianggyn/Deep-Unsupervised-Image-Hashing, https://github.com/liyunqianggyn/
Deep-Unsupervised-Image-Hashing, its AutoEncoder experiment) with the straight-through estimator
of Bengio, Leonard and Courville (arXiv:1308.3432) for the threshold unit: an encoder's
probabilities ``p`` thresholded into a binary code ``b = (p > 0.5).float()``, passed straight
through in the backward as ``b = (b - p).detach() + p``; a decoder reconstructs the input from
the code; a bit-balance term keeps each bit on for half of the batch (the bit entropy the paper
maximises). Data: noisy copies of a few random patterns, made in the script. Injected bug: the
straight-through line left out, so the decoder reads the code as a constant: the reconstruction
passes no gradient to the encoder, which the bit-balance term alone trains."""

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
data = patterns[torch.randint(0, 6, (args.iterations, 32))]
data = data + 0.1 * torch.randn_like(data)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, args.bits))
decoder = nn.Sequential(nn.Linear(args.bits, 32), nn.ReLU(), nn.Linear(32, dim))
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)

for iteration in range(args.iterations):
    x = data[iteration]
    p = torch.sigmoid(encoder(x))
    b = (p > 0.5).float()
    reconstruction = F.mse_loss(decoder(b), x)
    balance = (p.mean(dim=0) - 0.5).pow(2).sum()
    loss = reconstruction + 0.1 * balance
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"decoder.{k}": v for k, v in decoder.state_dict().items()}}, args.out)
