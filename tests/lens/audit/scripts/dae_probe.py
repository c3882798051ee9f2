"""A denoising autoencoder, then a linear probe on its frozen code: two phases, written after
Vincent et al., "Extracting and Composing Robust Features with Denoising Autoencoders" (ICML
2008) for the first, and the linear evaluation protocol of Chen et al., "A Simple Framework
for Contrastive Learning of Visual Representations" (arXiv:2002.05709, Section B.6: a linear
classifier trained on frozen features) for the second. Phase 1 trains the encoder and decoder
to reconstruct clean inputs from corrupted ones; phase 2 reads the encoder's code under
``torch.no_grad()`` and trains a linear classifier on it with an optimizer of its own. Data:
three Gaussian clusters in 8 dimensions, made in the script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=6)
parser.add_argument("--pretrain-steps", type=int, default=15)
parser.add_argument("--probe-steps", type=int, default=10)
parser.add_argument("--noise", type=float, default=0.3)
args = parser.parse_args()
torch.manual_seed(args.seed)

centers = torch.randn(3, 8) * 2


def batch(n=32):
    label = torch.randint(0, 3, (n,))
    return centers[label] + torch.randn(n, 8), label


encoder = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
decoder = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8))
ae_optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
for step in range(args.pretrain_steps):
    x, _ = batch()
    recon = decoder(encoder(x + args.noise * torch.randn_like(x)))
    loss = F.mse_loss(recon, x)
    ae_optimizer.zero_grad()
    loss.backward()
    ae_optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

probe = nn.Linear(4, 3)
probe_optimizer = torch.optim.SGD(probe.parameters(), lr=0.5)
for step in range(args.probe_steps):
    x, label = batch()
    with torch.no_grad():
        code = encoder(x)
    loss = F.cross_entropy(probe(code), label)
    probe_optimizer.zero_grad()
    loss.backward()
    probe_optimizer.step()
    print(f"probe {step} loss {loss.item():.4f}")
