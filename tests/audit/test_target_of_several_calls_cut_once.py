"""A target made from the outputs of several calls on several lines (AWAC's advantage weights
``exp((Q(s, a) - V(s)) / lambda)``, with ``V(s) = Q(s, pi(s))`` and ``Q(s, a)`` from the
critic on two lines; Nair et al. 2020): cut once, where the target is made, rather than at
each call, and the fixed script trains as the published one, which detaches the weights."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
actor = nn.Linear(3, 2)
critic = nn.Linear(5, 1)
actor_optimizer = torch.optim.SGD(actor.parameters(), lr=0.1)
critic_optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)
states, actions = torch.randn(16, 3), torch.randn(16, 2)
for step in range(4):
    critic_loss = (critic(torch.cat([states, actions], 1)) - 1.0).pow(2).mean()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    pi_action = torch.tanh(actor(states))
    v = critic(torch.cat([states, pi_action], 1)).squeeze(1)
    q = critic(torch.cat([states, actions], 1)).squeeze(1)
    weights = torch.exp(q - v)WEIGHTS
    log_prob = -(actor(states) - actions).pow(2).sum(1)
    actor_loss = -(log_prob * weights).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
"""


def test_the_weights_are_cut_where_they_are_made(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("WEIGHTS", ".detach()"),
                   SCRIPT.replace("WEIGHTS", ""))
    done = applied_and_trains(folder, "target", "--watch", "1")
    assert "train.py:22: torch.exp(q - v) -> torch.exp(q - v).detach()" in done.stdout, \
        done.stdout
