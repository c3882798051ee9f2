"""A momentum encoder bound to the encoder it follows (``momentum_encoder = base_encoder`` for
MoCo v3's copy, facebookresearch/moco-v3 ``moco/builder.py``), updated before the forward that
reads it: the update writes the base encoder's own weights (``p.mul_(m).add_(p, alpha=1 -
m)`` shrinks each by ``m (2 - m)``), so from the first step everything that reads them, the
predictor on top, trains differently, and the freeze meant for the copy freezes the encoder.
The deep copy is verified although the predictor's gradient changes at the first step (what
the update writes is what it changes), and the fixed script trains as published. A target
network bound to the online one (``target_agent = agent`` for pymarl's ``copy.deepcopy``) and
loaded from it every few steps, its TD targets cut by ``.detach()`` as pymarl's
``QLearner.train`` does, is found at its first load, but its TD targets part from a
copy's at the first update: the deep copy is verified from there, and trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

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
base_encoder = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
momentum_encoder = COPY
for p in momentum_encoder.parameters():
    p.requires_grad = False
predictor = nn.Linear(4, 4)
optimizer = torch.optim.SGD([*base_encoder.parameters(), *predictor.parameters()], lr=0.1)
for step in range(4):
    x1, x2 = torch.randn(16, 6), torch.randn(16, 6)
    with torch.no_grad():
        for pb, pm in zip(base_encoder.parameters(), momentum_encoder.parameters()):
            pm.mul_(0.9).add_(pb, alpha=0.1)
        k = F.normalize(momentum_encoder(x2), dim=1)
    q = F.normalize(predictor(base_encoder(x1)), dim=1)
    loss = F.cross_entropy(q @ k.t() / 0.2, torch.arange(16))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"base": base_encoder.state_dict(), "predictor": predictor.state_dict()},
               args.out)
"""


def test_the_deep_copy_of_a_momentum_encoder_moved_before_its_read_trains(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("COPY", "copy.deepcopy(base_encoder)"),
                   SCRIPT.replace("COPY", "base_encoder"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "copy.deepcopy(base_encoder)" in (folder / "train.py").read_text(), done.stdout


DQN = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
agent = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
target_agent = COPY
optimizer = torch.optim.SGD(agent.parameters(), lr=0.05)
for step in range(8):
    state, next_state = torch.randn(16, 4), torch.randn(16, 4)
    action, reward = torch.randint(0, 2, (16, 1)), torch.randn(16)
    target = (reward + 0.9 * target_agent(next_state).max(1).values).detach()
    q = agent(state).gather(1, action).squeeze(1)
    loss = ((q - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 4 == 3:
        target_agent.load_state_dict(agent.state_dict())
if args.out:
    torch.save({"agent": agent.state_dict()}, args.out)
"""


def test_the_deep_copy_of_a_target_loaded_every_few_steps_trains(tmp_path):
    folder = twins(tmp_path, DQN.replace("COPY", "copy.deepcopy(agent)"),
                   DQN.replace("COPY", "agent"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "copy.deepcopy(agent)" in (folder / "train.py").read_text(), done.stdout
