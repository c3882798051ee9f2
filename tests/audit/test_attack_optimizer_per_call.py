"""A perturbation trained by an optimizer of its own, both made anew at each call of the
attack (TRADES' ``trades_loss``: ``delta = (0.001 * torch.randn(x.shape)).requires_grad_()``
then ``optimizer_delta = optim.SGD([delta], ...)``; Zhang et al. 2019, arXiv:1901.08573,
yaodongyu/TRADES, trades.py): the last perturbation is held by the last call's optimizer,
whose name now holds the next one's, and the next perturbation is held by the new optimizer
built after it was made. No tensor was put in place of one an optimizer holds: no finding.
Rebinding the perturbation after its optimizer was built (``delta = delta.detach()
.clamp(...).requires_grad_()`` in place of an in-place clamp under ``no_grad``) is the bug the
rule is for: its optimizer steps the old tensor, and the edit writes the values into it."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
optimizer = optim.SGD(model.parameters(), lr=0.1)


def attack(x, y):
    delta = (0.001 * torch.randn(x.shape)).requires_grad_()
    optimizer_delta = optim.SGD([delta], lr=0.1)
    for _ in range(3):
        optimizer_delta.zero_grad()
        loss = -F.cross_entropy(model(x + delta), y)
        loss.backward()
        optimizer_delta.step()
CLAMP
    return (x + delta).detach()


for step in range(4):
    x = torch.randn(16, 4)
    y = torch.randint(0, 3, (16,))
    x_adv = attack(x, y)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x_adv), y)
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""

IN_PLACE = "        with torch.no_grad():\n            delta.clamp_(-0.3, 0.3)"
REBOUND = "        delta = delta.detach().clamp(-0.3, 0.3).requires_grad_()"


def test_a_perturbation_and_its_optimizer_made_at_each_call_are_no_replacement(tmp_path):
    script = SCRIPT.replace("CLAMP", IN_PLACE)
    folder = twins(tmp_path, script, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
    assert "unstepped" not in done.stdout, done.stdout


def test_a_perturbation_rebound_after_its_optimizer_was_built_is_named(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CLAMP", IN_PLACE), SCRIPT.replace("CLAMP", REBOUND))
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    unstepped: 1 tensor the loss trains (delta) is in no optimizer: " \
        "`delta = delta.detach().clamp(-0.3, 0.3).requires_grad_()` at train.py:22" \
        in done.stdout, done.stdout
    assert "train.py:22: delta = delta.detach().clamp(-0.3, 0.3).requires_grad_() -> " \
        "delta.data.copy_(delta.detach().clamp(-0.3, 0.3))" in done.stdout, done.stdout
