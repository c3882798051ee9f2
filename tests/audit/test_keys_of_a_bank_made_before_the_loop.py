"""Keys made once, before the loop that trains, by the network that makes the queries, under
``torch.no_grad()`` (SimMatch's labeled memory bank, Zheng et al. 2022: one projection per
labeled example, then moved by an EMA of later features, every update without gradient) are a
memory the run holds, not keys of the step: comparing the queries with them under a softmax is
no ``cut_keys`` finding. The same keys computed under ``no_grad`` inside the loop, by the same
network, at every step, still are."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x_lb = torch.randn(10, 4)
y_lb = torch.arange(10)
BANK
for step in range(3):
    x = x_lb + 0.1 * torch.randn(10, 4)
    bank = memory.clone()
KEYS    logits = F.normalize(model(x), dim=1) @ bank / 0.1
    loss = F.cross_entropy(logits, y_lb)
    with torch.no_grad():
        memory.mul_(0.7).add_(0.3 * F.normalize(model(x_lb), dim=1).t())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

MADE_ONCE = ("with torch.no_grad():\n"
             "    memory = F.normalize(model(x_lb), dim=1).t().clone()\n")
EACH_STEP = ("    with torch.no_grad():\n"
             "        bank = F.normalize(model(x_lb), dim=1).t().clone()\n")


def _write(tmp_path: Path, bank: str, keys: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.replace("BANK\n", bank).replace("KEYS", keys), encoding="utf-8")
    return path


def test_a_bank_made_before_the_loop_is_no_finding(tmp_path: Path) -> None:
    code, report = audit(tmp_path, _write(tmp_path, MADE_ONCE, ""), "--watch", "1")
    assert code == 0, failures(report)


def test_keys_cut_inside_the_loop_are_still_found(tmp_path: Path) -> None:
    code, report = audit(tmp_path, _write(tmp_path, MADE_ONCE, EACH_STEP), "--watch", "1")
    assert code == 1
    assert [f["kind"] for f in failures(report)] == ["cut_keys"], failures(report)
