"""A view made under no_grad and written in place there (free adversarial training's
``delta[:n] += step * delta.grad[:n].sign()``, Shafahi et al. 2019) is a tensor whose
``grad_fn`` torch forbids reading: the audit's recording leaves it alone, and the script runs
to its end under the audit as it does without it."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
delta = torch.zeros(8, 4, requires_grad=True)
x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
n = x.shape[0]
for step in range(3):
    loss = F.cross_entropy(model(x + delta[:n]), y)
    optimizer.zero_grad()
    loss.backward()
    with torch.no_grad():
        delta[:n] += 0.1 * delta.grad[:n].sign()
        delta.clamp_(-0.5, 0.5)
    delta.grad.zero_()
    optimizer.step()
"""


def test_the_script_runs_to_its_end_under_the_audit(tmp_path):
    folder = twins(tmp_path, SCRIPT, SCRIPT)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ran to its end, 3 iterations" in done.stdout, done.stdout
