"""A student made from its teacher by naming it twice (progressive distillation's
``student = teacher``, for ``copy.deepcopy(teacher)``): the teacher read under no_grad makes the
target while the student trains, so the target is the trained network itself. The ``aliased``
failure is at that assignment, and its edit copies the teacher there, the name the script
trains being the copy; the fixed script trains as the published one."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures, twins

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(64, 2)
warm = torch.optim.SGD(teacher.parameters(), lr=0.1)
for step in range(3):
    loss = F.mse_loss(teacher(x + 0.1 * torch.randn_like(x)), x)
    warm.zero_grad()
    loss.backward()
    warm.step()
student = STUDENT
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(4):
    noisy = x + 0.1 * torch.randn_like(x)
    with torch.no_grad():
        target = teacher(teacher(noisy))
    loss = F.mse_loss(student(noisy), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
"""


def test_the_student_named_as_its_teacher_is_aliased_at_that_line_and_copied_there(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("STUDENT", "copy.deepcopy(teacher)"),
                   SCRIPT.replace("STUDENT", "teacher"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"]
    assert found[0]["at"][0] == "train.py:19: student = teacher"
    applied(folder, "aliased", "--watch", "1")
    assert "student = copy.deepcopy(teacher)\n" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
