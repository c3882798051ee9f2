"""A freeze undone for some of the networks it froze: an evaluation that freezes two networks
with ``requires_grad_(False)`` and switches only one back on after it (a relation network's
periodic test, as in learning to compare) leaves the other frozen while its optimizer still
steps it. The audit names it ``frozen`` and its edit switches that one back on where the
script switches the other, in the script's own words, so that the fixed script trains as the
one that switches both back on; where nothing is switched back on in that block, or the one
is, there is no such edit."""

from __future__ import annotations

import textwrap

from script_audit import applied, assert_trains_as, audit, cli, failures

from toolkit.audit.fixes.switch_edits import switch_on_with_the_rest

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 2)
encoder_optim = torch.optim.Adam(encoder.parameters(), lr=0.01)
head_optim = torch.optim.Adam(head.parameters(), lr=0.01)
x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))


def evaluate():
    encoder.requires_grad_(False)
    head.requires_grad_(False)
    accuracy = (head(encoder(x)).argmax(1) == y).float().mean().item()
    encoder.requires_grad_(True)
SWITCH_ON
    return accuracy


for step in range(6):
    loss = F.cross_entropy(head(encoder(x)), y)
    encoder_optim.zero_grad()
    head_optim.zero_grad()
    loss.backward()
    encoder_optim.step()
    head_optim.step()
    if step % 2 == 1:
        print(evaluate())
if args.out:
    torch.save({**encoder.state_dict(), **{"head." + k: v for k, v in head.state_dict().items()}},
               args.out)
"""


def _write(folder, name, switch_on):
    path = folder / name
    path.write_text(SCRIPT.replace("SWITCH_ON", switch_on), encoding="utf-8")
    return path


def test_both_switched_back_on_is_no_finding(tmp_path):
    script = _write(tmp_path, "train.py", "    head.requires_grad_(True)")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report)


def test_the_one_left_off_is_switched_on_where_the_other_is_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder, "published.py", "    head.requires_grad_(True)")
    _write(folder, "train.py", "")
    code, report = audit(folder, folder / "train.py", "--watch", "1")
    frozen = [f for f in failures(report) if f["kind"] == "frozen"]
    assert code == 1 and len(frozen) == 1
    assert set(frozen[0]["names"]) == {"head.weight", "head.bias"}
    applied(folder, "frozen", "--watch", "1")
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "    encoder.requires_grad_(True)\n    head.requires_grad_(True)\n" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def _edit(tmp_path, source, line):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return switch_on_with_the_rest(str(path), line)


def test_the_edit_after_the_first_switch_back_on_in_the_freezes_block(tmp_path):
    edit = _edit(tmp_path, """\
        def evaluate():
            for p in encoder.parameters():
                p.requires_grad = False
            head.requires_grad_(False)
            run()
            for p in encoder.parameters():
                p.requires_grad = True
            return 1
        """, 4)
    assert edit is not None and edit.line == 8 and edit.new == "    head.requires_grad_(True)\n"


def test_no_edit_where_the_block_switches_nothing_back_on_or_this_one(tmp_path):
    assert _edit(tmp_path, """\
        encoder.requires_grad_(False)
        head.requires_grad_(False)
        run()
        """, 2) is None
    assert _edit(tmp_path, """\
        encoder.requires_grad_(False)
        head.requires_grad_(False)
        head.requires_grad_()
        encoder.requires_grad_(True)
        """, 2) is None
    # not a freeze: a switch on
    assert _edit(tmp_path, """\
        encoder.requires_grad_(True)
        head.requires_grad_(True)
        """, 1) is None
