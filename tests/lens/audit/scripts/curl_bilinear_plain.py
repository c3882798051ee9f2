"""CURL's contrastive update at a tiny size, written after Srinivas, Laskin and Abbeel, "CURL:
Contrastive Unsupervised Representations for Reinforcement Learning" (arXiv:2004.04136) and
MishaLaskin/curl (curl_sac.py: an agent object, no module itself, holds the critic and a
``CURL`` module whose bilinear matrix ``W`` scores a query against the keys,
``logits = z_a @ W @ z_pos.T``, cross-entropy against the diagonal; the CPC optimizer is built
over ``CURL.parameters()``; the keys come from a momentum encoder under ``no_grad``).
Observations are random vectors, two noisy views of each. Bug: ``W`` is made a plain tensor
that requires grad instead of an ``nn.Parameter``: ``self.curl.parameters()`` does not hold
it, so the loss trains it and no optimizer steps it."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)


class CURL(nn.Module):
    def __init__(self, encoder, encoder_target, z_dim):
        super().__init__()
        self.encoder = encoder
        self.encoder_target = encoder_target
        self.W = torch.rand(z_dim, z_dim, requires_grad=True)

    def encode(self, x, ema=False):
        if ema:
            with torch.no_grad():
                return self.encoder_target(x)
        return self.encoder(x)

    def compute_logits(self, z_a, z_pos):
        logits = z_a @ (self.W @ z_pos.T)
        return logits - logits.max(1)[0][:, None]


class Agent:
    def __init__(self):
        self.encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 8))
        self.encoder_target = copy.deepcopy(self.encoder)
        self.curl = CURL(self.encoder, self.encoder_target, 8)
        self.cpc_optimizer = torch.optim.Adam(self.curl.parameters(), lr=1e-2)

    def update_cpc(self, obs_anchor, obs_pos):
        z_a = self.curl.encode(obs_anchor)
        z_pos = self.curl.encode(obs_pos, ema=True)
        logits = self.curl.compute_logits(z_a, z_pos)
        labels = torch.arange(logits.shape[0])
        loss = F.cross_entropy(logits, labels)
        self.cpc_optimizer.zero_grad()
        loss.backward()
        self.cpc_optimizer.step()
        with torch.no_grad():
            for p, q in zip(self.encoder.parameters(), self.encoder_target.parameters()):
                q.mul_(0.95).add_(0.05 * p)
        return loss.item()


agent = Agent()
obs = torch.randn(32, 10)
for step in range(args.steps):
    anchor = obs + 0.1 * torch.randn_like(obs)
    positive = obs + 0.1 * torch.randn_like(obs)
    print(f"step {step} loss {agent.update_cpc(anchor, positive):.4f}")
if args.out:
    torch.save({"curl": {k: v for k, v in agent.curl.state_dict().items() if k != "W"},
                "W": agent.curl.W.detach().clone()}, args.out)
