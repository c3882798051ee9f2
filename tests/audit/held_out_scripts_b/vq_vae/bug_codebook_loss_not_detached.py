"""VQ-VAE at a tiny size, written after van den Oord, Vinyals and Kavukcuoglu, "Neural Discrete
Representation Learning" (arXiv:1711.00937) and the ``VectorQuantizer`` of
zalandoresearch/pytorch-vq-vae (https://github.com/zalandoresearch/pytorch-vq-vae/blob/master/
vq-vae.ipynb): the nearest codebook entry for each encoding, the codebook loss ``mse(quantized,
inputs.detach())``, the commitment loss ``mse(quantized.detach(), inputs)`` weighted by
``commitment_cost``, and the straight-through copy ``inputs + (quantized - inputs).detach()`` into
the decoder. MLP encoder and decoder on vectors made in the script (a few prototypes plus noise).
Injected bug: the codebook loss is written ``mse(quantized, inputs)`` without its ``.detach()``,
so the encoder is also pulled toward the codebook by the codebook term, at full weight instead of
``commitment_cost``."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--commitment-cost", type=float, default=0.25)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, latent, num_embeddings = 16, 4, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (128,))] + 0.1 * torch.randn(128, dim)


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super().__init__()
        self._embedding = nn.Embedding(num_embeddings, embedding_dim)
        self._embedding.weight.data.uniform_(-1 / num_embeddings, 1 / num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        distances = (inputs.pow(2).sum(1, keepdim=True) + self._embedding.weight.pow(2).sum(1)
                     - 2 * inputs @ self._embedding.weight.t())
        encoding_indices = distances.argmin(1)
        quantized = self._embedding(encoding_indices)
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs)
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        return loss, quantized, encoding_indices


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self._encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, latent))
        self._vq_vae = VectorQuantizer(num_embeddings, latent, args.commitment_cost)
        self._decoder = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, dim))

    def forward(self, x):
        z = self._encoder(x)
        loss, quantized, _ = self._vq_vae(z)
        return loss, self._decoder(quantized)


model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
model.train()
for epoch in range(args.epochs):
    for x in data.split(32):
        vq_loss, data_recon = model(x)
        recon_error = F.mse_loss(data_recon, x)
        loss = recon_error + vq_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} recon {recon_error.item():.4f} vq {vq_loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
