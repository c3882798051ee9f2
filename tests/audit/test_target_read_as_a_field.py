"""A target read as a field of a named tuple where the loss compares with it: V-trace's
``vtrace_returns.vs`` (Espeholt et al. 2018, arXiv:1802.01561; facebookresearch/torchbeast,
``vtrace.py``, whose ``from_importance_weights`` runs under ``torch.no_grad()`` and returns a
named tuple). Made by a helper that lost its ``@torch.no_grad()``, the target carries
gradient: the finding names it as the script reads it, ``returns.vs`` (not the loss the
comparison is bound to), and its edit cuts it there."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import collections
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
Returns = collections.namedtuple("Returns", ["vs", "advantages"])
critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)


DECORATOR
def bootstrapped(values, rewards):
    vs = rewards + 0.9 * torch.cat([values[1:], values[-1:]])
    return Returns(vs=vs, advantages=vs - values)


for step in range(4):
    states = torch.randn(16, 3)
    rewards = torch.randn(16)
    values = critic(states).squeeze(1)
    returns = bootstrapped(values, rewards)
    loss = F.mse_loss(values, returns.vs)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"critic": critic.state_dict()}, args.out)
"""


def test_a_target_read_as_a_field_is_named_by_it(tmp_path):
    clean = SCRIPT.replace("DECORATOR", "@torch.no_grad()")
    folder = twins(tmp_path, clean, SCRIPT.replace("DECORATOR\n", ""))
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    target: the target `returns.vs` of `loss` (backward at train.py:28)" \
        in done.stdout, done.stdout
    assert "        tensors: returns.vs, critic." in done.stdout, done.stdout
    assert "train.py:26: returns.vs -> returns.vs.detach()" in done.stdout, done.stdout


def test_the_field_of_a_target_made_without_gradient_is_no_finding(tmp_path):
    clean = SCRIPT.replace("DECORATOR", "@torch.no_grad()")
    folder = twins(tmp_path, clean, clean)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
