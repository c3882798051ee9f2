"""A second phase's optimizer built over the wrong network: Meta Pseudo Labels (Pham et al.
2021) fine-tunes the student from its averaged weights, and a fine-tuning SGD built over the
averaged copy (which the phase never calls) for the student leaves the student unstepped.
The first phase's optimizer still holds the student, but it steps no more: what only an
optimizer of an earlier loop holds is stepped by none. ``unstepped`` at the new optimizer's
line, whose argument the edit replaces; the edited script trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
student = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
averaged = copy.deepcopy(student)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(3):
    loss = F.cross_entropy(student(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for a, s in zip(averaged.parameters(), student.parameters()):
            a.lerp_(s, 0.5)
student.load_state_dict(averaged.state_dict())
fine_tune = torch.optim.SGD(student.parameters(), lr=0.05)
for step in range(3):
    student.zero_grad()
    loss = F.cross_entropy(student(x), y)
    loss.backward()
    fine_tune.step()
if args.out:
    torch.save({"student": student.state_dict(), "averaged": averaged.state_dict()}, args.out)
"""

OVER_THE_COPY = PUBLISHED.replace("fine_tune = torch.optim.SGD(student.parameters()",
                                  "fine_tune = torch.optim.SGD(averaged.parameters()")


def test_the_new_phases_optimizer_over_the_copy_is_replaced_by_the_student(tmp_path):
    folder = twins(tmp_path, PUBLISHED, OVER_THE_COPY)
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "train.py:24: averaged.parameters() -> student.parameters()" in done.stdout, \
        done.stdout
