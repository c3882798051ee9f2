"""Contrastive predictive coding at a tiny size, written after van den Oord, Li and Vinyals,
"Representation Learning with Contrastive Predictive Coding" (arXiv:1807.03748), section 2, with the
CDCK2 model of jefflai108/Contrastive-Predictive-Coding-PyTorch
(https://github.com/jefflai108/Contrastive-Predictive-Coding-PyTorch, src/model/model.py): a strided
convolutional encoder maps a raw signal to latents ``z_t``; a GRU summarises ``z_1..z_t`` (a random
time ``t`` per minibatch) into a context ``c_t``; one linear map ``W_k`` per future step predicts
``z_{t+k}`` from ``c_t``, and the InfoNCE loss scores each prediction against the true future
latents of the minibatch (the other sequences are the negatives). The loss trains the encoder
through both the context and the future latents it is asked to predict, the GRU and the ``W_k``.
Signals (sums of sinusoids with noise) made in the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=14)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--timestep", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

length, channels, hidden = 64, 16, 12


def batch(n):
    t = torch.arange(length).float()
    freq = 0.1 + 0.4 * torch.rand(n, 2, 1)
    phase = 2 * math.pi * torch.rand(n, 2, 1)
    signal = torch.sin(freq * t + phase).sum(1) + 0.1 * torch.randn(n, length)
    return signal.unsqueeze(1)  # (batch, 1, length)


class CDCK2(nn.Module):
    def __init__(self, timestep):
        super().__init__()
        self.timestep = timestep
        self.encoder = nn.Sequential(
            nn.Conv1d(1, channels, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv1d(channels, channels, 4, stride=2, padding=1), nn.ReLU())
        self.gru = nn.GRU(channels, hidden, batch_first=True)
        self.Wk = nn.ModuleList([nn.Linear(hidden, channels) for _ in range(timestep)])

    def forward(self, x):
        n = x.shape[0]
        z = self.encoder(x).transpose(1, 2)  # (batch, steps, channels)
        t_samples = int(torch.randint(1, z.shape[1] - self.timestep, ()))
        encode_samples = z[:, t_samples + 1:t_samples + 1 + self.timestep]
        forward_seq = z[:, :t_samples + 1]
        output, _ = self.gru(forward_seq, torch.zeros(1, n, hidden))
        c_t = output[:, -1]
        nce, correct = 0.0, 0
        for i in range(self.timestep):
            pred = self.Wk[i](c_t)
            total = encode_samples[:, i] @ pred.t()  # (batch, batch) scores
            nce = nce + torch.diagonal(F.log_softmax(total, dim=1)).sum()
            correct += int((total.argmax(0) == torch.arange(n)).sum())
        nce = nce / (-1.0 * n * self.timestep)
        return nce, correct / (n * self.timestep)


model = CDCK2(args.timestep)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(args.steps):
    x = batch(args.batch_size)
    loss, accuracy = model(x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} nce {loss.item():.4f} accuracy {accuracy:.2f}")

if args.out:
    torch.save(model.state_dict(), args.out)
