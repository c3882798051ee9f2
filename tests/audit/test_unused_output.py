"""``toolkit audit SCRIPT``, a part of a trained network whose output the method leaves out:
STPM's student is a whole classifier, its optimizer is built over ``student.parameters()``, and
its loss reads the student's intermediate features only (hcw-00/STPM_anomaly_detection,
train.py: ``optim.SGD(self.model_s.parameters(), ...)``, ``cal_loss`` over the hooked
features); the classifier head runs in each forward, with a graph no loss reads, and every torch
optimizer skips its tensors (their ``.grad`` stays ``None``). That is ``unused``, information,
not a failure. Still ``dead``, a failure: the same head under an optimizer of its own, whose
tensors all got no gradient (nothing that optimizer steps trained: the loss meant for it is
missing)."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        features = torch.relu(self.body(x))
        {head}
        return features, logits


teacher, student = nn.Linear(6, 8), Student()
teacher.requires_grad_(False)
{optimizers}
for _ in range(3):
    x = torch.randn(8, 6)
    features, _ = student(x)
    loss = F.mse_loss(F.normalize(features), F.normalize(teacher(x)))
    {step}
"""

_WITH_GRAPH = "logits = self.fc(features)"
_ONE = "optimizer = torch.optim.SGD(student.parameters(), lr=0.1)"
_STEP_ONE = "optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()"
# the head under an optimizer of its own, which nothing trains
_TWO = ("optimizer = torch.optim.SGD(student.body.parameters(), lr=0.1)\n"
        "head_optimizer = torch.optim.SGD(student.fc.parameters(), lr=0.1)")
_STEP_TWO = ("optimizer.zero_grad()\n    head_optimizer.zero_grad()\n    loss.backward()\n"
             "    optimizer.step()\n    head_optimizer.step()")


@pytest.mark.parametrize(("head", "optimizers", "step", "kind"), [
    (_WITH_GRAPH, _ONE, _STEP_ONE, "unused"),
    (_WITH_GRAPH, _TWO, _STEP_TWO, "dead"),
], ids=["output_left_out", "its_own_optimizer_trains_nothing"])
def test_a_head_whose_output_no_loss_reads_is_information_where_its_network_trains(
        tmp_path, head, optimizers, step, kind):
    script = tmp_path / "stpm.py"
    script.write_text(_SCRIPT.format(head=head, optimizers=optimizers, step=step))
    code, report = audit(tmp_path, script)
    found = [f for f in report["findings"] if "student.fc.weight" in f["names"]]
    assert [f["kind"] for f in found] == [kind], report["findings"]
    assert found[0]["failure"] == (kind == "dead")
    assert code == (1 if kind == "dead" else 0), failures(report)
