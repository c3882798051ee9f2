"""What an experiment says about itself: its story, and the findings computed from a run.

An experiment module declares::

    STORY = Story(
        compares="closed-form EM vs EM with a gradient M-step, with and without the block",
        block="em.responsibilities: Q = Σ stop_gradient(r) · log p(x, z; θ)",
        prediction="with the block ∇Q = ∇LL (Fisher's identity); without it the M-step climbs "
                   "LL − H(r) and drives the responsibilities toward hard assignments",
    )

    def findings(run: RunResults) -> list[Finding]:
        ...  # 3–6 sentences, each with its numbers and a verdict

After a run the runner computes the findings from the files the run wrote and stores them in
``findings.json`` and ``findings.md`` (a showcase: one list per child), so they can be read
without the HTML report; the report and the command line show them.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "Story", "compute_findings", "fmt", "read_findings", "unmatched_patterns",
           "write_findings"]


@dataclass(frozen=True)
class Story:
    """What an experiment compares, its block, and what theory predicts (one sentence each)."""

    compares: str
    block: str
    prediction: str

    def to_dict(self) -> dict[str, str]:
        return {"compares": self.compares, "block": self.block, "prediction": self.prediction}


@dataclass(frozen=True)
class Finding:
    """One headline statement: a sentence with its numbers, and a verdict.

    ``verdict``: ``True`` as theory predicts, ``False`` not as predicted, ``None`` a
    measurement without a prediction (a cost, an observation).
    """

    text: str
    verdict: bool | None = None

    @property
    def label(self) -> str:
        return {True: "as predicted", False: "not as predicted", None: "measured"}[self.verdict]

    def __str__(self) -> str:
        return f"{self.text} ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "verdict": self.verdict, "label": self.label}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(str(data.get("text", "")), data.get("verdict"))


def fmt(value: float | int | None, unit: str = "", *, digits: int = 3) -> str:
    """A number for a sentence: ``digits`` significant digits (3–4), a unit, no float noise.

    >>> fmt(0.0014461230000506475), fmt(1059636, "B"), fmt(2.0, "s"), fmt(None)
    ('0.00145', '1.01 MiB', '2 s', 'n/a')
    >>> fmt(3.2e-11), fmt(-1.2015e0, digits=4), fmt(1 << 20, "B"), fmt(0.0123, "s")
    ('3.2e-11', '-1.202', '1 MiB', '12.3 ms')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return ("∞" if value > 0 else "−∞") + (f" {unit}" if unit else "")
    if unit == "B":  # bytes: binary prefixes, as memory is counted
        for scale, prefix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {prefix}"
        return f"{int(value)} B"
    if unit == "s" and abs(value) < 1 and value != 0:
        return f"{value * 1e3:.{digits}g} ms"
    text = f"{value:.{digits}g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if unit else text


def unmatched_patterns(patterns: Iterable[str], seen: Sequence[str]) -> list[str]:
    """The ``disable_blocks`` patterns that match no block that ran (they switched nothing off)."""
    return [p for p in patterns if not any(fnmatch.fnmatchcase(name, p) for name in seen)]



def compute_findings(run_dir: Any) -> tuple[dict[str, list[Finding]], list[str]]:
    """Findings of a finished run, by section (the experiment, or each child of a showcase).

    Returns ``(findings, problems)``: an experiment without ``findings`` contributes nothing; one
    whose ``findings(run)`` raises is listed in ``problems`` (the run's numbers stay valid). A
    ``disable_blocks`` pattern that matched no block that ran becomes a finding of the run.
    """
    from toolkit.runner.registry import load_experiment
    from toolkit.runner.results import RunResults

    run = RunResults(run_dir)
    views = [(name, run.child(name)) for name in run.children] or [(run.experiment, run)]
    out: dict[str, list[Finding]] = {}
    problems: list[str] = []
    for section, view in views:
        try:
            fn = getattr(load_experiment(view.experiment).module, "findings", None)
            if fn is None:
                continue
            items = list(fn(view))
            bad = [f for f in items if not isinstance(f, Finding)]
            if bad:
                raise TypeError(f"findings() must return Finding objects, got "
                                f"{type(bad[0]).__name__}")
            out[section] = items
        except Exception as err:
            problems.append(f"{section}: findings() failed: {type(err).__name__}: {err}")
    patterns = run.config.get("disable_blocks", [])
    seen = run.meta.get("blocks_seen", [])
    for pattern in unmatched_patterns(patterns, seen):
        out.setdefault(run.experiment, []).append(Finding(
            f"The disable pattern {pattern!r} matched no block that ran (blocks seen: "
            f"{', '.join(seen) or 'none'}), so blocked and unblocked computed the same thing."))
    return out, problems


def write_findings(run_dir: Any) -> tuple[dict[str, list[Finding]], list[str]]:
    """Compute the findings and write ``findings.json`` and ``findings.md`` into the run."""
    from pathlib import Path

    from toolkit.runner.results import atomic_write_json, atomic_write_text

    findings, problems = compute_findings(run_dir)
    path = Path(run_dir)
    atomic_write_json(path / "findings.json",
                      {"findings": {k: [f.to_dict() for f in v] for k, v in findings.items()},
                       "problems": problems})
    lines = ["# Findings", ""]
    for section, items in findings.items():
        lines += [f"## {section}", ""] if len(findings) > 1 or section else []
        lines += [f"- {f}" for f in items] + [""]
    lines += [f"- problem: {p}" for p in problems]
    atomic_write_text(path / "findings.md", "\n".join(lines).rstrip() + "\n")
    return findings, problems


def read_findings(run_dir: Any) -> dict[str, list[Finding]]:
    """The findings a run wrote (empty when it wrote none)."""
    import json
    from pathlib import Path

    path = Path(run_dir) / "findings.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: [Finding.from_dict(d) for d in v] for k, v in data.get("findings", {}).items()}
