"""A part a later phase freezes by a switch of the script's own (wav2vec 2.0's fine-tuning in
fairseq: ``feature_grad_mult = 0`` sends ``Wav2Vec2Model.forward`` down its ``else`` branch,
where the feature encoder runs under ``torch.no_grad()``, while the fine-tuning optimizer is
built over the whole model), and a freeze of the whole trunk for the first updates of that
phase (``freeze_finetune_updates``), which ends.

The script shows both branches of the switch: the branch with a graph trained the part in the
first phase, and the same call runs under ``no_grad`` in the second. Which branch a phase
takes is a setting of the method, so the audit reports the frozen part as information (the
optimizer holds it for nothing), not as a failure. The same cut written into the second
phase's loop with no branch that trains the part (CLIP's image tower under ``no_grad`` in
fine-tuning) stays a failure, and so does a freeze of the whole trunk that never ends."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

SCRIPT = """\
import argparse
import contextlib
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.body = nn.Linear(8, 8)
        self.train_encoder = True

    def forward(self, x):
        if self.train_encoder:
            h = self.encoder(x)
        else:
            with torch.no_grad():
                h = self.encoder(x)
        return torch.tanh(self.body(h))


trunk = Trunk()
head = nn.Linear(8, 3)
x = torch.randn(32, 4)
y = torch.randint(0, 3, (32,))
optimizer = torch.optim.SGD([*trunk.parameters(), *head.parameters()], lr=0.1)
for step in range(3):
    loss = F.cross_entropy(head(trunk(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

SWITCH
new_head = nn.Linear(8, 2)
ft_optimizer = torch.optim.SGD([*trunk.parameters(), *new_head.parameters()], lr=0.05)
y2 = torch.randint(0, 2, (32,))
for step in range(5):
    FORWARD
    loss = F.cross_entropy(new_head(h), y2)
    ft_optimizer.zero_grad()
    loss.backward()
    ft_optimizer.step()
if args.out:
    torch.save({"trunk": trunk.state_dict(), "head": new_head.state_dict()}, args.out)
"""

SWITCHED = "trunk.train_encoder = False"
WHOLE = "h = trunk(x)"
#: the whole trunk frozen for the phase's first two updates, then trained
UNTIL = ("with torch.no_grad() if step < 2 else contextlib.nullcontext():\n"
         "        h = trunk(x)")


def _script(switch: str, forward: str) -> str:
    return SCRIPT.replace("SWITCH", switch).replace("FORWARD", forward)


@pytest.mark.parametrize("forward", [WHOLE, UNTIL], ids=["at-once", "after-a-freeze-that-ends"])
def test_a_part_a_later_phase_switches_off_is_information(tmp_path, forward):
    (tmp_path / "train.py").write_text(_script(SWITCHED, forward), encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]
    info = [f for f in report["findings"] if f["kind"] == "switched_off"]
    assert len(info) == 1, report["findings"]
    assert {"trunk.encoder.0.weight", "trunk.encoder.0.bias"} <= set(info[0]["names"])
    assert not any(name.startswith(("trunk.body", "new_head")) for name in info[0]["names"])
    assert any(a.startswith("train.py:25:") for a in info[0]["at"]), info[0]["at"]


def test_a_freeze_of_the_whole_trunk_that_ends_is_no_finding(tmp_path):
    (tmp_path / "train.py").write_text(_script("", UNTIL), encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.parametrize("forward", [
    "with torch.no_grad():\n        h = trunk(x)",
    "with torch.no_grad():\n        e = trunk.encoder(x)\n    h = torch.tanh(trunk.body(e))",
], ids=["whole-trunk", "encoder-in-the-loop"])
def test_a_cut_the_later_phase_writes_with_no_branch_that_trains_stays_a_failure(
        tmp_path, forward):
    (tmp_path / "train.py").write_text(_script("", forward), encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["dead"], report["findings"]
    assert "trunk.encoder.0.weight" in found[0]["names"]
