"""Score the step audit on the held-out steps of this folder (issue 62, item 7).

Run ``python tests/lens/audit/held_out/score.py``: one line per step, then the three totals the
issue's acceptance reads.

The steps (``heldout_<field>.py``, each defining ``CASES``, ``TWINS`` and ``FIELD``) were written
before the audit's rules were changed, from public code of fields none of the other tests cover,
and are never edited afterwards: they judge the audit on code it has not seen. They use the
real-code corpus's case format and oracle (``tests/lens/audit/real_code``), imported, not copied.
Each step is judged as ``test_real_code`` and ``test_fixes_applied`` judge the corpus:

- a correct step is a false alarm when the audit is not ``ok``;
- a bug is *right* when it is reported in its category and the audit's tensor sets equal those
  of the real-backward oracle (tensors outside each loss's optimizer that receive ``.grad``,
  stepped tensors that receive none, exact zeros, a failing second backward, buffers holding a
  graph);
- a bug's fix is *verified* when the audit prints edits, ``apply_edits`` writes them into a copy
  of the step's file, and the edited step, trained with real ``backward()`` for two calls, gives
  every tensor each loss's optimizer steps the gradient of the bug's correct twin within 1e-6
  relative (in norm) on every call, and is audited clean.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
for _path in (HERE.parents[3], HERE.parent / "real_code", HERE):  # the root: experiments
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from realcode_common import RealCase, audit_sets, oracle  # noqa: E402
from test_fixes_applied import _load, _train, apply_edits  # noqa: E402
from test_real_code import _failures  # noqa: E402

from toolkit import audit_step  # noqa: E402

MODULES = {path.stem: importlib.import_module(path.stem)
           for path in sorted(HERE.glob("heldout_*.py"))}
CASES = {name: build for module in MODULES.values() for name, build in module.CASES.items()}
TWINS: dict[str, str] = {bug: twin for module in MODULES.values()
                         for bug, twin in module.TWINS.items()}
FIELDS = {name: module.FIELD for module in MODULES.values() for name in module.CASES}
FILES = {name: Path(module.__file__) for module in MODULES.values() for name in module.CASES}
assert len(CASES) == sum(len(m.CASES) for m in MODULES.values()), "a case name used twice"
#: relative tolerance, in norm, of an edited step's gradients against the twin's
RTOL = 1e-6


@dataclass
class Verdict:
    """How the audit did on one held-out step."""

    name: str
    field: str
    truth: str
    found: str  # the audit's categories, "clean", or "crash: ..."
    category: bool  # correct: audit ok; bug: reported in its category
    sets: bool  # the audit's tensor sets equal the oracle's
    fix: bool | None  # bugs: a printed edit that trains as the twin and re-audits clean
    why: str = ""

    @property
    def right(self) -> bool:
        return self.category and self.sets

    @property
    def false_alarm(self) -> bool:
        return self.truth == "correct" and not self.category


def build(name: str, seed: int, cases: dict[str, Any] | None = None) -> RealCase:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (cases or CASES)[name](seed)


def audit(case: RealCase) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return audit_step(case.step, case.optimizers, modules=case.modules)


def _sets_differ(found: Any, truth: Any) -> list[str]:
    wrong = []
    for key in ("outside", "no_grad", "backward_failed", "held_buffers"):
        if getattr(found, key) != getattr(truth, key):
            wrong.append(f"{key}: audit {getattr(found, key)} != backward {getattr(truth, key)}")
    if not all(found.zeros[loss] <= truth.zeros.get(loss, set()) for loss in found.zeros):
        wrong.append(f"zeros: audit {found.zeros} not within backward {truth.zeros}")
    return wrong


def _differ(found: list[dict[str, dict[str, Any]]], want: list[dict[str, dict[str, Any]]]
            ) -> list[str]:
    wrong = []
    for call, (a, b) in enumerate(zip(found, want, strict=True), 1):
        if set(a) != set(b):
            return [f"call {call}: losses {sorted(a)} != {sorted(b)}"]
        for loss in a:
            if set(a[loss]) != set(b[loss]):
                wrong.append(f"call {call}, {loss}: stepped {sorted(set(a[loss]) ^ set(b[loss]))}")
                continue
            for tensor, g in a[loss].items():
                h = b[loss][tensor]
                if (g is None) != (h is None) or (g is not None and not (
                        torch.equal(g, h) or (g - h).norm() <= RTOL * h.norm())):
                    wrong.append(f"call {call}, {loss}: {tensor}")
    return wrong


def check_fix(name: str, seed: int, result: Any) -> tuple[bool, str]:
    """Apply every printed edit of ``result`` to a copy of the step's file and train it."""
    failures = _failures(result)
    edits = list(dict.fromkeys(e for f in failures for e in f.edits))
    if not edits:
        return False, "no edit printed"
    path = FILES[name]
    if {e.file for e in edits} != {path.name}:
        return False, f"edits in {sorted({e.file for e in edits})}"
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / path.name
        try:
            target.write_text(apply_edits(path.read_text("utf-8"), edits), "utf-8")
            edited = _load(target, f"edited_{path.stem}_{name}").CASES
        except Exception as err:  # an edit that does not apply or does not load is no fix
            return False, f"edit does not apply: {type(err).__name__}: {err}"
    try:
        found = _train(build(name, seed, edited))
    except Exception as err:  # the edited step must train
        return False, f"edited step does not train: {type(err).__name__}: {err}"
    wrong = _differ(found, _train(build(TWINS[name], seed)))
    if wrong:
        return False, "gradients differ from the twin: " + "; ".join(wrong[:3])
    again = audit(build(name, seed, edited))
    if not again.ok:
        return False, "the edited step still fails the audit: " + str(again).splitlines()[0]
    return True, ""


def judge(name: str, seed: int = 0) -> Verdict:
    """The verdict on held-out step ``name``."""
    case = build(name, seed)
    try:
        result = audit(case)
    except Exception as err:  # a crash is a verdict too
        return Verdict(name, FIELDS[name], case.truth, f"crash: {type(err).__name__}: {err}",
                       False, False, None if case.truth == "correct" else False)
    kinds = [k for k in ("leaks", "targets", "dead", "carried", "held") if getattr(result, k)]
    found = ",".join(kinds) or ("clean" if result.ok else "not ok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        truth = oracle(lambda: build(name, seed))
    wrong = _sets_differ(audit_sets(result, case), truth)
    if case.truth == "correct":
        return Verdict(name, FIELDS[name], case.truth, found, result.ok, not wrong, None,
                       "; ".join(wrong))
    category = not result.ok and case.truth in kinds
    fixed, why = check_fix(name, seed, result)
    return Verdict(name, FIELDS[name], case.truth, found, category, not wrong, fixed,
                   "; ".join([*wrong, why] if why else wrong))


def main() -> None:
    start = time.perf_counter()
    verdicts = [judge(name) for name in CASES]
    print(f"{'case':32} {'field':28} {'truth':8} {'audit':16} cat  sets fix")
    for v in verdicts:
        fix = "-" if v.fix is None else "yes" if v.fix else "no"
        print(f"{v.name:32} {v.field[:28]:28} {v.truth:8} {v.found[:16]:16} "
              f"{'yes' if v.category else 'no':4} {'yes' if v.sets else 'no':4} {fix:3} {v.why}")
    correct = [v for v in verdicts if v.truth == "correct"]
    bugs = [v for v in verdicts if v.truth != "correct"]
    print(f"\n{len(verdicts)} steps ({len(correct)} correct, {len(bugs)} bugs) in "
          f"{len(set(FIELDS.values()))} fields, scored in {time.perf_counter() - start:.0f} s")
    print(f"(a) false alarms on correct steps: {sum(v.false_alarm for v in correct)} "
          f"of {len(correct)}")
    print(f"(b) bugs right (category and the real backward's tensors): "
          f"{sum(v.right for v in bugs)} of {len(bugs)}")
    print(f"(c) bugs with a printed edit that trains as the twin: "
          f"{sum(bool(v.fix) for v in bugs)} of {len(bugs)}")


if __name__ == "__main__":
    main()
