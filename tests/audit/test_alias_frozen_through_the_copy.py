"""A teacher head named as the student's (``teacher_head = student_head`` for
``copy.deepcopy(student_head)``, after iBOT's ``main_ibot.py``, Zhou et al. 2022): the freeze
meant for the teacher freezes the student's head, the optimizer built over the tensors that
require grad leaves it out, and the EMA update under no_grad moves each of its tensors toward
itself. No optimizer steps them, yet two names bind their network and the update reads them on
both sides: the ``aliased`` failure is at the assignment, and its edit copies the head there;
the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

pytestmark = pytest.mark.slow

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
student_body, student_head = nn.Linear(4, 8), nn.Linear(8, 3)
teacher_body = copy.deepcopy(student_body)
teacher_head = HEAD
for p in [*teacher_body.parameters(), *teacher_head.parameters()]:
    p.requires_grad = False
params = [p for m in (student_body, student_head) for p in m.parameters() if p.requires_grad]
optimizer = torch.optim.SGD(params, lr=0.1)
for step in range(4):
    x = torch.randn(16, 4)
    with torch.no_grad():
        target = F.softmax(teacher_head(torch.tanh(teacher_body(x + 0.1))), dim=1)
    log_p = F.log_softmax(student_head(torch.tanh(student_body(x))), dim=1)
    loss = -(target * log_p).sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for s, t in ((student_body, teacher_body), (student_head, teacher_head)):
            for p_s, p_t in zip(s.parameters(), t.parameters()):
                p_t.mul_(0.9).add_(p_s.detach(), alpha=0.1)
if args.out:
    torch.save({"student_body": student_body.state_dict(), "student_head":
                student_head.state_dict(), "teacher_body": teacher_body.state_dict(),
                "teacher_head": teacher_head.state_dict()}, args.out)
"""


def test_a_head_frozen_through_its_alias_is_aliased_and_copied_there(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("HEAD", "copy.deepcopy(student_head)"),
                   SCRIPT.replace("HEAD", "student_head"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"], report["findings"]
    assert found[0]["at"][0] == "train.py:13: teacher_head = student_head"
    assert {"student_head.weight", "student_head.bias"} <= set(found[0]["tensors"])
    applied(folder, "aliased", "--watch", "1")
    assert "teacher_head = copy.deepcopy(student_head)\n" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
