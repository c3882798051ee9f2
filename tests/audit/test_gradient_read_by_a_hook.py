"""A backward whose gradient the script reads by a hook it put on a value it computes, in an
update with no step: RigL's mask update (Evci et al. 2020) takes the place of the optimizer's
step every few iterations and grows the connections with the largest dense gradient, which a
hook on the masked weight keeps; the parameters' own gradient of that backward is cleared by
the next iteration's ``zero_grad()`` on purpose. No ``cleared`` finding: the backward was read.
Without the hook (its gradient read by nothing) the same clear loses a backward: ``cleared``."""

from __future__ import annotations

import pytest
from script_audit import cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
weight = nn.Parameter(torch.randn(4, 6))
mask = (torch.rand(4, 6) < 0.5).float()
optimizer = torch.optim.SGD([weight], lr=0.1)
dense = {}


def keep(grad):
    dense["grad"] = grad.clone()


for step in range(1, 9):
    x, y = torch.randn(8, 6), torch.randint(0, 4, (8,))
    w = weight * mask
HOOK    loss = F.cross_entropy(x @ w.t(), y)
    optimizer.zero_grad()
    loss.backward()
    if step % 4 == 0:
        with torch.no_grad():
            score = torch.where(mask > 0, -1.0, READ.abs())
            mask.view(-1)[score.view(-1).argmax()] = 1.0
    else:
        optimizer.step()
"""


def test_a_backward_read_by_a_hook_in_an_update_with_no_step_is_not_lost(tmp_path):
    (tmp_path / "train.py").write_text(
        SCRIPT.replace("HOOK", "    w.register_hook(keep)\n").replace("READ", 'dense["grad"]'),
        encoding="utf-8")
    done = cli("--watch", "1", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout


def test_without_the_hook_the_clear_loses_that_backward(tmp_path):
    (tmp_path / "train.py").write_text(
        SCRIPT.replace("HOOK", "").replace("READ", "torch.zeros_like(mask)"), encoding="utf-8")
    done = cli("--watch", "1", "train.py", cwd=tmp_path)
    assert done.returncode == 1 and "FAIL    cleared:" in done.stdout, done.stdout
