"""A teacher's output written into another tensor in place before the loss reads it (iCaRL's
distillation targets: a one-hot matrix whose old-class columns are overwritten with
``sigmoid(old_model(x))``): the tensor written carries the teacher's constant as its own, so
that ``old_model = model`` (for ``copy.deepcopy(model)``) is found as one network read under
``no_grad`` for the target and trained, at that assignment, with an edit that copies it there.
A ``copy_`` into a buffer is followed the same way. A target tensor written from data alone
stays no one's constant, so the correct script is clean."""

from __future__ import annotations

import pytest
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
model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
x = torch.randn(32, 3)
y = torch.randint(0, 4, (32,))
old_model = None
for task in range(2):
    if task > 0:
        old_model = OLD
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        targets = F.one_hot(y, 4).float()
        if old_model is not None:
            with torch.no_grad():
                q = torch.sigmoid(old_model(x))
            WRITE
        loss = F.binary_cross_entropy_with_logits(model(x), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

WRITES = {"setitem": "targets[:, :2] = q[:, :2]",
          "copy_": "targets.copy_(0.5 * targets + 0.5 * q)"}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_teacher_aliased_and_read_through_a_write_is_found_and_copied(tmp_path, write):
    script = SCRIPT.replace("WRITE", WRITES[write])
    folder = twins(tmp_path, script.replace("OLD", "copy.deepcopy(model)"),
                   script.replace("OLD", "model"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"], report["findings"]
    assert found[0]["at"][0] == "train.py:17: old_model = model"
    applied(folder, "aliased", "--watch", "1")
    assert "old_model = copy.deepcopy(model)\n" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def test_targets_written_from_data_alone_are_no_ones_constant(tmp_path):
    script = SCRIPT.replace("OLD", "model").replace(
        "WRITE", "targets[:, :2] = F.one_hot(y, 4).float()[:, :2]")
    folder = twins(tmp_path, script, script)
    code, report = audit(tmp_path, folder / "published.py", "--watch", "1")
    assert code == 0, report["findings"]


def test_each_pass_of_a_phase_with_an_optimizer_of_its_own_is_an_iteration(tmp_path):
    """The second task builds a new optimizer over the same network and its loss meets the
    teacher's constant: each of its passes is an iteration of its own (six in all), as each
    of the first task's is, and the correct script is clean."""
    script = SCRIPT.replace("OLD", "copy.deepcopy(model)").replace("WRITE", WRITES["copy_"])
    folder = twins(tmp_path, script, script)
    code, report = audit(tmp_path, folder / "published.py", "--watch", "1")
    assert code == 0 and (report["iterations"], report["backwards"]) == (6, 6)
