"""Dreamer's world-model and actor updates at a tiny size, written after Hafner et al., "Dream
to Control: Learning Behaviors by Latent Imagination" (arXiv:1912.01603) and danijar/dreamer
(dreamer.py: one optimizer over the encoder, dynamics, decoder and reward head, its gradient
clipped over the same list; the world model frozen while the actor learns through imagined
rewards, its flags restored after; tools.py: the context manager that does it). Observations
are random vectors; the "dynamics" is one linear map of the state and the action. As
published: clean."""

import argparse
import contextlib

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

encoder = nn.Linear(6, 4)
dynamics = nn.Linear(4 + 2, 4)
decoder = nn.Linear(4, 6)
reward_model = nn.Linear(4, 1)
actor = nn.Sequential(nn.Linear(4, 2), nn.Tanh())

model_params = [p for m in (encoder, dynamics, decoder, reward_model) for p in m.parameters()]
model_opt = torch.optim.Adam(model_params, lr=1e-2)
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)


@contextlib.contextmanager
def freeze(modules):
    params = [p for m in modules for p in m.parameters()]
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def train_step(obs, action, reward):
    state = encoder(obs)
    model_loss = F.mse_loss(decoder(state), obs) + F.mse_loss(reward_model(state).squeeze(-1),
                                                               reward)
    model_opt.zero_grad()
    model_loss.backward()
    nn.utils.clip_grad_norm_(model_params, 1.0)
    model_opt.step()
    with freeze([encoder, dynamics, decoder, reward_model]):
        imagined = state.detach()
        total = 0.0
        for _ in range(3):
            imagined = torch.tanh(dynamics(torch.cat([imagined, actor(imagined)], -1)))
            total = total + reward_model(imagined).mean()
        actor_loss = -total
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
    return model_loss.item(), actor_loss.item()


obs, action, reward = torch.randn(16, 6), torch.randn(16, 2), torch.randn(16)
for step in range(args.steps):
    print(step, *(f"{x:.4f}" for x in train_step(obs, action, reward)))
if args.out:
    torch.save({n: m.state_dict() for n, m in (("encoder", encoder), ("dynamics", dynamics),
               ("decoder", decoder), ("reward", reward_model), ("actor", actor))}, args.out)
