"""Where the verification of an edit starts comparing: the first step at which an audit of every
step shows the finding (:func:`toolkit.audit.verify.rerun._first_step`). A ``--steps`` audit does
not watch a new loop's first pass (it shares an iteration with the last step before it), so a
bug of the main loop is found at its second pass; the unedited rerun, which watches every step,
finds it at the first, and the edit may change the gradients from there."""

from __future__ import annotations

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.verify.rerun import _first_step


def _finding(step: int, kind: str = "target", tensors: tuple[str, ...] = ("opt0.0.0",)
             ) -> ScriptFinding:
    return ScriptFinding(kind, step, "a message", tensors, tensors, ("train.py:3: x",), (),
                         step=step)


def _reported(step: int, kind: str = "target", tensors: tuple[str, ...] = ("opt0.0.0",)
              ) -> dict:
    return {"kind": kind, "step": step, "tensors": list(tensors)}


def test_the_same_finding_earlier_in_the_rerun_is_where_the_bug_began():
    report = {"findings": [_reported(9), _reported(6)]}
    assert _first_step(_finding(7), report) == 6


def test_another_kind_other_tensors_or_a_later_step_do_not_move_it():
    report = {"findings": [_reported(2, kind="leak"), _reported(3, tensors=("opt0.0.1",)),
                           _reported(8), _reported(-1)]}
    assert _first_step(_finding(7), report) == 7


def test_a_hostile_report_moves_nothing():
    report = {"findings": ["not a finding", {"kind": "target", "step": "6",
                                             "tensors": ["opt0.0.0"]}, None]}
    assert _first_step(_finding(7), report) == 7
    assert _first_step(_finding(7), {}) == 7
