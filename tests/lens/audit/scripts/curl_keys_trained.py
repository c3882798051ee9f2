"""CURL's contrastive objective at a tiny size, written after Srinivas et al., "CURL:
Contrastive Unsupervised Representations for Reinforcement Learning" (arXiv:2004.04136) and
MishaLaskin/curl (curl_sac.py, ``CURL.compute_logits``): a query encoder, a key encoder that
follows it by momentum (``soft_update_params``), the keys ``.detach()``-ed, bilinear logits
``z_a^T W z_pos`` with the positives on the diagonal, cross entropy. One Adam is built over the
whole module (the key encoder gets no gradient: Adam leaves it as it is). Data: random
observations, two noisy crops each, made in the script. Bug: the keys are not detached, so
the loss trains the key encoder through them and Adam steps it against its momentum update."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--tau", type=float, default=0.05)
args = parser.parse_args()
torch.manual_seed(0)

obs_dim, z_dim = 10, 6
observations = torch.randn(256, obs_dim)


class CURL(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(), nn.Linear(16, z_dim))
        self.encoder_target = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(),
                                            nn.Linear(16, z_dim))
        self.encoder_target.load_state_dict(self.encoder.state_dict())
        self.W = nn.Parameter(torch.rand(z_dim, z_dim))

    def compute_logits(self, z_a, z_pos):
        logits = torch.matmul(z_a, torch.matmul(self.W, z_pos.T))
        return logits - torch.max(logits, 1)[0][:, None]


curl = CURL()
optimizer = torch.optim.Adam(curl.parameters(), lr=1e-3)

for step in range(args.steps):
    x = observations[torch.randint(0, len(observations), (16,))]
    obs_anchor = x + 0.1 * torch.randn_like(x)
    obs_pos = x + 0.1 * torch.randn_like(x)
    for param, target_param in zip(curl.encoder.parameters(), curl.encoder_target.parameters()):
        target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
    z_a = curl.encoder(obs_anchor)
    z_pos = curl.encoder_target(obs_pos)
    logits = curl.compute_logits(z_a, z_pos)
    loss = F.cross_entropy(logits, torch.arange(logits.shape[0]))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
