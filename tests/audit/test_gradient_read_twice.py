"""A gradient read twice: the script reads ``.grad`` after a ``backward()`` (each example's
gradient squared into a diagonal Fisher), the next ``backward()`` adds to it with no clear
between, and the script reads the sum: ``stale``, at the later backward, whose edit clears the
gradient before it, after which the script trains as the one that clears before each example.
Gradient accumulation that reads ``.grad`` once, after the last micro-batch (to clip it), and a
loop that clears before each backward, are no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

FISHER = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(24, 3), torch.randint(0, 2, (24,))
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
importance = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
for i in range(4):
CLEAR
    F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
    for n, p in model.named_parameters():
        importance[n] += p.grad ** 2
anchors = {n: p.detach().clone() for n, p in model.named_parameters()}
for step in range(3):
    penalty = sum((importance[n] * (p - anchors[n]) ** 2).sum()
                  for n, p in model.named_parameters())
    loss = F.cross_entropy(model(-x), y) + penalty
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict(), "importance": importance}, args.out)
"""

ACCUMULATED = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    for micro in range(3):
        x, y = torch.randn(4, 4), torch.randint(0, 2, (4,))
        (F.cross_entropy(model(x), y) / 3).backward()
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    for p in model.parameters():
        p.grad.mul_(torch.clamp(1.0 / (norm + 1e-6), max=1.0))
    optimizer.step()
"""


def test_a_gradient_read_after_each_backward_with_no_clear_is_stale_and_cleared(tmp_path):
    folder = twins(tmp_path, FISHER.replace("CLEAR", "    model.zero_grad()"),
                   FISHER.replace("CLEAR\n", ""))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "train.py:20: insert before it: optimizer.zero_grad()" in done.stdout, done.stdout


@pytest.mark.parametrize("text", [FISHER.replace("CLEAR", "    model.zero_grad()"), ACCUMULATED],
                         ids=["cleared-each-time", "read-once-accumulated"])
def test_a_read_of_one_gradient_or_of_an_accumulated_one_is_no_finding(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
