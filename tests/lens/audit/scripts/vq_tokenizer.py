"""A vector-quantised autoencoder at a tiny size, written after van den Oord, Vinyals and
Kavukcuoglu, "Neural Discrete Representation Learning" (arXiv:1711.00937) and
rosinality/vq-vae-2-pytorch (https://github.com/rosinality/vq-vae-2-pytorch/blob/master/
vqvae.py): each encoder output is replaced by its nearest codebook vector, found by the argmin
of the distances and read by an embedding lookup; the codebook and commitment terms train the
codebook and the encoder, and the decoder reads ``z_e + (z_q - z_e).detach()``, the paper's
straight-through copy of the decoder's gradient to the encoder. Data: noisy copies of a few
random patterns, made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--codes", type=int, default=8)
parser.add_argument("--beta", type=float, default=0.25)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

dim, width = 24, 4
patterns = torch.randn(6, dim)
data = patterns[torch.randint(0, 6, (args.iterations, 32))]
data = data + 0.1 * torch.randn_like(data)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, width))
codebook = nn.Embedding(args.codes, width)
decoder = nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, dim))
optimizer = torch.optim.Adam([*encoder.parameters(), *codebook.parameters(),
                              *decoder.parameters()], lr=1e-2)

for iteration in range(args.iterations):
    x = data[iteration]
    z_e = encoder(x)
    distances = torch.cdist(z_e, codebook.weight)
    index = distances.argmin(dim=1)
    z_q = codebook(index)
    codebook_loss = F.mse_loss(z_q, z_e.detach())
    commitment = F.mse_loss(z_e, z_q.detach())
    z_st = z_e + (z_q - z_e).detach()
    reconstruction = F.mse_loss(decoder(z_st), x)
    loss = reconstruction + codebook_loss + args.beta * commitment
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} loss {loss.item():.4f} codes used {index.unique().numel()}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"codebook.{k}": v for k, v in codebook.state_dict().items()},
                **{f"decoder.{k}": v for k, v in decoder.state_dict().items()}}, args.out)
