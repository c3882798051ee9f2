"""A target made by a helper that calls two networks on two lines of its own (DrQ's
``soft_target``, Kostrikov et al. 2020: the actor's next action, then the target critic),
called without ``no_grad`` on one line of the critic's update (the augmented target, cut in
the published code): the target is cut at that call, where the step's own code makes it, and
the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
actor, critic = nn.Linear(3, 1), nn.Linear(4, 1)
critic_target = copy.deepcopy(critic)
optimizer = torch.optim.SGD([*critic.parameters(), *actor.parameters()], lr=0.1)


def soft_target(next_obs, reward):
    action = torch.tanh(actor(next_obs))
    value = critic_target(torch.cat([next_obs, action], 1))
    return reward + 0.9 * (value - 0.1 * action.pow(2))


def update(obs, action, reward, next_obs):
    TARGET
    loss = F.mse_loss(critic(torch.cat([obs, action], 1)), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for step in range(3):
    update(torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1), torch.randn(8, 3))
if args.out:
    torch.save({"critic": critic.state_dict(), "actor": actor.state_dict()}, args.out)
"""


def test_a_target_a_helper_makes_is_cut_at_the_helpers_call(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("TARGET", "target = soft_target(next_obs, "
                                                      "reward).detach()"),
                   SCRIPT.replace("TARGET", "target = soft_target(next_obs, reward)"))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "target"]
    assert code == 1 and found, report["findings"]
    assert found[0]["at"][0] == "train.py:23: target = soft_target(next_obs, reward)", \
        found[0]["at"]
    applied_and_trains(folder, "target", "--watch", "1")
