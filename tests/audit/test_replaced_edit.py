"""The rule of a parameter replaced after its optimizer was built
(:mod:`toolkit.audit.rules.running.replaced`), beyond the held-out cases of
``test_principle_parameter_replaced.py``: the edit it writes for each spelling of the replacing
line, and the lines it writes none for; a replacement made by ``setattr`` is still named at its
line."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import audit, failures

from toolkit.audit.fixes import running
from toolkit.audit.fixes.script_edits import apply_to_text
from toolkit.audit.record.frames import Site
from toolkit.audit.rules.running.replaced import in_place_copy


@pytest.mark.parametrize(("line", "no_grad", "written"), [
    ("self.codebook = nn.Parameter(fresh)", True, "self.codebook.copy_(fresh)"),
    ("self.codebook = nn.Parameter(fresh)", False, "self.codebook.data.copy_(fresh)"),
    ("layer.weight = torch.nn.Parameter(w * mask, requires_grad=True)", False,
     "layer.weight.data.copy_(w * mask)"),
    ("net.fc.bias = Parameter(torch.zeros(3))", True, "net.fc.bias.copy_(torch.zeros(3))"),
    # a name, a list's element; a trainable copy made by hand
    ("w = nn.Parameter(v)", True, "w.copy_(v)"),
    ("codes[i] = nn.Parameter(codes[i].detach() * s)", False,
     "codes[i].data.copy_(codes[i].detach() * s)"),
    ("delta = delta.detach().clamp(-e, e).requires_grad_()", False,
     "delta.data.copy_(delta.detach().clamp(-e, e))"),
    ("model.weight = slow.clone().requires_grad_(True)", True, "model.weight.copy_(slow)"),
    # a parameter made elsewhere: its values are copied in
    ("self.scale = new_scale", True, "self.scale.copy_(new_scale)"),
    # a frozen parameter is not unwrapped: what it holds is copied as it is
    ("self.w = nn.Parameter(v, requires_grad=False)", True,
     "self.w.copy_(nn.Parameter(v, requires_grad=False))"),
])
def test_the_replacing_assignment_becomes_a_copy_into_the_held_parameter(
        tmp_path: Path, line: str, no_grad: bool, written: str) -> None:
    path = tmp_path / "train.py"
    path.write_text(f"if True:\n    {line}\n")
    edit = in_place_copy(running, Site(str(path), 2, None), no_grad)
    assert edit is not None and edit.old == line
    assert apply_to_text(path.read_text(), [edit]) == f"if True:\n    {written}\n"


@pytest.mark.parametrize("line", [
    'setattr(layer, "weight", nn.Parameter(w))',      # no assignment to rewrite
    "a.w = b.w = nn.Parameter(v)",                    # two targets
])
def test_no_edit_where_the_line_is_not_one_target_assigned(tmp_path: Path, line: str) -> None:
    path = tmp_path / "train.py"
    path.write_text(f"{line}\n")
    assert in_place_copy(running, Site(str(path), 1, None), True) is None


SETATTR = """\
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(4):
    if step == 2:
        with torch.no_grad():
            setattr(net[2], "weight", nn.Parameter(net[2].weight * 0.5))
    loss = nn.functional.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_replacement_by_setattr_is_named_at_its_line_with_advice(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SETATTR)
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 1
    found = [f for f in failures(report) if any(a.startswith("train.py:11:") for a in f["at"])]
    assert len(found) == 1, [f["at"] for f in failures(report)]
    assert found[0]["iteration"] == 2 and found[0]["names"] == ["net.2.weight"]
    assert found[0]["edits"] == []
    # nothing else: the old tensor's missing gradient is this finding, not a dead one
    assert len(failures(report)) == 1, [f["message"] for f in failures(report)]


RESTARTED = """\
import torch
from torch import nn


class Dictionary(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        return x @ self.W


@torch.no_grad()
def renorm_(net):
    net.W = nn.Parameter(net.W / net.W.norm(dim=0, keepdim=True))


torch.manual_seed(0)
net = Dictionary()
renorm_(net)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
x, y = torch.randn(16, 6), torch.randn(16, 4)
for step in range(8):
    if step == 4:
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loss = nn.functional.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    renorm_(net)
"""


def test_a_replacement_repeated_across_a_fresh_optimizer_is_one_failure(tmp_path: Path) -> None:
    # After the restart the old optimizer is an earlier loop's: its tensors are not paired with
    # the replacing line's leaves (looking up its index once crashed the audit), and the line
    # that replaces the fresh optimizer's tensor too is still the one failure.
    script = tmp_path / "train.py"
    script.write_text(RESTARTED)
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 1, report
    assert report["error"] is None and report["iterations"] == 8, report["error"]
    found = failures(report)
    assert len(found) == 1, [f["message"] for f in found]
    assert any(a.startswith("train.py:16:") for a in found[0]["at"]), found[0]["at"]
    assert found[0]["names"] == ["net.W"]
