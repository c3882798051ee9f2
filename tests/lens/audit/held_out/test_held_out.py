"""The audit judged on held-out steps (issue 62, item 7): the acceptance criteria, per step.

A correct step: the audit is ``ok`` and its tensor sets are the real backward's. A bug: it is
reported in its category, the audit's tensor sets are the real backward's, and the printed edits,
applied by ``apply_edits`` to a copy of the step's file, train as the bug's twin (every stepped
tensor's gradient within 1e-6 relative on every call) and re-audit clean. How each is measured:
``score.py``. The steps the audit fails today are listed in ``expected_failures.py``.
"""

from __future__ import annotations

import expected_failures
import pytest
from score import CASES, TWINS, build, judge

pytestmark = pytest.mark.slow


def _marked(name: str) -> pytest.param:
    marks = [pytest.mark.xfail(reason="held-out: the audit does not yet judge this step right",
                               strict=False)] if name in expected_failures.FAILING_TODAY else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_marked(name) for name in sorted(CASES)])
def test_the_audit_judges_the_held_out_step_as_a_real_backward_and_its_fix_trains(
        name: str, seed: int) -> None:
    verdict = judge(name, seed)
    assert verdict.category, f"{verdict.truth}: the audit found {verdict.found}"
    assert verdict.sets, verdict.why
    if verdict.truth != "correct":
        assert verdict.fix, verdict.why


def test_the_folder_holds_forty_steps_in_ten_fields_and_every_bug_has_a_correct_twin() -> None:
    cases = {name: build(name, 0) for name in CASES}
    bugs = {name for name, case in cases.items() if case.truth != "correct"}
    assert len(cases) >= 40 and len(bugs) >= 20
    assert bugs == set(TWINS) and all(cases[t].truth == "correct" for t in TWINS.values())
    from score import FIELDS
    assert len(set(FIELDS.values())) >= 10
    assert all(case.confirms.startswith("https://github.com/") for case in cases.values())
    assert all("@" in case.source for case in cases.values())
    assert expected_failures.FAILING_TODAY <= set(CASES)
