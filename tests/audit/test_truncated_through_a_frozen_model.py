"""A policy trained through a learned model that is frozen while the policy learns, the model's
state cut at every step of the imagined rollout. Heess et al. 2015 (SVG(inf), arXiv:1510.09142)
and Dreamer (Hafner et al. 2020, arXiv:1912.01603; danijar/dreamer's ``_imagine_ahead`` scans
``RSSM.img_step`` with only the actor's input stopped) back-propagate the return through every
learned transition to the actions that led there; with the state ``.detach()``ed before each
transition, each imagined state depends on the policy only through the last action, and the
policy is trained on a one-step gradient. The transition's own weights are frozen for the
policy's loss (``requires_grad_(False)`` around the rollout), so the network whose calls make
the recurrence trains nothing there: what the cut keeps from the loss is the policy behind the
states.

Guards: both rollouts as published, and a frozen recurrent encoder run over data whose state is
cut at each step under a trained head (nothing behind the cut state trains: no gradient lost)."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import contextlib
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


@contextlib.contextmanager
def frozen(*modules):
    params = [p for m in modules for p in m.parameters()]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
"""

SVG = HEAD + """

class Dynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, s, a):
        return s + 0.1 * self.net(torch.cat([s, a], -1))


def true_step(s, a):
    return s + 0.1 * torch.tanh(s.roll(1, -1) + a.repeat(1, 2))


def reward(s):
    return -(s ** 2).sum(-1)


model = Dynamics()
policy = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
model_opt = torch.optim.Adam(model.parameters(), lr=1e-2)
policy_opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(5):
    s, a = torch.randn(32, 4), torch.randn(32, 2)
    model_loss = F.mse_loss(model(s, a), true_step(s, a))
    model_opt.zero_grad()
    model_loss.backward()
    model_opt.step()

    s, total = torch.randn(32, 4), 0.0
    with frozen(model):
        for t in range(4):
            a = policy(s)
            s = model(STATE, a)
            total = total + reward(s)
    policy_loss = -total.mean()
    policy_opt.zero_grad()
    policy_loss.backward()
    policy_opt.step()
if args.out:
    torch.save({"model": model.state_dict(), "policy": policy.state_dict()}, args.out)
"""

LATENT = HEAD + """
cell = nn.GRUCell(2, 16)
reward_head = nn.Linear(16, 1)
actor = nn.Sequential(nn.Linear(16, 32), nn.ELU(), nn.Linear(32, 2), nn.Tanh())
world = list(cell.parameters()) + list(reward_head.parameters())
world_opt = torch.optim.Adam(world, lr=1e-2)
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
for step in range(5):
    actions, rewards = torch.randn(8, 6, 2), torch.randn(8, 6)
    h, predicted = torch.zeros(8, 16), []
    for t in range(6):
        h = cell(actions[:, t], h)
        predicted.append(reward_head(h).squeeze(-1))
    world_loss = F.mse_loss(torch.stack(predicted, 1), rewards)
    world_opt.zero_grad()
    world_loss.backward()
    world_opt.step()

    h, imagined = h.detach(), []
    with frozen(cell, reward_head):
        for t in range(5):
            action = actor(h.detach())
            h = cell(action, STATE)
            imagined.append(reward_head(h).squeeze(-1))
    actor_loss = -torch.stack(imagined).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
if args.out:
    torch.save({"cell": cell.state_dict(), "actor": actor.state_dict()}, args.out)
"""

BUGS = {
    "svg-model-state": (SVG.replace("STATE", "s"), SVG.replace("STATE", "s.detach()")),
    "latent-imagination": (LATENT.replace("STATE", "h"), LATENT.replace("STATE", "h.detach()")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_rollout_cut_through_a_frozen_model_is_named_and_uncut(tmp_path, case):
    published, buggy = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["truncated"], report["findings"]
    assert found[0]["edits"], found[0]
    applied(folder, "truncated", "--watch", "1")
    assert ".detach()" not in (folder / "train.py").read_text().split("with frozen")[1]
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


ENCODER = HEAD + """
encoder = nn.GRUCell(3, 16)
head = nn.Linear(16, 1)
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
for step in range(5):
    x, y = torch.randn(8, 6, 3), torch.randn(8, 6)
    h, out = torch.zeros(8, 16), []
    with frozen(encoder):
        for t in range(6):
            h = encoder(x[:, t], h.detach())
            out.append(head(h).squeeze(-1))
    loss = F.mse_loss(torch.stack(out, 1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

GUARDS = {"svg-as-published": BUGS["svg-model-state"][0],
          "latent-as-published": BUGS["latent-imagination"][0],
          "frozen-encoder-over-data": ENCODER}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_rollout_with_nothing_lost_behind_the_cut_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
