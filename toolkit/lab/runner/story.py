"""What an experiment says about itself: its story, and the findings computed from a run.

An experiment module declares::

    STORY = Story(
        compares="closed-form EM vs EM with a gradient M-step, with and without the block",
        block="em.responsibilities: Q = Σ stop_gradient(r) · log p(x, z; θ)",
        prediction="with the block ∇Q = ∇LL (Fisher's identity); without it the M-step climbs "
                   "LL − H(r) and drives the responsibilities toward hard assignments",
    )

    def findings(run: RunResults) -> list[Finding]:
        b, u = run.summary["blocked"], run.summary["unblocked"]
        return [Finding(
            "‖∇Q − ∇LL‖/‖∇LL‖ is {blocked} with the block and {unblocked} without it.",
            b["err"] < 1e-6 < u["err"], basis="Fisher's identity",
            values={"blocked": b["err"], "unblocked": u["err"]})]

A finding is one sentence of one run (one seed). Its numbers are named placeholders of
``text`` (``{name}``, ``{name:4}`` for 4 significant digits, ``{name:s}``/``{name:B}`` for
seconds/bytes, ``{name:4s}`` both), filled from ``values``, so that the runner can put the same
sentence over several seeds with each number's mean and range (:mod:`toolkit.lab.runner.verdicts`).

Kinds of finding:

- **predicted**: ``verdict`` is whether the prediction held in this run, and ``basis`` names the
  theorem, closed form or paper it follows from (required). Over seeds it is "as predicted" only
  when it held in every seed, or in the fraction ``need`` stated with it.
- **measured**: ``verdict=None``; a number without a prediction.
- **seed-independent**: ``seed_independent=True`` for what cannot depend on the seed (exact
  zeros, closed forms, node counts); the runner checks that every seed agrees.
- **timing**: ``timing=TimeRatio(rounds, expect="above")`` with the per-round ratios of two
  contenders timed in interleaved rounds (:func:`toolkit.lab.measure.race`); the verdict is not
  given but follows from a rule: "as predicted" only when the 95 % interval of the median ratio
  lies on the predicted side of 1, "not as predicted" when it lies on the other side, and
  "measured" (with its interval) when it includes 1. ``{timing}`` in the text shows it.
"""

from __future__ import annotations

import fnmatch
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._utils.formatting import fmt

__all__ = ["Finding", "Story", "TimeRatio", "fill", "fmt", "unmatched_patterns"]

TOPICS = ("result", "cost")
_SPEC = re.compile(r"^(\d)?([A-Za-z%]*)$")


@dataclass(frozen=True)
class Story:
    """What an experiment compares, its block, and what theory predicts (one sentence each)."""

    compares: str
    block: str
    prediction: str

    def to_dict(self) -> dict[str, str]:
        return {"compares": self.compares, "block": self.block, "prediction": self.prediction}


def parse_spec(spec: str, where: str = "Finding") -> tuple[int, str]:
    """``"4s"`` → ``(4, "s")``: significant digits (default 3) and unit of a placeholder."""
    match = _SPEC.match(spec)
    if match is None:
        raise ValueError(f"{where}: placeholder format must be digits and/or a unit such as "
                         f"'4', 's', 'B' or '4s', got {spec!r}")
    return int(match.group(1) or 3), match.group(2)


def placeholders(text: str) -> list[tuple[str, str]]:
    """``(name, spec)`` of every ``{name:spec}`` in ``text``, in order."""
    return [(name, spec or "") for _, name, spec, _ in string.Formatter().parse(text)
            if name is not None]


class _Filler(string.Formatter):
    def __init__(self, render: Any) -> None:
        self.render = render

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        return kwargs[field_name], field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        digits, unit = parse_spec(format_spec)
        return self.render(value, unit, digits)


def _one(value: Any, unit: str, digits: int) -> str:
    if isinstance(value, TimeRatio):
        return value.describe()
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    return fmt(value, unit, digits=digits)


def fill(text: str, values: Mapping[str, Any], render: Any = _one) -> str:
    """``text`` with each ``{name:spec}`` replaced by ``render(values[name], unit, digits)``.

    >>> fill("took {t:s} and {n} nodes ({r:4})", {"t": 0.0123, "n": 7, "r": 1.23456})
    'took 12.3 ms and 7 nodes (1.235)'
    """
    return _Filler(render).vformat(text, (), dict(values))


@dataclass(frozen=True)
class TimeRatio:
    """Per-round ratios ``t_a / t_b`` of two contenders timed in interleaved rounds.

    ``expect``: the side of 1 that a named theory predicts (``"above"``: ``a`` is slower,
    ``"below"``: ``a`` is faster), or ``None`` for a measurement. The statistic is the median of
    the per-round ratios with its distribution-free 95 % interval
    (:func:`toolkit.lab.measure.median_interval`); :meth:`verdict` applies the rule.
    """

    rounds: tuple[float, ...]
    expect: str | None = None

    def __post_init__(self) -> None:
        if self.expect not in (None, "above", "below"):
            raise ValueError(f"TimeRatio: expect must be 'above', 'below' or None, got "
                             f"{self.expect!r}")
        object.__setattr__(self, "rounds", tuple(float(r) for r in self.rounds))

    @property
    def kept(self) -> list[float]:
        return [r for r in self.rounds if r > 0 and math.isfinite(r)]

    @property
    def median(self) -> float:
        import statistics

        kept = self.kept
        return statistics.median(kept) if kept else math.nan

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % interval of the median ratio (``None`` with fewer than 6 rounds)."""
        from toolkit.lab.measure import median_interval

        return median_interval(self.kept)

    def verdict(self) -> bool | None:
        """True: the interval lies on the predicted side of 1; False: on the other side;
        None: no prediction, or the interval includes 1 (or there is none)."""
        interval = self.interval
        if self.expect is None or interval is None or interval[0] <= 1 <= interval[1]:
            return None
        return (interval[0] > 1) == (self.expect == "above")

    def describe(self) -> str:
        """``1.25x (95 % interval 1.1x to 1.4x, 9 rounds)``."""
        interval = self.interval
        n = len(self.kept)
        if interval is None:
            return f"{fmt(self.median)}x ({n} round{'s' * (n != 1)}, too few for an interval)"
        return (f"{fmt(self.median)}x (95 % interval {fmt(interval[0])}x to "
                f"{fmt(interval[1])}x, {n} rounds)")

    def to_dict(self) -> dict[str, Any]:
        interval = self.interval
        return {"rounds": list(self.rounds), "expect": self.expect, "median": self.median,
                "interval": list(interval) if interval else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimeRatio:
        return cls(tuple(data.get("rounds", ())), data.get("expect"))


@dataclass(frozen=True)
class Finding:
    """One headline sentence of one run: its numbers, and whether a prediction held.

    Args:
        text: the sentence; ``{name}`` placeholders are filled from ``values`` (and
            ``{timing}`` from ``timing``).
        verdict: ``True`` the prediction held in this run, ``False`` it did not, ``None`` a
            measurement without a prediction.
        topic: ``"result"`` (what the block changes in the numbers the method computes) or
            ``"cost"`` (time, memory, graph size); the showcase's overview table takes the
            first finding of each topic.
        basis: the theorem, closed form or paper figure the prediction follows from; required
            with a verdict (and with a timing that expects a side of 1).
        values: the numbers of the sentence, by placeholder name (numbers, strings, booleans,
            ``None``). Over seeds each number is shown as its mean and range.
        seed_independent: the finding cannot depend on the seed (exact zeros, closed forms,
            node counts); over seeds it says "seed-independent" once every seed agrees.
        need: the fraction of seeds in which the prediction must hold for "as predicted"
            (default 1: every seed); stated next to the verdict when below 1.
        timing: per-round ratios from interleaved rounds (:class:`TimeRatio`); its verdict
            follows from the interval rule, so ``verdict`` must stay ``None``.
        key: the finding's identity across seeds (default: its text).
    """

    text: str
    verdict: bool | None = None
    topic: str = "result"
    basis: str = field(default="", kw_only=True)
    values: Mapping[str, Any] = field(default_factory=dict, kw_only=True)
    seed_independent: bool = field(default=False, kw_only=True)
    need: float = field(default=1.0, kw_only=True)
    timing: TimeRatio | None = field(default=None, kw_only=True)
    key: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if self.topic not in TOPICS:
            raise ValueError(f"Finding: topic must be 'result' or 'cost', got {self.topic!r}")
        if not (self.verdict is None or isinstance(self.verdict, bool)):
            raise TypeError(f"Finding: verdict must be True, False or None, got "
                            f"{self.verdict!r}")
        if self.timing is not None and self.verdict is not None:
            raise ValueError("Finding: a timing's verdict follows from its interval; leave "
                             f"verdict=None, got {self.verdict!r}")
        predicts = self.verdict is not None or (self.timing is not None
                                                and self.timing.expect is not None)
        if predicts and not self.basis.strip():
            raise ValueError("Finding: a prediction must name its basis (the theorem, closed "
                             f"form or paper it follows from), got basis='' for {self.text!r}")
        if not (0 < self.need <= 1):
            raise ValueError(f"Finding: need must be a fraction of seeds in (0, 1], got "
                             f"{self.need!r}")
        object.__setattr__(self, "values", dict(self.values))
        names = {"timing"} if self.timing is not None else set()
        names |= set(self.values)
        for name, spec in placeholders(self.text):
            if name not in names:
                raise ValueError(f"Finding: the text names {{{name}}} but values has "
                                 f"{sorted(names) or 'nothing'}")
            parse_spec(spec)
        for name, value in self.values.items():
            if not (value is None or isinstance(value, (bool, int, float, str))):
                raise TypeError(f"Finding: values[{name!r}] must be a number, string, bool or "
                                f"None, got {type(value).__name__}")

    @property
    def holds(self) -> bool | None:
        """Whether the prediction held in this run (a timing: by the interval rule)."""
        return self.timing.verdict() if self.timing is not None else self.verdict

    @property
    def predicts(self) -> bool:
        return self.verdict is not None or (self.timing is not None
                                            and self.timing.expect is not None)

    @property
    def sentence(self) -> str:
        """The text with this run's numbers filled in."""
        return fill(self.text, {**self.values, "timing": self.timing})

    @property
    def label(self) -> str:
        return {True: "as predicted", False: "not as predicted", None: "measured"}[self.holds]

    def __str__(self) -> str:
        return f"{self.sentence} ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "sentence": self.sentence, "verdict": self.verdict,
                "holds": self.holds, "label": self.label, "topic": self.topic,
                "basis": self.basis, "values": dict(self.values),
                "seed_independent": self.seed_independent, "need": self.need,
                "timing": self.timing.to_dict() if self.timing is not None else None,
                "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        timing = data.get("timing")
        verdict = data.get("verdict")
        # findings written before a basis was required keep their verdict, marked as such
        basis = data.get("basis") or ("" if verdict is None else "(basis not recorded)")
        return cls(str(data.get("text", "")), verdict, data.get("topic", "result"),
                   basis=basis, values=data.get("values") or {},
                   seed_independent=bool(data.get("seed_independent", False)),
                   need=float(data.get("need", 1.0)),
                   timing=TimeRatio.from_dict(timing) if timing else None,
                   key=data.get("key", ""))


def unmatched_patterns(patterns: Iterable[str], seen: Sequence[str]) -> list[str]:
    """The ``disable_blocks`` patterns that match no block that ran (they switched nothing off)."""
    return [p for p in patterns if not any(fnmatch.fnmatchcase(name, p) for name in seen)]
