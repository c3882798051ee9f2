"""``toolkit audit SCRIPT``, the principle of saying what was not checked: a cut in a loss's own
forward (a ``.detach()``, a module called under ``no_grad``) that keeps that loss's gradient
from tensors an optimizer steps, which the same loss still trains another way, has the form of
a stop-gradient. Only the method the script follows says whether it belongs there, so the audit
reports no finding for it, and its closing line names each such cut (``not checked``): a clean
run never claims more than was checked.

Cases (``tests/lens/audit/scripts/``): SimSiam's stopped branch (``z.detach()`` inside ``D``, read
twice on one line) is named, once; a target network under ``no_grad`` (DQN; the optimizer holds
none of its tensors), a GAN's ``fake.detach()`` in the discriminator's step (that loss trains
no generator tensor at all) and a script with no cut (gradient accumulation) name none.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, audit, failures

from toolkit.audit.cli import taken_as_meant
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import Site


def _meant(report: dict) -> list[str]:
    return [n for n in report["not_checked"] if "as meant" in n]


def test_a_stopped_branch_is_named_as_taken_as_meant_once_per_line(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "simsiam_views.py")
    assert code == 0 and not failures(report)
    (line,) = _meant(report)
    assert line.startswith("whether the cut at simsiam_views.py:33 (`.detach()`) belongs there")


@pytest.mark.parametrize("script", ["dqn.py", "dcgan.py", "cnn_accum.py"])
def test_a_target_network_a_discriminator_step_or_no_cut_names_none(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and not _meant(report)


def _site(line: int) -> Site:
    return Site("/x/train.py", line, (line, line, 4, 20))


def test_the_closing_line_leaves_out_lines_a_finding_names_and_counts_the_rest():
    cuts = {_site(i): "`.detach()`" for i in (10, 20, 30, 40, 50)}
    named = ScriptFinding("dead", 0, "m", ("k",), ("model.w",), ("train.py:20: x.detach()",))
    line = taken_as_meant(cuts, [named])
    assert line is not None and line.startswith("whether 4 cuts belong where they are")
    assert "train.py:10" in line and "train.py:20" not in line and "and 1 more" in line
    assert taken_as_meant({_site(20): "`.detach()`"}, [named]) is None
    # two cuts on one line (two spans) are that line once
    two = {Site("/x/train.py", 7, (7, 7, 4, 9)): "`.detach()`",
           Site("/x/train.py", 7, (7, 7, 12, 20)): "`.detach()`"}
    assert taken_as_meant(two, []).startswith("whether the cut at train.py:7 ")
