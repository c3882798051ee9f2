"""A policy used through its methods (``policy.evaluate``), whose actor and critic the script
calls and whose ``log_std`` is a parameter of the policy itself, with the optimizer built over
a list of the actor's tensors only (GAIL's PPO Adam over the behaviour-cloning list of phase
one; Ho & Ermon 2016, arXiv:1606.03476, ikostrikov/pytorch-a2c-ppo-acktr-gail): the critic is
named as a part of ``policy``, not as ``self.critic``, and ``log_std`` by its path,
``policy.log_std``, not as the whole policy (whose every tensor a group of it would add
twice). Each gets a group of its own, and the edited script trains as the one built over
``policy.parameters()``."""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        self.critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        self.log_std = nn.Parameter(torch.zeros(2))

    def evaluate(self, states, actions):
        dist = torch.distributions.Normal(self.actor(states), self.log_std.exp())
        return dist.log_prob(actions).sum(1), self.critic(states).squeeze(1)


policy = Policy()
actor_params = list(policy.actor.parameters())
optimizer = torch.optim.Adam(PARAMS, lr=0.01)
for step in range(4):
    states = torch.randn(16, 3)
    actions = torch.randn(16, 2)
    returns = torch.randn(16)
    log_prob, values = policy.evaluate(states, actions)
    advantages = (returns - values).detach()
    loss = -(log_prob * advantages).mean() + 0.5 * (returns - values).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"policy": policy.state_dict()}, args.out)
"""


def test_the_parts_of_a_policy_left_out_are_named_by_the_policy(tmp_path):
    clean = SCRIPT.replace("PARAMS", "policy.parameters()")
    folder = twins(tmp_path, clean, SCRIPT.replace("PARAMS", "actor_params"))
    done = cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    unstepped: `policy.log_std` gets gradient" in done.stdout, done.stdout
    assert "FAIL    unstepped: 4 tensors of policy get gradient" in done.stdout, done.stdout
    assert 'insert before it: optimizer.add_param_group({"params": [policy.log_std]})' \
        in done.stdout, done.stdout
    assert 'insert before it: optimizer.add_param_group({"params": policy.critic.parameters()})' \
        in done.stdout, done.stdout
    assert "2 verified edits" in done.stdout, done.stdout
    assert_trains_as(folder)

def test_a_policy_built_whole_is_no_finding(tmp_path):
    clean = SCRIPT.replace("PARAMS", "policy.parameters()")
    folder = twins(tmp_path, clean, clean)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
