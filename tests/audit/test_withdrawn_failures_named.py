"""A failure printed as the run went (``--watch``) that a later iteration takes back is withdrawn
by name before the summary, not dropped in silence: SAC's temperature, read as
``alpha = torch.exp(log_alpha)`` by the actor's loss (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", arXiv:1812.05905), looks like a target that trains ``log_alpha``
until the temperature's optimizer clears that gradient before its own backward: no weight
changed, so the ``target`` failures printed at each iteration are withdrawn at the end, and
the audit exits clean. Without that ``zero_grad`` the gradient reaches the temperature's step:
the failures stand and nothing is withdrawn."""

from __future__ import annotations

import re

import pytest
from script_audit import cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 2)

    def forward(self, state):
        mean, log_std = self.net(state).chunk(2, dim=1)
        std = log_std.clamp(-5, 2).exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        log_prob = torch.distributions.Normal(mean, std).log_prob(pre_tanh)
        return torch.tanh(pre_tanh), log_prob


actor = Actor()
critic = nn.Linear(4, 1)
log_alpha = torch.zeros(1, requires_grad=True)
actor_optimizer = torch.optim.SGD(actor.parameters(), lr=0.1)
critic_optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)
alpha_optimizer = torch.optim.SGD([log_alpha], lr=0.1)
for step in range(4):
    state = torch.randn(8, 3)
    reward = torch.randn(8, 1)
    alpha = torch.exp(log_alpha)
    with torch.no_grad():
        next_action, next_log_pi = actor(state)
        target = reward - alpha * next_log_pi
    critic_loss = (critic(torch.cat([state, next_action], 1)) - target).pow(2).mean()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    action, log_pi = actor(state)
    alpha_loss = -(log_alpha * (log_pi + 1.0).detach()).mean()
    actor_loss = (alpha * log_pi - critic(torch.cat([state, action], 1))).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    alpha_optimizer.zero_grad()
    alpha_loss.backward()
    alpha_optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "log_alpha": log_alpha}, args.out)
"""


def test_printed_failures_taken_back_are_withdrawn_by_name(tmp_path):
    folder = twins(tmp_path, SCRIPT, SCRIPT)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
    printed = [int(i) for i in re.findall(r"^FAIL    target: .* \(iteration (\d+)\)$",
                                          done.stdout, re.M)]
    assert printed, done.stdout
    withdrawn = re.search(r"^toolkit audit: withdrawn: the target failures? printed above "
                          r"\(iterations? ([\d, ]+)\): every gradient carried into a stepped "
                          r"tensor was cleared before a step used it", done.stdout, re.M)
    assert withdrawn, done.stdout
    assert sorted(set(printed)) == [int(i) for i in withdrawn.group(1).split(", ")]
    assert done.stdout.index("withdrawn:") < done.stdout.index("toolkit audit: train.py:")
    assert "toolkit audit: 0 failures" in done.stdout, done.stdout


def test_failures_that_stand_are_not_withdrawn(tmp_path):
    script = SCRIPT.replace("    alpha_optimizer.zero_grad()\n", "").replace(
        "    actor_optimizer.zero_grad()\n",
        "    actor_optimizer.zero_grad()\n    alpha_optimizer.zero_grad()\n")
    assert script != SCRIPT
    folder = twins(tmp_path, SCRIPT, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    target: the target `alpha`" in done.stdout, done.stdout
    assert "withdrawn" not in done.stdout, done.stdout
