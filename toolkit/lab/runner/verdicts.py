"""Findings over seeds: one verdict per finding, computed once, here, for every experiment.

An experiment's ``findings(run)`` speaks about one run (one seed). The runner calls it for each
seed of a run (a single run: one seed; ``toolkit run CONFIG --seeds 0-4``: five) and
:func:`aggregate` puts the findings of all seeds together:

- each number of the sentence becomes its mean over the seeds with its range,
  ``0.0535 [0.041, 0.066]`` (one value when every seed agrees);
- a prediction is "as predicted" only when it held in every seed, or in the fraction the
  finding states (``need``): "held in 5 of 5 seeds"; otherwise "not as predicted", with the count;
- a seed-independent finding says so, once every seed gave the same sentence and verdict;
- a timing pools the per-round ratios of every seed, and its verdict follows the interval rule
  of :class:`~toolkit.lab.runner.story.TimeRatio` on the pooled rounds.

``findings.json`` keeps every seed's finding next to the aggregate; ``findings.md`` and the
reports show the aggregate (:class:`Verdict`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.lab.runner.errors import DamagedFile
from toolkit.lab.runner.story import Finding, TimeRatio, fill, fmt, unmatched_patterns

__all__ = ["Spread", "Verdict", "aggregate", "compute_findings", "read_findings",
           "read_seed_findings", "render_findings_md", "write_findings"]

LABELS = {True: "as predicted", False: "not as predicted", None: "measured"}


@dataclass(frozen=True)
class Spread:
    """A number over seeds: mean, smallest and largest, and how many seeds gave one."""

    mean: float
    lo: float
    hi: float
    n: int
    missing: int = 0

    def describe(self, unit: str = "", digits: int = 3) -> str:
        """``0.0535 [0.041, 0.066]`` (mean [min, max]); one number when all seeds agree."""
        text = fmt(self.mean, unit, digits=digits)
        if self.lo != self.hi and fmt(self.lo, unit, digits=digits) != fmt(self.hi, unit,
                                                                         digits=digits):
            text += f" [{fmt(self.lo, unit, digits=digits)}, {fmt(self.hi, unit, digits=digits)}]"
        if self.missing:
            text += f" (n/a in {self.missing} seed{'s' * (self.missing != 1)})"
        return text


def _spread(values: Sequence[Any]) -> Any:
    """Numbers → :class:`Spread` (ints stay ints when all agree); anything else: the common
    value, or the distinct values with their counts."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
               and not (isinstance(v, float) and math.isnan(v))]
    missing = sum(v is None or (isinstance(v, float) and math.isnan(v)) for v in values)
    if numbers and len(numbers) + missing == len(values):
        if len(set(numbers)) == 1 and not missing:
            return numbers[0]
        return Spread(math.fsum(numbers) / len(numbers), min(numbers), max(numbers),
                      len(numbers), missing)
    distinct = list(dict.fromkeys(str(v).lower() if isinstance(v, bool) else v
                                  for v in values))
    if len(distinct) == 1:
        return distinct[0]
    counts = {v: sum(1 for w in values if (str(w).lower() if isinstance(w, bool) else w) == v)
              for v in distinct}
    return " / ".join(f"{'n/a' if v is None else v} ({c}/{len(values)})"
                      for v, c in counts.items())


def _render(value: Any, unit: str, digits: int) -> str:
    if isinstance(value, Spread):
        return value.describe(unit, digits)
    if isinstance(value, TimeRatio):
        return value.describe()
    if isinstance(value, str):
        return value
    return fmt(value, unit, digits=digits)


@dataclass(frozen=True)
class Verdict:
    """A finding over the seeds of a run: the sentence with mean [range] numbers, the verdict
    and how many seeds support it.

    ``verdict``: ``True`` as predicted (held in at least ``need`` of the seeds), ``False`` not
    as predicted, ``None`` measured. ``held``: seeds in which the prediction held.
    ``seed_independent``: declared and confirmed (every seed gave the same sentence).
    ``per_seed``: each seed's finding, in the order of ``seeds``.
    """

    text: str
    verdict: bool | None
    topic: str
    basis: str
    seeds: tuple[int, ...]
    held: int
    need: float = 1.0
    seed_independent: bool = False
    timing: TimeRatio | None = None
    per_seed: tuple[Finding, ...] = field(default=(), repr=False, compare=False)
    predicts: bool = False

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def label(self) -> str:
        return LABELS[self.verdict]

    @property
    def seeds_note(self) -> str:
        """``seed-independent``, ``held in 3 of 3 seeds`` (with ``, needs 2`` when the finding
        asks fewer than all), ``9 rounds in 3 seeds`` (a timing) or ``3 seeds`` (a
        measurement): the words the terminal, ``findings.md`` and the report all use."""
        n = self.n_seeds
        if self.seed_independent:
            return "seed-independent"
        if self.timing is not None:
            rounds = len(self.timing.kept)
            return f"{rounds} rounds in {n} seed{'s' * (n != 1)}"
        if self.predicts:
            note = f"held in {self.held} of {n} seed{'s' * (n != 1)}"
            if self.need < 1:
                note += f", needs {math.ceil(self.need * n - 1e-9)}"
            return note
        return f"{n} seed{'s' * (n != 1)}"

    def __str__(self) -> str:
        basis = f" Basis: {self.basis}." if self.basis else ""
        return f"{self.text} ({self.label}; {self.seeds_note}){basis}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "verdict": self.verdict, "label": self.label,
                "topic": self.topic, "basis": self.basis, "seeds": list(self.seeds),
                "held": self.held, "need": self.need, "predicts": self.predicts,
                "seed_independent": self.seed_independent, "seeds_note": self.seeds_note,
                "timing": self.timing.to_dict() if self.timing is not None else None,
                "per_seed": [{"seed": s, **f.to_dict()} for s, f in zip(self.seeds,
                                                                         self.per_seed)]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        timing = data.get("timing")
        per_seed = tuple(Finding.from_dict(d) for d in data.get("per_seed", []))
        return cls(str(data.get("text", "")), data.get("verdict"), data.get("topic", "result"),
                   data.get("basis", ""), tuple(data.get("seeds", ())),
                   int(data.get("held", 0)), float(data.get("need", 1.0)),
                   bool(data.get("seed_independent", False)),
                   TimeRatio.from_dict(timing) if timing else None, per_seed,
                   bool(data.get("predicts", data.get("verdict") is not None)))


def _align(per_seed: Sequence[Sequence[Finding]]) -> list[list[tuple[int, Finding]]]:
    """Rows of ``(seed index, finding)`` that are the same finding in different seeds: by
    ``key`` (default: the text), or by position when the texts differ (numbers written into the
    text) but every seed gave as many findings."""
    keys = [[f.key or f.text for f in items] for items in per_seed]
    if all(k == keys[0] for k in keys) or len({len(k) for k in keys}) == 1:
        return [[(i, items[j]) for i, items in enumerate(per_seed)]
                for j in range(len(per_seed[0]) if per_seed else 0)]
    rows: dict[str, list[tuple[int, Finding]]] = {}
    for i, items in enumerate(per_seed):
        for f in items:
            rows.setdefault(f.key or f.text, []).append((i, f))
    return list(rows.values())


def _one_verdict(row: list[tuple[int, Finding]], seeds: Sequence[int],
                 problems: list[str], section: str) -> Verdict:
    first = row[0][1]
    found = [f for _, f in row]
    used = tuple(seeds[i] for i, _ in row)
    predicts = any(f.predicts for f in found)
    held = sum(f.holds is True for f in found)
    timing = None
    if any(f.timing is not None for f in found):
        rounds = [r for f in found if f.timing is not None for r in f.timing.rounds]
        timing = TimeRatio(tuple(rounds), first.timing.expect if first.timing else None)
    same_text = len({f.text for f in found}) == 1
    if same_text:
        names = {n for f in found for n in f.values}
        values: dict[str, Any] = {n: _spread([f.values.get(n) for f in found]) for n in names}
        text = fill(first.text, {**values, "timing": timing}, _render)
    else:  # numbers written into the text: one seed's sentence, and say so
        text = (first.sentence if len({f.sentence for f in found}) == 1 else
                f"{first.sentence} (seed {used[0]}; the other seeds' sentences differ)")
    seed_independent = first.seed_independent and len({(f.sentence, f.holds)
                                                        for f in found}) == 1
    if first.seed_independent and not seed_independent:
        problems.append(f"{section}: a finding declared seed-independent differs between "
                        f"seeds: {first.text[:80]!r}")
    if timing is not None:
        verdict = timing.verdict()
    elif not predicts:
        verdict = None
    else:
        verdict = held >= math.ceil(first.need * len(found) - 1e-9)
    return Verdict(text, verdict, first.topic, first.basis, used, held, first.need,
                   seed_independent, timing, tuple(found), predicts)


def aggregate(per_seed: Mapping[int, Mapping[str, Sequence[Finding]]]
              ) -> tuple[dict[str, list[Verdict]], list[str]]:
    """Findings by seed and section → verdicts by section, plus problems found on the way.

    ``per_seed``: ``{seed: {section: [Finding, ...]}}``. A section missing in a seed (its
    ``findings()`` failed there) is aggregated over the seeds that have it, and its seed count
    says so.
    """
    seeds = list(per_seed)
    sections = list(dict.fromkeys(s for by_section in per_seed.values() for s in by_section))
    out: dict[str, list[Verdict]] = {}
    problems: list[str] = []
    for section in sections:
        have = [s for s in seeds if section in per_seed[s]]
        rows = _align([per_seed[s][section] for s in have])
        out[section] = [_one_verdict(row, have, problems, section) for row in rows]
    return out, problems


def compute_findings(run_dir: Any, experiment: Any) -> tuple[dict[str, list[Finding]], list[str]]:
    """One run's findings by section (the experiment, or each child of a showcase), from the
    ``findings`` of ``experiment`` (a :class:`~toolkit.lab.runner.Experiment`; for a showcase, of
    its parts).

    Returns ``(findings, problems)``: an experiment without ``findings`` contributes nothing; one
    whose ``findings(run)`` raises is listed in ``problems`` (the run's numbers stay valid). A
    ``disable_blocks`` pattern that matched no block that ran becomes a finding of the run.
    """
    from toolkit.lab.runner.results import RunResults

    run = RunResults(run_dir)
    parts = experiment.parts
    views = [(name, run.child(name)) for name in run.children] or [(run.experiment, run)]
    out: dict[str, list[Finding]] = {}
    problems: list[str] = []
    for section, view in views:
        try:
            fn = parts[view.experiment].findings if view.experiment in parts else None
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
            "The disable pattern {pattern} matched no block that ran (blocks seen: {seen}), so "
            "blocked and unblocked computed the same thing.",
            values={"pattern": repr(pattern), "seen": ", ".join(seen) or "none"},
            seed_independent=True))
    return out, problems


def render_findings_md(findings: Mapping[str, Sequence[Verdict]], problems: Sequence[str],
                       seeds: Sequence[int]) -> str:
    """``findings.md``: every verdict with its basis and seed count, by section."""
    n = len(seeds)
    lines = ["# Findings", "",
             f"Seeds: {', '.join(map(str, seeds))}. " + (
                 "Numbers are means over the seeds with their range in brackets, "
                 "[smallest, largest]." if n > 1 else "One seed: each number is that run's."),
             ""]
    for section, items in findings.items():
        lines += [f"## {section}", ""] if len(findings) > 1 or section else []
        lines += [f"- {v}" for v in items] + [""]
    lines += [f"- problem: {p}" for p in problems]
    return "\n".join(lines).rstrip() + "\n"


def _write(path: Path, findings: Mapping[str, Sequence[Verdict]], problems: Sequence[str],
           seeds: Sequence[int], extra: Mapping[str, Any] | None = None) -> None:
    from toolkit.lab.runner.results import atomic_write_json, atomic_write_text, to_jsonable
    from toolkit.lab.schema import FINDINGS_FILE, FindingsFile

    data = to_jsonable({"seeds": list(seeds), **(extra or {}),
                        "findings": {k: [v.to_dict() for v in items]
                                     for k, items in findings.items()},
                        "problems": list(problems)}, FINDINGS_FILE)
    FindingsFile.model_validate(data)  # the shape its readers take, checked as it is written
    atomic_write_json(path / FINDINGS_FILE, data, root=path)
    atomic_write_text(path / "findings.md", render_findings_md(findings, problems, seeds),
                      root=path)


def write_findings(run_dir: Any, experiment: Any) -> tuple[dict[str, list[Verdict]], list[str]]:
    """Compute one run's findings (``experiment.findings``) and write ``findings.json`` and
    ``findings.md`` (one seed)."""
    from toolkit.lab.runner.results import RunResults

    seed = int(RunResults(run_dir).meta.get("seed", 0))
    found, problems = compute_findings(run_dir, experiment)
    verdicts, more = aggregate({seed: found})
    _write(Path(run_dir), verdicts, [*problems, *more], [seed])
    return verdicts, [*problems, *more]


def write_seed_findings(folder: Path, per_seed: Mapping[int, Mapping[str, Sequence[Finding]]],
                        problems: Sequence[str]) -> tuple[dict[str, list[Verdict]], list[str]]:
    """Aggregate the findings of several seeds and write them into ``folder``."""
    verdicts, more = aggregate(per_seed)
    all_problems = [*problems, *more]
    _write(Path(folder), verdicts, all_problems, list(per_seed))
    return verdicts, all_problems


def _findings_file(folder: Path) -> dict[str, Any] | None:
    """``findings.json`` of a run or a seed group, checked against
    :class:`~toolkit.lab.schema.FindingsFile` (``None`` when there is none)."""
    from toolkit.lab.runner.results import read_json
    from toolkit.lab.schema import FINDINGS_FILE, FindingsFile

    path = folder / FINDINGS_FILE
    if not os.path.lexists(path):
        return None
    return read_json(path, root=folder, model=FindingsFile)


def _built(path: Path, build: Any) -> Any:
    """``build()``, whose values come from a file: what the objects refuse (a sentence naming
    a number the file does not hold) is :class:`DamagedFile` naming the file."""
    try:
        return build()
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError) as err:
        if isinstance(err, DamagedFile):
            raise
        raise DamagedFile(path, f"its findings cannot be read back ({type(err).__name__}: "
                                f"{str(err)[:200]})") from None


def read_findings(run_dir: Any) -> dict[str, list[Verdict]]:
    """The verdicts a run (or a seed group) wrote, by section (empty when it wrote none);
    :class:`~toolkit.lab.runner.errors.DamagedFile` naming ``findings.json`` when it cannot be
    read as the results format says."""
    folder = Path(run_dir)
    data = _findings_file(folder)
    if data is None:
        return {}
    if data.get("seeds") is None:  # one run's findings, written before verdicts were aggregated
        seed, found, _ = read_seed_findings(run_dir)
        return _built(folder / "findings.json", lambda: aggregate({seed: found})[0])
    return _built(folder / "findings.json", lambda: {
        k: [Verdict.from_dict(d) for d in v] for k, v in data.get("findings", {}).items()})


def read_seed_findings(run_dir: Any) -> tuple[int, dict[str, list[Finding]], list[str]]:
    """One run's own (per-seed) findings from its ``findings.json``: seed, findings, problems.

    A run without the file (one written before findings were stored) has none, with a problem
    saying so; a damaged file is :class:`~toolkit.lab.runner.errors.DamagedFile`."""
    from toolkit.lab.runner.results import RunResults

    folder = Path(run_dir)
    seed = RunResults(run_dir).seed
    data = _findings_file(folder)
    if data is None:
        return seed, {}, [f"{folder.name}: no findings.json (a run written before findings "
                          f"were stored, or one that did not complete)"]
    found = _built(folder / "findings.json", lambda: {
        k: [Finding.from_dict(v["per_seed"][0]) if v.get("per_seed") else Finding.from_dict(v)
            for v in items] for k, items in data.get("findings", {}).items()})
    return seed, found, list(data.get("problems", []))
