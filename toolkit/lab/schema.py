"""The results format in one place: the two variants every experiment compares, and the grammar
of the metric keys a run logs.

Every experiment runs its algorithm twice from the same random state: with its blocks
(:data:`BLOCKED`, the method as published) and inside ``disable_blocks`` (:data:`UNBLOCKED`).
Results, summaries, metrics, tables and figures name the two by these strings, and by nothing
else: writers, readers and the report import them from here.

A metric key is ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``), or
``"<group>/<name>"`` for a quantity of neither variant (``"reference/loss"``); :func:`metric_key`
builds one and :func:`split_metric_key` reads one back.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BLOCKED", "UNBLOCKED", "VARIANTS", "metric_key", "split_metric_key"]

#: with the blocks: the method as published
BLOCKED: Final = "blocked"
#: the same code inside ``disable_blocks``: the gradient flows where the blocks cut it
UNBLOCKED: Final = "unblocked"
#: both, in the order every table and figure shows them
VARIANTS: Final = (BLOCKED, UNBLOCKED)


def metric_key(*parts: str) -> str:
    """``"blocked/train/loss"`` from ``(BLOCKED, "train", "loss")``; every part non-empty and
    free of ``/``.

    >>> metric_key(BLOCKED, "chain_grad", "norm")
    'blocked/chain_grad/norm'
    """
    if not parts or any(not p or "/" in p for p in parts):
        raise ValueError(f"metric_key: parts must be non-empty and without '/', got {parts!r}")
    return "/".join(parts)


def split_metric_key(key: str) -> tuple[str | None, str]:
    """``(variant, rest)`` of a metric key: the variant when the key starts with one, else
    ``None`` and the whole key.

    >>> split_metric_key("unblocked/train/loss"), split_metric_key("reference/loss")
    (('unblocked', 'train/loss'), (None, 'reference/loss'))
    """
    head, _, rest = key.partition("/")
    return (head, rest) if head in VARIANTS and rest else (None, key)



# ---------------------------------------------------------------------------------------------
# The results files: the shape of each file a run writes
# ---------------------------------------------------------------------------------------------
# One model per results file, used by the writers (checked before a file is written) and by the
# readers (a file that does not fit is a damaged file naming the field). The models say what
# the readers rely on; keys they do not read are kept as they are (``extra="allow"``), so an
# older or newer run still reads. Strict: a number is a number, not the string of one.

from typing import Any, Literal, get_args  # noqa: E402  (this section stands on its own)

from pydantic import BaseModel as _Model  # noqa: E402
from pydantic import ConfigDict as _Config  # noqa: E402
from pydantic import Field as _Field  # noqa: E402
from pydantic import model_validator as _after  # noqa: E402

__all__ += ["FINDINGS_FILE", "GROUP_FILE", "MAX_DEPTH", "STATUSES", "FindingRecord",
            "FindingsFile", "GroupFile", "MetricsRow", "RunConfigFile", "RunMeta", "Status",
            "SummaryFile", "TimingRecord", "VerdictRecord", "summary_problem"]

#: The status ``meta.json`` holds (``abandoned`` is decided when a run is read, never written:
#: a run that says ``running`` whose process is gone).
Status = Literal["running", "complete", "failed", "interrupted"]
#: every :data:`Status`, in the order a run goes through them
STATUSES: Final = get_args(Status)
#: The deepest nesting of lists and objects a results file may hold: far beyond what any
#: writer makes, far below what would exhaust a reader's stack.
MAX_DEPTH: Final = 100
FINDINGS_FILE: Final = "findings.json"
GROUP_FILE: Final = "group.json"

_OPEN = _Config(strict=True, extra="allow")


class ChildMeta(_Model):
    """``meta.json``'s ``children.<name>``: a part of a composite run (the showcase)."""

    model_config = _OPEN
    experiment: str
    params: dict[str, Any] = {}
    dtype: str | None = None
    disable_blocks: list[str] = []


class RunMeta(_Model):
    """``meta.json``: how a run went. Written as the run starts and again as it ends; after a
    full disk only its essential keys may be there, so only three are required."""

    model_config = _OPEN
    status: Status
    experiment: str
    seed: int
    run_id: str | None = None
    host: str | None = None
    pid: int | None = None
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    wall_seconds: float | None = None
    error: str | None = None
    traceback: str | None = None
    device: str | None = None
    dtype: str | None = None
    threads: int | None = None
    executor: dict[str, Any] | None = None
    versions: dict[str, str] = {}
    argv: list[str] = []
    blocks_seen: list[str] = []
    warnings: list[str] = []
    n_logged: int | None = None
    children: dict[str, ChildMeta] = {}
    about: dict[str, dict[str, Any]] = {}


class SummaryFile(_Model):
    """``summary.json`` (or a showcase child's part of it, nested under the child's name):
    the numbers a run ends with, a function of config and seed only. Each variant's numbers,
    when there are any, are a table (``{"blocked": {"loglik": -3.4}, "unblocked": {...}}``);
    anything else is the experiment's own JSON (peers' numbers, counts, names)."""

    model_config = _Config(extra="allow")
    blocked: dict[str, Any] | None = None
    unblocked: dict[str, Any] | None = None


def summary_problem(data: Any) -> str | None:
    """What makes ``data`` not a summary (see :class:`SummaryFile`), or ``None``."""
    if not isinstance(data, dict):
        return f"a summary is a JSON object, got {type(data).__name__}"
    for variant in VARIANTS:
        if variant in data and not isinstance(data[variant], dict):
            return (f"{variant!r} must be a table of numbers by name, got "
                    f"{type(data[variant]).__name__}")
    return None


class RunConfigFile(_Model):
    """``config.toml``: the resolved config, runnable again; the readers need these keys."""

    model_config = _OPEN
    experiment: str
    seed: int
    params: dict[str, Any]
    disable_blocks: list[str] = []


class MetricsRow(_Model):
    """One line of ``metrics.jsonl``: the step and one number (or ``null``) per metric key."""

    model_config = _Config(strict=True, extra="allow")
    step: int

    @_after(mode="after")
    def _numbers(self) -> MetricsRow:
        for key, value in (self.model_extra or {}).items():
            if value is not None and not isinstance(value, (int, float)):  # bools are ints
                raise ValueError(f"metric {key[:80]!r} must be a number or null, got "
                                 f"{type(value).__name__}")
        return self


class TimingRecord(_Model):
    """A timing of a finding: the per-round ratios and the side of 1 it predicts."""

    model_config = _OPEN
    rounds: list[float]
    expect: Literal["above", "below"] | None = None


class FindingRecord(_Model):
    """One seed's finding (:class:`~toolkit.lab.runner.story.Finding` ``.to_dict()``)."""

    model_config = _OPEN
    text: str = ""
    verdict: bool | None = None
    topic: Literal["result", "cost"] = "result"
    basis: str = ""
    values: dict[str, Any] = {}
    seed_independent: bool = False
    need: float = _Field(1.0, gt=0, le=1)
    timing: TimingRecord | None = None
    key: str = ""


class VerdictRecord(FindingRecord):
    """A finding over the seeds of a run (:class:`~toolkit.lab.runner.verdicts.Verdict`
    ``.to_dict()``), with each seed's own finding in ``per_seed``."""

    seeds: list[int] = []
    held: int = 0
    predicts: bool | None = None
    per_seed: list[FindingRecord] = []


class FindingsFile(_Model):
    """``findings.json`` of a run or a seed group: the verdicts by section, and what went wrong
    on the way. A file written before verdicts were aggregated has no ``seeds``."""

    model_config = _OPEN
    seeds: list[int] | None = None
    findings: dict[str, list[VerdictRecord]] = {}
    problems: list[str] = []


class GroupFile(_Model):
    """``group.json`` of a seed group: its member runs (paths relative to the group's folder)
    and their seeds."""

    model_config = _OPEN
    experiment: str
    seeds: list[int]
    runs: list[str]
    kind: str = "seed group"
    created: str | None = None
    started: str | None = None
    ended: str | None = None
    run_seconds: list[float | None] = []
    wall_seconds: float | None = None

# ---------------------------------------------------------------------------------------------
# The metrics glossary: what each logged metric means
# ---------------------------------------------------------------------------------------------
# An experiment declares, next to what it logs, what each metric key means (its ``METRICS``
# hook, a tuple of :class:`MetricDoc`). The docs' glossary page is rendered from these
# declarations and a test checks them against the keys a quick run logs, so neither can drift.

import re  # noqa: E402  (this section stands on its own)

from pydantic import BaseModel, ConfigDict, Field, field_validator  # noqa: E402

__all__ += ["MetricDoc", "metric_doc_for"]

_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]+))?\}")


class MetricDoc(BaseModel):
    """What the metric keys matching one pattern mean.

    ``key`` is a metric key (:func:`metric_key`) in which ``{name}`` stands for any text
    within one part of the key, ``{name:a|b}`` for one of the listed words, and ``{variant}``
    for either variant (``blocked`` or ``unblocked``).

    >>> doc = MetricDoc(key="{variant}/train/loss", meaning="training loss", unit="nats")
    >>> doc.matches("unblocked/train/loss"), doc.matches("reference/train/loss")
    (True, False)
    >>> MetricDoc(key="{variant}/grad_{case:random|tied}/err", meaning="error").matches(
    ...     "blocked/grad_tied/err")
    True
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="the key pattern: `{variant}/train/loss`, "
                                 "`sklearn/{split:train|iris}/loglik`")
    meaning: str = Field(min_length=1, description="what the number is, in one sentence")
    unit: str = Field("", description="its unit in words (`nats per sample`, `seconds`); "
                                      "empty for a pure number (a ratio, a cosine, a count)")

    @field_validator("key")
    @classmethod
    def _key_is_a_pattern(cls, key: str) -> str:
        parts = key.split("/")
        if len(parts) < 2 or any(not p for p in parts):
            raise ValueError(f"a metric key pattern has non-empty parts joined by '/' "
                             f"('{{variant}}/train/loss'), got {key!r}")
        if _PLACEHOLDER.sub("", key).count("{") or _PLACEHOLDER.sub("", key).count("}"):
            raise ValueError(f"braces in {key!r} must read {{name}} or {{name:a|b}}")
        return key

    @property
    def pattern(self) -> re.Pattern[str]:
        """The regular expression of :attr:`key` (a whole key must match)."""
        out, at = [], 0
        for m in _PLACEHOLDER.finditer(self.key):
            out.append(re.escape(self.key[at:m.start()]))
            name, choices = m.group(1), m.group(2)
            if choices is None and name == "variant":
                choices = "|".join(VARIANTS)
            out.append("(?:" + "|".join(map(re.escape, choices.split("|"))) + ")" if choices
                       else "[^/]+?")
            at = m.end()
        out.append(re.escape(self.key[at:]))
        return re.compile("".join(out))

    def matches(self, key: str) -> bool:
        """Whether the logged metric ``key`` is one this declaration describes."""
        return self.pattern.fullmatch(key) is not None


def metric_doc_for(key: str, docs: tuple[MetricDoc, ...] | list[MetricDoc]) -> MetricDoc | None:
    """The declaration among ``docs`` that describes ``key`` (the first that matches), or
    ``None``.

    >>> docs = (MetricDoc(key="{variant}/train/loss", meaning="training loss"),)
    >>> metric_doc_for("blocked/train/loss", docs).meaning, metric_doc_for("x/y", docs)
    ('training loss', None)
    """
    return next((doc for doc in docs if doc.matches(key)), None)
