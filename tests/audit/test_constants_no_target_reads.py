"""What a network computes under ``no_grad`` is a target only where a loss compares a value with
it. Three reads that are not: the greedy actions a library of networks picks (generalised policy
improvement, Barreto et al. 2017), which reach the loss only as indices; a helper that calls
every network handed to it, one of them by another name after training; and a number that weighs
another network's loss (the change of the student's loss that scales the teacher's in Meta
Pseudo Labels, Pham et al. 2021), while an averaged copy of the student is kept for evaluation.
None is a network aliased, nor a copy kept in sync and never read; the same copy, where the
student's batch of outputs under ``no_grad`` is the target of its own loss, still is."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

LIBRARY = """\
import copy
import torch
from torch import nn

torch.manual_seed(0)


def value(net, s):
    return net(s)


psi_1 = nn.Linear(4, 3)
psi = copy.deepcopy(psi_1)
library = [psi_1, psi]
w = nn.Parameter(torch.zeros(4))
optimizer = torch.optim.SGD(psi.parameters(), lr=0.05)
w_optimizer = torch.optim.SGD([w], lr=0.05)
rows = torch.arange(16)
for step in range(4):
    s, s2 = torch.randn(16, 4), torch.randn(16, 4)
    a, r = torch.randint(0, 3, (16,)), torch.randn(16)
    w_loss = (s @ w - r).pow(2).mean()   # the reward's weights, by regression first
    w_optimizer.zero_grad()
    w_loss.backward()
    w_optimizer.step()
    with torch.no_grad():   # the greedy action of the library, then a bootstrap of psi itself
        q = torch.stack([p(s2) for p in library]).max(0).values
        target = r + 0.9 * value(psi, s2)[rows, q.argmax(1)]
    loss = (value(psi, s)[rows, a] - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():   # the library's values after training, by the same helper
    print(sum(value(p, torch.randn(2, 4)).sum().item() for p in library))
"""

TEACHER = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
student, teacher = nn.Linear(4, 3), nn.Linear(4, 3)
averaged = copy.deepcopy(student)
s_opt = torch.optim.SGD(student.parameters(), lr=0.1)
t_opt = torch.optim.SGD(teacher.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
for step in range(4):
    u = torch.randn(16, 4)
    with torch.no_grad():
        old = F.cross_entropy(student(x), y)
    labels = teacher(u).argmax(1)
    s_loss = F.cross_entropy(student(u), labels)
    s_opt.zero_grad()
    s_loss.backward()
    s_opt.step()
    with torch.no_grad():
        for a, b in zip(averaged.parameters(), student.parameters()):
            a.mul_(0.9).add_(0.1 * b)
        READ
    t_loss = (new - old) * F.cross_entropy(teacher(u), labels)
    t_opt.zero_grad()
    t_loss.backward()
    t_opt.step()
"""

# the change of the student's loss, a number, weighs the teacher's loss
FEEDBACK = TEACHER.replace("READ", "new = F.cross_entropy(student(x), y)")
# the student's outputs under no_grad, a batch, are the target of the teacher's loss through
# ``new``, and of the student's own: the averaged copy is the one meant for them
TARGET = FEEDBACK.replace(
    "    t_loss = (new - old) * F.cross_entropy(teacher(u), labels)\n",
    "    t_loss = F.cross_entropy(teacher(u), labels)\n"
    "    with torch.no_grad():\n"
    "        soft = F.softmax(student(u), 1)\n"
    "    t_loss = t_loss + F.kl_div(F.log_softmax(student(u), 1), soft, reduction='batchmean')\n"
).replace("    t_opt.zero_grad()\n", "    t_opt.zero_grad()\n    s_opt.zero_grad()\n").replace(
    "    t_opt.step()\n", "    t_opt.step()\n    s_opt.step()\n")


@pytest.mark.parametrize("text", [LIBRARY, FEEDBACK], ids=["indices-and-a-helper", "a-number"])
def test_reads_that_are_no_target_make_no_alias(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


def test_a_batch_the_student_makes_for_its_own_loss_is_read_from_its_copy(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TARGET, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "aliased"]
    assert code == 1 and found, report["findings"]
    assert "averaged" in found[0]["message"], found[0]
