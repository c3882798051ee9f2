"""A second phase whose optimizer is built over the first phase's network, frozen since
(BRAC's actor optimizer over the behaviour policy, Wu, Tucker and Nachum 2019): the actor, a
network the script calls through a method of its own (its body and heads are what runs), gets
its gradient and no optimizer steps it. ``unstepped``, named as the one network the script
calls ``actor`` (not its parts): its edit builds that optimizer over the actor, and the fixed
script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
        self.mean = nn.Linear(8, 1)

    def act(self, state):
        return torch.tanh(self.mean(self.body(state)))


behavior, actor = Policy(), Policy()
state, action = torch.randn(32, 3), torch.rand(32, 1) * 2 - 1
behavior_optimizer = torch.optim.Adam(behavior.parameters(), lr=0.05)
for step in range(3):
    loss = F.mse_loss(behavior.act(state), action)
    behavior_optimizer.zero_grad()
    loss.backward()
    behavior_optimizer.step()
behavior.requires_grad_(False)
actor_optimizer = torch.optim.Adam(OVER.parameters(), lr=0.05)
for step in range(3):
    loss = F.mse_loss(actor.act(state), behavior.act(state)) - actor.act(state).mean()
    actor_optimizer.zero_grad()
    loss.backward()
    actor_optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "behavior": behavior.state_dict()}, args.out)
"""


def test_the_optimizer_is_built_over_the_network_its_loss_trains(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("OVER", "actor"), SCRIPT.replace("OVER", "behavior"))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "behavior.parameters() -> actor.parameters()" in done.stdout
    assert "tensors of actor get gradient" in done.stdout
