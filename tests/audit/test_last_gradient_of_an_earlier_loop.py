"""The gradient an earlier loop's last step left in ``.grad``: VICReg's linear evaluation
(Bardes et al. 2022) pretrains a backbone with ``zero_grad()`` before each backward, so its last
gradient stays in ``.grad``, then freezes it and trains a probe with an optimizer of its own.
The pretraining optimizer steps nothing of the probe's loop, but its last gradient was stepped
by it: no finding."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
projector = nn.Linear(8, 4)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.Adam([*backbone.parameters(), *projector.parameters()], lr=0.01)
for step in range(3):
    z1, z2 = projector(backbone(x)), projector(backbone(x + 0.1 * torch.randn_like(x)))
    loss = F.mse_loss(z1, z2) + (1 - z1.std(0)).clamp(min=0).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
backbone.requires_grad_(False)
head = nn.Linear(8, 3)
model = nn.Sequential(backbone, head)
probe = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    probe.zero_grad()
    loss.backward()
    probe.step()
"""


def test_an_earlier_loops_last_gradient_is_no_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
