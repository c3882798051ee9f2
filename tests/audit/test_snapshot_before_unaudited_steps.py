"""A snapshot of a tensor taken after an audited step, read at a later audited step with steps
that were not audited between (``--steps 1``, the actor's first update a new step site): the
optimizer's own moves are in the difference, and a one-element bias moved by them "toward"
another one-element tensor an optimizer steps looked like an EMA copy the loss trains (TD3's
critic output bias beside the actor's). The move is the script's own only when the snapshot is
of the tensor's last step: the published script is clean, and a target aliased to its critic
gets the copy, which trains as the published script."""

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
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1), nn.Tanh())
critic = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
critic_target = CRITIC_TARGET
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
for it in range(1, 9):
    s, a, r, s2 = torch.randn(16, 3), torch.randn(16, 1), torch.randn(16, 1), torch.randn(16, 3)
    with torch.no_grad():
        y = r + 0.9 * critic_target(torch.cat([s2, actor(s2)], 1))
    critic_loss = F.mse_loss(critic(torch.cat([s, a], 1)), y)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    if it % 3 == 0:
        actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        with torch.no_grad():
            for t, p in zip(critic_target.parameters(), critic.parameters()):
                t.mul_(0.9).add_(0.1 * p)
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
"""


def test_a_step_after_unaudited_steps_is_no_move_of_the_script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.replace("CRITIC_TARGET", "copy.deepcopy(critic)"))
    code, report = audit(tmp_path, path, "--steps", "1")
    assert (code, failures(report)) == (0, [])


def test_an_aliased_target_gets_its_copy_verified_past_unaudited_steps(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CRITIC_TARGET", "copy.deepcopy(critic)"),
                   SCRIPT.replace("CRITIC_TARGET", "critic"))
    done = applied_and_trains(folder, "aliased", "--steps", "1")
    assert "copy.deepcopy(critic)" in done.stdout
