"""A freeze for a phase, as the audit of a running script sees it: a network frozen for a
warm-up (a new head trained alone, as learning without forgetting does before the joint phase)
and switched back on after it is the method's, so no finding, though its optimizer held the
frozen tensors while they were off; frozen and never switched back on, it is ``frozen`` at the
end; and where the script switches some of them back on for the joint phase and leaves the rest
off (the heads but not the backbone), the edit switches the rest on before that phase's loop,
and the fixed script trains as the one that switches the whole network on."""

from __future__ import annotations

from pathlib import Path

from script_audit import applied, assert_trains_as, audit, cli, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.ModuleDict({"backbone": nn.Sequential(nn.Linear(4, 8), nn.ReLU()),
                       "old": nn.Linear(8, 2), "new": nn.Linear(8, 2)})
x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = F.cross_entropy(model["old"](model["backbone"](x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model["backbone"].requires_grad_(False)
model["old"].requires_grad_(False)
for step in range(3):
    loss = F.cross_entropy(model["new"](model["backbone"](x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
SWITCH_ON
for step in range(3):
    h = model["backbone"](x)
    loss = F.cross_entropy(model["new"](h), y) + F.cross_entropy(model["old"](h), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""


def _write(folder: Path, name: str, switch_on: str) -> Path:
    path = folder / name
    path.write_text(SCRIPT.replace("SWITCH_ON", switch_on), encoding="utf-8")
    return path


def test_a_network_frozen_for_a_warm_up_and_switched_back_on_is_no_finding(tmp_path):
    script = _write(tmp_path, "train.py", "model.requires_grad_(True)")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report)


def test_a_network_frozen_and_never_switched_back_on_is_frozen_at_the_end(tmp_path):
    script = _write(tmp_path, "train.py", "pass")
    code, report = audit(tmp_path, script, "--watch", "1")
    frozen = [f for f in failures(report) if f["kind"] == "frozen"]
    assert code == 1 and len(frozen) == 1
    assert set(frozen[0]["names"]) == {"model.backbone.0.weight", "model.backbone.0.bias",
                                       "model.old.weight", "model.old.bias"}


def test_the_part_left_off_is_switched_on_before_the_phase_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder, "published.py", "model.requires_grad_(True)")
    _write(folder, "train.py", 'model["old"].requires_grad_(True)')
    applied(folder, "frozen", "--watch", "1")
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    # the part as the script spells it
    assert 'model["old"].requires_grad_(True)\nmodel["backbone"].requires_grad_(True)\nfor step' \
        in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
