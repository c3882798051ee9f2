"""Neural variational inference and learning at a tiny size, written after Mnih and Gregor, "Neural
Variational Inference and Learning in Belief Networks" (ICML 2014), Algorithm 1 and Section 3.3: a
sigmoid belief network ``p(x, h)`` and an inference network ``q(h | x)`` trained together on the
learning signal ``l(x, h) = log p(x, h) - log q(h | x)``; the model follows ``grad log p(x, h)``,
the inference network the score-function estimate ``(l - c) / max(1, sqrt(v)) * grad log q(h | x)``
with the signal centred and scaled by running estimates of its mean ``c`` and variance ``v``
(exponential moving averages, kept by a small helper from the signal taken as a constant). One
layer of binary latent units with a uniform prior, on binary vectors drawn from a random belief
network made in the script. Injected bug: the running mean and variance are updated from the
learning signal with its graph (``signal`` for ``signal.detach()``), so the helper's statistics
keep every earlier minibatch's graph; ``backward(retain_graph=True)`` lets the run go on, and the
score-function term then trains both networks through the centring statistics too."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=0.8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, latent = 16, 6
true_weight = 2.0 * torch.randn(dim, latent)


def batch(n):
    h = torch.bernoulli(torch.full((n, latent), 0.5))
    return torch.bernoulli(torch.sigmoid(h @ true_weight.T - 1.0))


class SignalBaseline:
    """Running mean and variance of the learning signal (the paper's c and v)."""

    def __init__(self, alpha):
        self.alpha = alpha
        self.mean = torch.tensor(0.0)
        self.var = torch.tensor(1.0)

    def update(self, signal):
        self.mean = self.alpha * self.mean + (1 - self.alpha) * signal.mean()
        self.var = self.alpha * self.var + (1 - self.alpha) * signal.var()

    def normalize(self, signal):
        return (signal - self.mean) / self.var.sqrt().clamp(min=1.0)


encoder = nn.Linear(dim, latent)
decoder = nn.Linear(latent, dim)
baseline = SignalBaseline(args.alpha)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=3e-2)
for step in range(args.steps):
    x = batch(args.batch_size)
    q_logits = encoder(x)
    h = torch.bernoulli(torch.sigmoid(q_logits)).detach()
    log_q = -F.binary_cross_entropy_with_logits(q_logits, h, reduction="none").sum(1)
    log_px = -F.binary_cross_entropy_with_logits(decoder(h), x, reduction="none").sum(1)
    log_p = log_px + latent * math.log(0.5)
    signal = log_p - log_q
    baseline.update(signal)
    learning_signal = baseline.normalize(signal.detach())
    loss = -(log_p + learning_signal * log_q).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} bound {signal.mean().item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
