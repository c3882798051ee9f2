"""A view made under no_grad and written in place there (free adversarial training's
``delta[:n] += step * delta.grad[:n].sign()``, Shafahi et al. 2019) is a tensor whose
``grad_fn`` torch forbids reading: the audit's recording leaves it alone, and the script runs
to its end under the audit as it does without it. Its gradient, never cleared between the
replays, sums them (``stale``): the edit lets it go by the name the script holds it by
(``delta.grad = None``) before the backward, and the script trains as the published one,
which clears it after the step."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
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
CLEAR    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict(), "delta": delta.detach().clone()}, args.out)
"""

PUBLISHED = SCRIPT.replace("CLEAR", "    delta.grad.zero_()\n")


def test_the_script_runs_to_its_end_under_the_audit(tmp_path):
    folder = twins(tmp_path, PUBLISHED, PUBLISHED)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ran to its end, 3 iterations" in done.stdout, done.stdout


def test_a_perturbation_never_cleared_is_let_go_before_the_backward(tmp_path):
    folder = twins(tmp_path, PUBLISHED, SCRIPT.replace("CLEAR", ""))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "insert before it: delta.grad = None" in done.stdout, done.stdout
