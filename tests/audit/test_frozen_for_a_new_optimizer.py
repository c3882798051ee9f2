"""A freeze made for the optimizer built after it: BitFit (Ben Zaken et al. 2022) pretrains a
model, then switches off every weight, leaves the biases and a new head on, and builds a new
optimizer over the whole model. The weights trained in the first phase under the first
optimizer; the second never stepped them with gradient, so it holds them frozen on purpose: no
finding. The same optimizer, stepping them before the freeze and after it, is still ``frozen``
(frozen mid-run and never switched back on).

A freeze made after the new optimizer was built, before its first step, is the phase's too (a
pretrained body kept fixed while a head trains), unless a later phase switches part of it back
on and leaves the rest off: learning without forgetting (Li and Hoiem 2016) warms a new head up
with the body frozen, then trains everything; unfreezing the heads alone leaves the body
frozen in the joint phase."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
for name, param in model.named_parameters():
    param.requires_grad = name.endswith("bias")
NEW_OPTIMIZER
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
"""

BITFIT = SCRIPT.replace("NEW_OPTIMIZER",
                        "optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)")
SAME = SCRIPT.replace("NEW_OPTIMIZER\n", "")


def test_weights_frozen_before_the_optimizer_that_holds_them_is_no_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BITFIT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


def test_weights_frozen_under_the_optimizer_that_stepped_them_are_frozen(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAME, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "frozen"]
    assert code == 1 and found, report["findings"]
    assert {"model.0.weight", "model.2.weight"} <= set(found[0]["names"]), found[0]


AFTER = SCRIPT.replace("NEW_OPTIMIZER", """\
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model[0].requires_grad_(False)
model[2].weight.requires_grad_(False)""").replace(
    "    param.requires_grad = name.endswith(\"bias\")\n", "    pass\n")
JOINT = """\
UNFREEZE
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
"""


def test_a_freeze_after_the_optimizer_was_built_is_the_phases(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(AFTER, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
    script.write_text(AFTER + JOINT.replace("UNFREEZE", "model.requires_grad_(True)"),
                      encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


def test_a_freeze_after_the_optimizer_was_built_partly_undone_is_frozen(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(AFTER + JOINT.replace("UNFREEZE", "model[2].requires_grad_(True)"),
                      encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "frozen"]
    assert code == 1 and found, report["findings"]
    assert {"model.0.weight", "model.0.bias"} == set(found[0]["names"]), found[0]
