"""A network is called by the name the script's own code binds it to, followed out through the
calls that hand it on: a helper under ``@torch.no_grad()`` (torch's wrapper frames between
it and its caller pass the arguments on) called by a function that was itself handed the
network (DivideMix's ``co_guess(net, net2)`` inside ``train(epoch, net, net2)``, called as
``train(epoch, net1, net2)`` and as ``train(epoch, net2, net1)``), and a method's ``self``
(HIRO's ``low.train()``, whose ``self.actor`` is ``low.actor``), which a call binds, not an
assignment. Two networks trained in turns, each reading the other under no_grad, are no
alias, nor is an agent whose actor acts under no_grad at the top level and trains in its
method; a target network bound to the online one and read through such a helper is, at its
binding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

CO_TRAINED = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
net1, net2 = nn.Linear(4, 3), nn.Linear(4, 3)
optimizer1 = torch.optim.SGD(net1.parameters(), lr=0.1)
optimizer2 = torch.optim.SGD(net2.parameters(), lr=0.1)


@torch.no_grad()
def co_guess(net, net2, inputs):
    return (net(inputs).softmax(1) + net2(inputs).softmax(1)) / 2


def train(net, net2, optimizer):
    targets = co_guess(net, net2, x + 0.1 * torch.randn_like(x))
    loss = F.cross_entropy(net(x), y) + F.kl_div(net(x).log_softmax(1), targets,
                                                  reduction="batchmean")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for epoch in range(3):
    train(net1, net2, optimizer1)
    train(net2, net1, optimizer2)
"""

AGENT = """\
import torch
import torch.nn.functional as F
from torch import nn


class Agent:
    def __init__(self):
        self.actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        self.critic = nn.Linear(5, 1)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-2)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-2)

    def train(self, states, actions, rewards):
        q = self.critic(torch.cat([states, actions], 1))
        critic_loss = F.mse_loss(q, rewards)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        actor_loss = -self.critic(torch.cat([states, self.actor(states)], 1)).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()


torch.manual_seed(0)
low = Agent()
buffer = []
s = torch.zeros(3)
for step in range(12):
    with torch.no_grad():
        a = low.actor(s[None])[0]
    n_s = s + 0.1 * torch.cat([a, a[:1]])
    buffer.append((s, a, -n_s.norm()[None]))
    s = n_s
    if step >= 4:
        states, actions, rewards = (torch.stack(v) for v in zip(*buffer[-4:]))
        low.train(states, actions, rewards)
"""

TARGET = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
online = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
target_net = TARGET
optimizer = torch.optim.SGD(online.parameters(), lr=0.05)
states, rewards = torch.randn(32, 4), torch.randn(32)


@torch.no_grad()
def bootstrap(net, next_states):
    return net(next_states).max(1).values


def update(model, target_model):
    target = rewards + 0.9 * bootstrap(target_model, states + 0.1)
    loss = F.mse_loss(model(states)[:, 0], target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for step in range(4):
    update(online, target_net)
    if step % 2 == 1:
        target_net.load_state_dict(online.state_dict())
if args.out:
    torch.save({"online": online.state_dict(), "target": target_net.state_dict()}, args.out)
"""


@pytest.mark.parametrize("script", [CO_TRAINED, AGENT], ids=["co-trained", "agent-self"])
def test_a_network_handed_through_calls_is_not_an_alias_of_itself(tmp_path, script):
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    assert code == 0, [f["message"] for f in failures(report)]


def test_a_target_aliased_and_read_through_a_decorated_helper_is_found_at_its_binding(
        tmp_path):
    folder = twins(tmp_path, TARGET.replace("TARGET", "copy.deepcopy(online)"),
                   TARGET.replace("TARGET", "online"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "train.py:12: target_net = online" in done.stdout
    assert "target_net = copy.deepcopy(online)\n" in (folder / "train.py").read_text()
