"""An experiment's :class:`Story` and ``findings(run) -> list[Finding]``, and the
:class:`Verdict` of a finding over seeds (:func:`aggregate`; docs/guides/experiments.md)."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
import statistics
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, StrictBool, computed_field
from pydantic.dataclasses import dataclass

from toolkit._utils.formatting import fmt

#: a verdict's words: the prediction held, it did not, a measurement without a prediction
LABELS = {True: "as predicted", False: "not as predicted", None: "measured"}
#: the same verdicts on the report's badges
BADGES = {True: "as predicted", False: "did not hold", None: "measured"}
_SPEC = re.compile(r"^(\d)?([A-Za-z%]*)$")
Value = StrictBool | int | float | str | None


@dataclass(frozen=True)
class Story:
    """What an experiment compares, its block, and what theory predicts (one sentence each)."""

    compares: str
    block: str
    prediction: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def _spec(spec: str) -> tuple[int, str]:
    """``"4s"`` → ``(4, "s")``: significant digits (default 3) and unit."""
    if (match := _SPEC.match(spec)) is None:
        raise ValueError(f"Finding: placeholder format must be digits and/or a unit such as "
                         f"'4', 's', 'B' or '4s', got {spec!r}")
    return int(match[1] or 3), match[2]


class _Filler(string.Formatter):
    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        return kwargs[field_name], field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        digits, unit = _spec(format_spec)
        if isinstance(value, (Spread, TimeRatio)):
            return value.describe(unit, digits)
        return value if isinstance(value, str) else str(value).lower() \
            if isinstance(value, bool) else fmt(value, unit, digits=digits)


def fill(text: str, values: Mapping[str, Any]) -> str:
    """``text`` with each ``{name:spec}`` written for a reader: ``{t:s}`` → ``12.3 ms``."""
    return _Filler().vformat(text, (), dict(values))


def median_interval(values: Sequence[float], confidence: float = 0.95
                    ) -> tuple[float, float] | None:
    """The distribution-free interval ``[x₍ₖ₎, x₍ₙ₊₁₋ₖ₎]`` of the median, covering it with
    probability ``1 − 2·P(Bin(n, ½) ≤ k − 1)`` (Conover 1999, Practical Nonparametric
    Statistics, §3.2), ``k`` the largest that covers ``confidence``; ``None`` if none does."""
    if not 0 < confidence < 1:
        raise ValueError(f"median_interval: confidence must be in (0, 1), got {confidence}")
    xs, best, below = sorted(values), None, 0.0  # below: P(Bin(n, ½) ≤ k − 1)
    for k in range(1, len(xs) // 2 + 1):
        below += math.comb(len(xs), k - 1) / 2.0 ** len(xs)
        if 1 - 2 * below < confidence:
            break
        best = k
    return None if best is None else (xs[best - 1], xs[len(xs) - best])


@dataclass(frozen=True)
class TimeRatio:
    """Per-round ratios ``t_a / t_b`` of :func:`toolkit.lab.measure.race`, and ``expect``, the
    side of 1 a theory predicts (``"above"``: ``a`` is slower; ``None``: a measurement)."""

    rounds: tuple[float, ...]
    expect: Literal["above", "below"] | None = None

    @property
    def kept(self) -> list[float]:
        return [r for r in self.rounds if r > 0 and math.isfinite(r)]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def median(self) -> float:
        return statistics.median(self.kept) if self.kept else math.nan

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % interval of the median ratio (``None`` with fewer than 6 rounds)."""
        return median_interval(self.kept)

    def verdict(self) -> bool | None:
        """Whether the interval lies on the predicted side of 1 (``None``: undecided)."""
        return None if self.expect is None or self.side in (None, "holds") else \
            self.side == self.expect

    @property
    def side(self) -> Literal["above", "below", "holds"] | None:
        """Where the interval lies (``"holds"``: it holds 1; ``None``: there is none)."""
        lo, hi = self.interval or (None, None)
        return None if lo is None else "above" if lo > 1 else "below" if hi < 1 else "holds"

    def describe(self, unit: str = "", digits: int = 3) -> str:
        """``1.25x (95 % interval 1.1x to 1.4x, 9 rounds)``."""
        interval, n = self.interval, len(self.kept)
        if interval is None:
            return f"{fmt(self.median)}x ({n} round{'s' * (n != 1)}, too few for an interval)"
        return (f"{fmt(self.median)}x (95 % interval {fmt(interval[0])}x to "
                f"{fmt(interval[1])}x, {n} rounds)")

    __str__ = describe


@dataclass(frozen=True)
class Headline:
    """How the report's summary figure draws a finding: ``metric``, the axis label; ``blocked``
    and ``unblocked``, names in its ``values``; ``thresholds``, lines; ``log``, a log axis."""

    metric: str
    blocked: str
    unblocked: str
    thresholds: tuple[float, ...] = ()
    log: bool = False
    reading: str = ""


@dataclass(frozen=True)
class Finding:
    """One sentence of one run, its numbers placeholders of ``values`` (``{name:4s}``: 4
    digits, seconds), and whether a prediction held (docs/guides/experiments.md)."""

    text: str
    verdict: StrictBool | None = None
    topic: Literal["result", "cost"] = "result"
    _: dataclasses.KW_ONLY
    basis: str = ""
    values: dict[str, Value] = dataclasses.field(default_factory=dict)
    seed_independent: bool = False
    need: float = Field(1.0, gt=0, le=1, description="the fraction of seeds it must hold in")
    timing: TimeRatio | None = None
    key: str = ""
    outside: str = ""
    headline: Headline | None = None

    def __post_init__(self) -> None:
        if self.outside.strip():  # out of the theory's range: a measurement, and why
            object.__setattr__(self, "verdict", None)
            if self.timing is not None:
                object.__setattr__(self, "timing", TimeRatio(self.timing.rounds))
        if self.timing is not None and self.verdict is not None:
            raise ValueError(f"Finding: a timing's verdict follows from its interval; leave "
                             f"verdict=None, got {self.verdict!r}")
        if self.predicts and not self.basis.strip():
            raise ValueError("Finding: a prediction must name its basis (the theorem, closed "
                             f"form or paper it follows from), got basis='' for {self.text!r}")
        names = set(self.values) | ({"timing"} if self.timing is not None else set())
        for what, name, have in [*(("the text names {%s}", n, names) for _, n, spec, _ in
                                   string.Formatter().parse(self.text) if n is not None
                                   and _spec(spec or "")),
                                 *(("the headline draws %r", n, set(self.values)) for n in
                                   ((self.headline.blocked, self.headline.unblocked)
                                    if self.headline else ()))]:
            if name not in have:
                raise ValueError(f"Finding: {what % name} but values has "
                                 f"{sorted(have) or 'nothing'}")

    @property
    def predicts(self) -> bool:
        return self.verdict is not None or (self.timing is not None
                                            and self.timing.expect is not None)

    @property
    def holds(self) -> bool | None:
        """Whether the prediction held in this run (a timing: by the interval rule)."""
        return self.timing.verdict() if self.timing is not None else self.verdict

    @property
    def sentence(self) -> str:
        """The text with this run's numbers (and, outside the theory's range, why measured)."""
        text = fill(self.text, {**self.values, "timing": self.timing})
        return f"{text} Measured only: {self.outside.strip()}" if self.outside.strip() else text

    @property
    def label(self) -> str:
        return LABELS[self.holds]

    def __str__(self) -> str:
        return f"{self.sentence} ({self.label})"


@dataclasses.dataclass(frozen=True)
class Spread:
    """A number over seeds: mean, smallest and largest, and how many seeds had none."""

    mean: float
    lo: float
    hi: float
    missing: int = 0

    def describe(self, unit: str = "", digits: int = 3) -> str:
        """``0.0535 [0.041, 0.066]`` (mean [min, max]); one number when every seed agrees."""
        mean, lo, hi = (fmt(x, unit, digits=digits) for x in (self.mean, self.lo, self.hi))
        return mean + (f" [{lo}, {hi}]" if lo != hi else "") + (
            f" (n/a in {self.missing} seed{'s' * (self.missing != 1)})" if self.missing else "")


def _spread(values: Sequence[Any]) -> Any:
    """Numbers → :class:`Spread` (the common value when all agree); anything else: the common
    value, or the distinct values with their counts."""
    missing = sum(v is None or (isinstance(v, float) and math.isnan(v)) for v in values)
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
               and not (isinstance(v, float) and math.isnan(v))]
    if numbers and len(numbers) + missing == len(values):
        return numbers[0] if len(set(numbers)) == 1 and not missing else \
            Spread(math.fsum(numbers) / len(numbers), min(numbers), max(numbers), missing)
    words = [str(v).lower() if isinstance(v, bool) else v for v in values]
    distinct = list(dict.fromkeys(words))
    return distinct[0] if len(distinct) == 1 else " / ".join(
        f"{'n/a' if v is None else v} ({words.count(v)}/{len(values)})" for v in distinct)


@dataclass(frozen=True)
class Verdict:
    """A finding over seeds: its sentence with mean [range] numbers, verdict, support."""

    text: str
    verdict: StrictBool | None
    topic: Literal["result", "cost"] = "result"
    basis: str = ""
    seeds: tuple[int, ...] = ()
    held: int = 0
    need: float = 1.0
    seed_independent: bool = False
    timing: TimeRatio | None = None
    per_seed: tuple[Finding, ...] = ()
    predicts: bool = False
    outside: str = ""
    headline: Headline | None = None
    outside_seeds: int = 0

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return LABELS[self.verdict]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def seeds_note(self) -> str:
        """``seed-independent``, ``held in 3 of 3 seeds`` (``, needs 2``), ``27 rounds in 3
        seeds; each seed's own interval lies above 1 in 3 of 3 seeds`` or ``3 seeds``."""
        n = self.n_seeds - (self.outside_seeds if self.predicts and self.timing is None
                               else 0)  # seeds outside the range test nothing: apart
        seeds = f"{n} seed{'s' * (n != 1)}"
        if self.seed_independent:
            return "seed-independent"
        if self.timing is not None:
            return f"{len(self.timing.kept)} rounds in {seeds}" + _seed_sides(self.timing,
                                                                               self.per_seed)
        if not self.predicts:
            return seeds
        needs = f", needs {math.ceil(self.need * n - 1e-9)}" if self.need < 1 else ""
        apart = f"; {self.outside_seeds} outside its range" if self.outside_seeds else ""
        return f"held in {self.held} of {seeds}{needs}{apart}"

    def __str__(self) -> str:
        basis = f" Basis: {self.basis}." if self.basis else ""
        return f"{self.text} ({self.label}; {self.seeds_note}){basis}"


_SIDES = {"above": "lies above 1", "below": "lies below 1", "holds": "holds 1"}


def _seed_sides(pooled: TimeRatio, per_seed: Sequence[Finding]) -> str:
    """Where each seed's own interval lies, counted against the pooled one's side (``""`` for
    one seed; seeds with too few rounds for an interval counted apart)."""
    sides = [f.timing.side for f in per_seed if f.timing is not None]
    if len(sides) < 2:
        return ""
    with_interval = [side for side in sides if side is not None]
    if not with_interval or pooled.side is None:
        return "; too few rounds in each seed for an interval of its own"
    text = (f"; each seed's own interval {_SIDES[pooled.side]} in "
            f"{with_interval.count(pooled.side)} of {len(with_interval)} seeds")
    short = len(sides) - len(with_interval)
    return text + (f" ({short} more with too few rounds)" if short else "")


def _align(per_seed: Sequence[Sequence[Finding]]) -> list[list[tuple[int, Finding]]]:
    """Rows of ``(seed index, finding)``: by position if all seeds gave as many, else key."""
    if len({len(items) for items in per_seed}) == 1:
        return [[(i, items[j]) for i, items in enumerate(per_seed)]
                for j in range(len(per_seed[0]) if per_seed else 0)]
    rows: dict[str, list[tuple[int, Finding]]] = {}
    for i, f in ((i, f) for i, items in enumerate(per_seed) for f in items):
        rows.setdefault(f.key or f.text, []).append((i, f))
    return list(rows.values())


def _verdict(row: list[tuple[int, Finding]], seeds: Sequence[int], problems: list[str],
             section: str) -> Verdict:
    first, found = row[0][1], [f for _, f in row]
    timing = TimeRatio(tuple(r for f in found if f.timing for r in f.timing.rounds),
                       first.timing.expect if first.timing else None) \
        if any(f.timing is not None for f in found) else None
    apart = [f for f in found if f.outside.strip()]  # seeds outside the prediction's range
    outside = apart[0].outside.strip() if apart else ""
    if len({f.text for f in found}) == 1:
        names = {n for f in found for n in f.values}
        text = fill(first.text, {**{n: _spread([f.values.get(n) for f in found]) for n in names},
                                 "timing": timing})
        some = "" if len(apart) == len(found) else f" in {len(apart)} of {len(found)} seeds"
        text = f"{text} Measured only{some}: {outside}" if outside else text
    else:  # numbers written into the text: one seed's sentence, and say so
        text = first.sentence if len({f.sentence for f in found}) == 1 else \
            f"{first.sentence} (seed {seeds[row[0][0]]}; the other seeds' sentences differ)"
    same = len({(f.sentence, f.holds) for f in found}) == 1
    if first.seed_independent and not same:
        problems.append(f"{section}: a finding declared seed-independent differs between "
                        f"seeds: {first.text[:80]!r}")
    held = sum(f.holds is True for f in found)
    predicts = any(f.predicts for f in found)
    verdict = timing.verdict() if timing is not None else \
        (held >= math.ceil(first.need * (len(found) - len(apart)) - 1e-9) if predicts else None)
    if timing is not None and verdict is not None and any(
            f.timing is not None and f.timing.side not in (None, timing.side) for f in found):
        verdict = None  # a seed's own interval lies elsewhere: the seeds disagree, measured
    return Verdict(text, verdict, first.topic, first.basis, tuple(seeds[i] for i, _ in row),
                   held, first.need, first.seed_independent and same, timing, tuple(found),
                   predicts, outside, first.headline, len(apart) if predicts else 0)


def aggregate(per_seed: Mapping[int, Mapping[str, Sequence[Finding]]]
              ) -> tuple[dict[str, list[Verdict]], list[str]]:
    """``{seed: {section: [Finding]}}`` → verdicts by section, and the problems met."""
    problems: list[str] = []
    have = {section: [s for s in per_seed if section in per_seed[s]]
            for by_section in per_seed.values() for section in by_section}
    return {section: [_verdict(row, seeds, problems, section)
                      for row in _align([per_seed[s][section] for s in seeds])]
            for section, seeds in have.items()}, problems


def unmatched_patterns(patterns: Iterable[str], seen: Sequence[str]) -> list[str]:
    """The ``disable_blocks`` patterns that match no block that ran (they switched nothing off)."""
    return [p for p in patterns if not any(fnmatch.fnmatchcase(name, p) for name in seen)]


def _named(section: str, verdict: Verdict, words: int = 12) -> str:
    """A finding named in a few words: its section and the start of its sentence."""
    text = " ".join(re.sub(r"\s\[[^\[\]]*\]", "", verdict.text).split())
    cut = (text.split(": ", 1)[0] if len(text.split(": ", 1)[0].split()) >= 4 else text).split()
    return f"{section}: {' '.join(cut[:words]).rstrip('.,;:')}{' …' if len(cut) > words else ''}"


def found_sentence(findings: Mapping[str, Sequence[Verdict]]) -> str:
    """What a run found in one sentence, each finding that did not hold named (``""``
    without findings): the first line of the report and of ``findings.md``."""
    items = [(s, v) for s, vs in findings.items() for v in vs]
    if not items:
        return ""
    k, n = len(items), sum(bool(vs) for vs in findings.values())
    missed = [_named(s, v) for s, v in items if v.verdict is False]
    yes = sum(v.verdict is True for _, v in items)
    measured = k - yes - len(missed)
    parts = [f"{yes or 'none'} came out as predicted",
             f"{len(missed)} did not hold ({'; '.join(missed)})" if missed else "0 did not hold",
             *([f"{measured} {'is a measurement' if measured == 1 else 'are measurements'} "
                "without a prediction"] if measured else [])]
    body = ", ".join(parts[:-1]) + (", and " if len(parts) > 2 else " and ") + parts[-1]
    where = f"Across {n} experiments, of" if n > 1 else "Of"
    return f"{where} {k} finding{'s' * (k != 1)}, {body}."


def findings_markdown(findings: Mapping[str, Sequence[Verdict]], problems: Sequence[str],
                      seeds: Sequence[int]) -> str:
    """``findings.md``: :func:`found_sentence`, then every verdict by section."""
    sentence = found_sentence(findings)
    lines = ["# Findings", "", *([sentence, ""] if sentence else []),
             f"Seeds: {', '.join(map(str, seeds))}. " + (
                 "Numbers are means over the seeds with their range in brackets, [smallest, "
                 "largest]." if len(seeds) > 1 else "One seed: each number is that run's."), ""]
    for section, items in findings.items():
        lines += [f"## {section}", ""] if len(findings) > 1 or section else []
        lines += [f"- {v}" for v in items] + [""]
    lines += [f"- problem: {p}" for p in problems]
    return "\n".join(lines).rstrip() + "\n"
