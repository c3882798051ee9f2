"""A network frozen between two phases that one optimizer trains, and never switched back on:
Deep Sets (Zaheer et al. 2017, arXiv:1703.06114; manzilzaheer/DeepSets, PopStats/trainer.py,
Trainer.fit, whose second loop trains phi and rho with the same Adam) with its feature extractor
frozen before the second phase. ``frozen``, at the freeze; the freeze runs once, in no loop, and
no later statement undoes it, so the edit takes it away (``pass`` where it is its block's only
statement), after which the script trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.ModuleDict({"phi": nn.Linear(2, 8), "rho": nn.Linear(8, 1)})
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(8, 5, 2), torch.randn(8, 1)


def predict(sets):
    return model["rho"](torch.relu(model["phi"](sets)).sum(1))


for step in range(3):
    loss = F.mse_loss(predict(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
FREEZE
for step in range(3):
    loss = F.l1_loss(predict(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""
FREEZE = 'model["phi"].requires_grad_(False)\n'


def test_a_freeze_between_phases_is_frozen_at_its_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("FREEZE\n", FREEZE), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["frozen"], found
    assert found[0]["at"][0].startswith("train.py:24: model[")


def test_the_freeze_taken_away_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("FREEZE\n", ""), SCRIPT.replace("FREEZE\n", FREEZE))
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert FREEZE not in (folder / "train.py").read_text(encoding="utf-8"), done.stdout
