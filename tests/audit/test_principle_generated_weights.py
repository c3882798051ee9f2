"""``toolkit audit SCRIPT``, the principle of weights a network generates for a layer: the
filters of a dynamic filter network, the weights a hypernetwork makes, used by a layer function
as its weight (``F.linear(x, w)``, ``F.conv1d(x, w)``, ``F.conv2d(x, w)``), are part of the
prediction, never a target. Cut with ``.detach()`` (or generated under ``torch.no_grad()``),
they leave the generator, whose parameters the same optimizer holds, without a gradient: a
``dead`` failure naming the generator's tensors, at the line of the cut, whose edit removes the
cut, verified by rerunning the script.

The cases (``tests/lens/audit/scripts/``): a dynamic filter network (De Brabandere et al.,
"Dynamic Filter Networks", NeurIPS 2016, arXiv:1605.09673; dbbert/dfn), a generator of 1-D
filters applied sample by sample with ``F.conv1d`` and a trainable readout, one optimizer over
both, and its bug twin whose generated filters are taken with ``.detach()``: only the readout
trains.
Must not be flagged: the published dynamic filter network; knowledge distillation (Hinton,
Vinyals and Dean, arXiv:1503.02531, 2015; haitongli/knowledge-distillation-pytorch) whose
teacher, not in the optimizer, gives its logits cut with ``.detach()`` as the soft target: a
value detached as a target, of a network nobody trains, is no dead finding.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

from toolkit.audit.fixes.script_edits import apply_to_text, edit_at

BUGGY = "dynamic_filters_detached.py"
CLEAN = "dynamic_filters.py"
#: the line of the bug twin that cuts the generated filters, and the published script's line there
LINE = 38
BUG = "        filters = self.filter_gen(cond).view(batch, 1, self.kernel).detach()"
FIX = "        filters = self.filter_gen(cond).view(batch, 1, self.kernel)"


def test_the_scripts_differ_only_where_the_filters_are_cut():
    buggy = (SCRIPTS / BUGGY).read_text().splitlines()
    clean = (SCRIPTS / CLEAN).read_text().splitlines()
    assert buggy[LINE - 1] == BUG and clean[LINE - 1] == FIX
    assert len(buggy) == len(clean)
    # the docstrings say which is which; every line of code is the same but the cut
    assert [n for n, (a, b) in enumerate(zip(buggy, clean), 1) if a != b][-1] == LINE


def test_generated_filters_cut_with_detach_leave_the_generator_dead(tmp_path):
    script = SCRIPTS / BUGGY
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "dead"
    assert found["names"], found
    assert all("filter_gen" in name for name in found["names"] if name != "filters"), \
        found["names"]
    assert any(at.startswith(f"{BUGGY}:{LINE}:") for at in found["at"]), found["at"]
    (edit,) = found["edits"]
    text = script.read_text()
    fixed = apply_to_text(text, [edit_at(str(script), tuple(edit["start"]), tuple(edit["end"]),
                                         edit["new"])])
    lines = text.splitlines(keepends=True)
    lines[LINE - 1] = FIX + "\n"
    assert fixed == "".join(lines)


@pytest.mark.parametrize("script", [CLEAN, "distill_frozen_teacher.py"],
                         ids=["dynamic-filters", "distill-frozen-teacher"])
def test_filters_with_their_graph_or_a_frozen_teacher_s_cut_target_are_no_finding(tmp_path,
                                                                                  script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and failures(report) == []


@pytest.mark.slow
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, BUGGY, CLEAN)
    applied(folder, "dead")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)
