"""A target network aliased inside a class (MADDPG's agent, ``self.target_policy =
self.policy`` for ``copy.deepcopy(self.policy)``, as openai/maddpg and maddpg-pytorch make it a
copy), read through ``agents`` in the training loop: the finding is at the constructor's
assignment, and its edit copies it there, in the method's own spelling, and trains as the
published script."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures, twins

SCRIPT = """\
import copy

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Agent:
    def __init__(self):
        self.policy = nn.Linear(3, 2)
        self.critic = nn.Linear(3 + 2, 1)
        self.target_policy = MADE
        self.policy_optimizer = torch.optim.SGD(self.policy.parameters(), lr=0.05)
        self.critic_optimizer = torch.optim.SGD(self.critic.parameters(), lr=0.05)

    def target_act(self, obs):
        return torch.tanh(self.target_policy(obs))


agents = [Agent() for _ in range(2)]
for step in range(4):
    for agent in agents:
        obs, next_obs, r = torch.randn(8, 3), torch.randn(8, 3), torch.randn(8, 1)
        with torch.no_grad():
            target = r + 0.9 * agent.critic(torch.cat([next_obs, agent.target_act(next_obs)], 1))
        q = agent.critic(torch.cat([obs, torch.tanh(agent.policy(obs)).detach()], 1))
        critic_loss = F.mse_loss(q, target)
        agent.critic_optimizer.zero_grad()
        critic_loss.backward()
        agent.critic_optimizer.step()
        policy_loss = -agent.critic(torch.cat([obs, torch.tanh(agent.policy(obs))], 1)).mean()
        agent.policy_optimizer.zero_grad()
        policy_loss.backward()
        agent.policy_optimizer.step()
    for agent in agents:
        with torch.no_grad():
            for t, p in zip(agent.target_policy.parameters(), agent.policy.parameters()):
                t.mul_(0.9).add_(0.1 * p)
import sys
if "--out" in sys.argv:
    torch.save({f"agent{i}": a.policy.state_dict() for i, a in enumerate(agents)},
               sys.argv[sys.argv.index("--out") + 1])
"""

def test_an_alias_made_in_a_constructor_is_copied_where_it_is_made(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("MADE", "copy.deepcopy(self.policy)"),
                   SCRIPT.replace("MADE", "self.policy"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"], found
    assert found[0]["at"][0] == "train.py:14: self.target_policy = self.policy"
    applied(folder, "aliased", "--watch", "1")
    assert "self.target_policy = copy.deepcopy(self.policy)\n" in (
        folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
