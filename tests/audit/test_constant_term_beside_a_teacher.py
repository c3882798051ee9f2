"""A term made of two cut outputs: the teacher's, computed under no_grad as a distillation
target, and the student's, ``.detach()``ed by mistake (decoupled knowledge distillation's
non-target term, Zhao et al. 2022, with ``logits_student.detach()``): a constant. The loss
trains the student another way (its target-class term) and the teacher no way, so the
teacher's cut is the target's and stays: the ``constant_term`` failure names the student
alone, its edit drops the student's cut only, and the fixed script trains as the published
one (dropping the teacher's cut too would train the teacher through its targets)."""

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
teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
student = nn.Linear(4, 3)
teacher_opt = torch.optim.SGD(teacher.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
for step in range(3):
    loss = F.cross_entropy(teacher(x), y)
    teacher_opt.zero_grad()
    loss.backward()
    teacher_opt.step()
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(4):
    with torch.no_grad():
        logits_teacher = teacher(x)
    logits_student = student(x)
    hard = F.cross_entropy(logits_student, y)
    soft = F.kl_div(F.log_softmax(STUDENT / 2.0, dim=1), F.softmax(logits_teacher / 2.0, dim=1),
                    reduction="batchmean")
    loss = hard + soft
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
"""


def test_the_students_cut_is_dropped_and_the_teachers_kept(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("STUDENT", "logits_student"),
                   SCRIPT.replace("STUDENT", "logits_student.detach()"))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "constant_term"]
    assert code == 1 and found, report["findings"]
    assert not any(t.startswith("teacher") for t in found[0]["tensors"]), found[0]["tensors"]
    done = applied_and_trains(folder, "constant_term", "--watch", "1")
    assert "logits_student.detach() -> logits_student" in done.stdout, done.stdout
