"""The results format: a pydantic model per file a run writes in
``<output_dir>/<experiment>/<run_id>/``, which the writers dump and the readers check:
``config.toml`` (:class:`RunConfig`), ``meta.json`` (:class:`RunMeta`, ``complete`` written
last), ``metrics.jsonl`` (a :class:`MetricsRow` per logged step), ``summary.json``
(:class:`SummaryFile`), ``costs.json``, ``findings.json`` (:class:`FindingsFile`),
``artifacts/`` and the report; a seed group writes ``group.json`` (:class:`GroupFile`). A
metric key is ``"<variant>/<group>/<name>"``; :class:`MetricDoc` says what keys mean.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from typing import Annotated, Any, Final, Literal

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from toolkit.lab.results.findings import Verdict

#: with the blocks: the method as published
BLOCKED: Final = "blocked"
#: the same code inside ``disable_blocks``: the gradient flows where the blocks cut it
UNBLOCKED: Final = "unblocked"
#: both, in the order every table and figure shows them
VARIANTS: Final = (BLOCKED, UNBLOCKED)
#: The largest seed: what numpy's and torch's generators take (a signed 64-bit integer).
MAX_SEED: Final = 2**63 - 1
#: The deepest nesting a config or results file may hold: beyond any writer, within any stack.
MAX_DEPTH: Final = 100
#: What ``meta.json`` says (``abandoned``, a run saying ``running`` whose lock nobody holds, is
#: decided when it is read)
Status = Literal["running", "complete", "failed", "interrupted"]

Seed = Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]
_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$"  # one folder name: no '/', no '..' at the start


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("a path cannot hold a NUL byte (\\x00)")
    return value


PathText = Annotated[str, AfterValidator(_no_nul)]


def metric_key(*parts: str) -> str:
    """``"blocked/train/loss"`` from ``(BLOCKED, "train", "loss")``; parts non-empty, no ``/``."""
    if not parts or any(not p or "/" in p for p in parts):
        raise ValueError(f"metric_key: parts must be non-empty and without '/', got {parts!r}")
    return "/".join(parts)


def flatten(tree: Any, prefix: str = "", *, keep_empty: bool = False) -> dict[str, Any]:
    """Nested tables as TOML's dotted keys: ``{"a": {"b": 1}}`` → ``{"a.b": 1}``; empty tables
    left out, or kept as leaves with ``keep_empty`` (a report shows them)."""
    if not isinstance(tree, dict) or (keep_empty and prefix and not tree):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key),
                           keep_empty=keep_empty))
    return out


def _without_none(value: Any, at: str = "") -> Any:
    """``value`` without the ``None`` of its tables (in a list: ``ValueError``)."""
    if isinstance(value, dict):
        return {k: _without_none(v, f"{at}.{k}" if at else str(k)) for k, v in value.items()
                if v is not None}
    if isinstance(value, list):
        if any(v is None for v in value):
            raise ValueError(f"{at}: TOML cannot hold null inside a list, got {value!r}")
        return [_without_none(v, at) for v in value]
    return value


def toml_text(model: BaseModel, header: str = "") -> str:
    """A config model as TOML, ``None`` left out (see :func:`_without_none`)."""
    lines = "".join(f"# {line}\n" for line in header.splitlines())
    return lines + tomli_w.dumps(_without_none(model.model_dump(mode="json")))


class ExecutorConfig(BaseModel):
    """Where the runs of a config run: its ``[executor]`` table (the command line's options
    win). Every Dask connection is TLS with mutual certificates; plain ``tcp://`` is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["local", "dask"] = Field(
        "local", description="local: processes on this machine; dask: a Dask cluster")
    workers: StrictInt = Field(1, ge=1, le=1024, description="processes of the local pool or "
                                                              "of the Dask LocalCluster")
    address: str | None = Field(None, description="a Dask scheduler, tls://HOST:PORT (none: a "
                                                  "LocalCluster on loopback, TLS too)")
    tls_ca_file: str | None = Field(None, description="CA certificate of the cluster (PEM)")
    tls_cert: str | None = Field(None, description="this client's certificate (PEM)")
    tls_key: str | None = Field(None, description="this client's key (PEM; none: in tls_cert)")
    dashboard: bool = Field(False, description="serve the LocalCluster's dashboard on loopback")
    connect_timeout: float = Field(10.0, gt=0, le=600, description="seconds to reach the "
                                                                   "scheduler")

    @field_validator("address")
    @classmethod
    def _tls_only(cls, address: str | None) -> str | None:
        if address is not None and not re.fullmatch(r"tls://(\[[0-9A-Fa-f:.]+\]|[^/:\s]+):\d+",
                                                    address):
            raise ValueError("a scheduler is reached over TLS only: give tls://HOST:PORT (plain "
                             "tcp:// lets anyone who reaches it run code on the workers)")
        return address


class RunConfig(BaseModel):
    """One run, resolved (``config.toml``); :meth:`identity` recognises it read back."""

    # inf and nan kept as numbers (TOML holds them); pydantic's default writes them as null
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    experiment: str = Field(pattern=_NAME, max_length=200,
                            description="an experiment's name (see `toolkit list`)")
    seed: Seed = Field(0, description="random seed of the run")
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d{1,4})?)$",
                        description="auto | cpu | cuda | cuda:N")
    dtype: Literal["float16", "bfloat16", "float32", "float64"] = "float32"
    disable_blocks: tuple[str, ...] = Field(
        ("*",), description="fnmatch patterns of the blocks the unblocked variant switches off")
    threads: StrictInt = Field(1, ge=1, le=1024, description="torch's intra-op threads of the "
                               "run (part of the result: reductions may round differently)")
    output_dir: PathText = Field("results", min_length=1, description="root of the run "
                                                                       "directories")
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("disable_blocks", mode="before")
    @classmethod
    def _one_pattern(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # `--set disable_blocks=em.*`

    def identity(self) -> str:
        """SHA-256 of the config without ``output_dir`` (a moved folder keeps it)."""
        data = _without_none(self.model_dump(mode="json", exclude={"output_dir"}))
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_toml(self, source: str = "<python>") -> str:
        return toml_text(self, f"resolved config of a {self.experiment} run (from {source})")

    @classmethod
    def from_toml(cls, text: str) -> RunConfig:
        return cls.model_validate(tomllib.loads(text))


class ConfigFile(RunConfig):
    """A config file: a run's keys, ``seeds``, a ``[sweep]`` grid, its ``[executor]``."""

    seed: Seed | None = None  # type: ignore[assignment]
    seeds: list[Seed] | None = Field(None, min_length=1, description="seeds of replicate runs")
    sweep: dict[str, Any] = Field(default_factory=dict, description="lists of values by key")
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    tensorboard: PathText | None = Field(
        None, min_length=1, description="folder of TensorBoard event files (live curves; needs "
        "the tensorboard extra); not part of a run's config")

    @model_validator(mode="after")
    def _one_of_seed_and_seeds(self) -> ConfigFile:
        if self.seed is not None and self.seeds is not None:
            raise ValueError("both `seed` and `seeds` are set; keep one: seed = 0 for one run, "
                             "seeds = [0, 1, 2] for replicates")
        return self


_OPEN = ConfigDict(strict=True, extra="allow")  # what a reader relies on; newer keys are kept
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ChildMeta(BaseModel):
    """``meta.json``'s ``children.<name>``: a part of a composite run (the showcase)."""

    model_config = _OPEN
    experiment: str
    params: dict[str, Any] = {}
    dtype: str | None = None
    disable_blocks: list[str] = []


class RunMeta(BaseModel):
    """``meta.json``: how a run went; ``complete`` is written after every other file."""

    model_config = _OPEN
    status: Status
    experiment: str
    seed: Seed
    run_id: str | None = None
    host: str | None = None
    pid: int | None = Field(None, ge=0, le=2**31 - 1)
    started: str | None = None
    ended: str | None = None
    duration_s: Seconds | None = None
    finish_s: Seconds | None = None
    wall_seconds: Seconds | None = None
    device: str | None = None
    dtype: str | None = None
    threads: int | None = Field(None, ge=1, le=1024)
    executor: dict[str, Any] = {}
    disable_blocks: list[str] = []
    sweep_point: dict[str, Any] = {}
    tensorboard: str | None = None  # the folder of its TensorBoard event files, if any
    argv: list[str] = []
    versions: dict[str, str] = {}
    n_logged: int = Field(0, ge=0, le=2**53)
    blocks_seen: list[str] = []
    children: dict[str, ChildMeta] = {}
    about: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    error: str | None = None
    traceback: str | None = None
    interrupted_by: str | None = None
    finish_error: str | None = None
    #: the hash of what was asked for (config, sweep point, seed, code): what --resume finds
    request: str | None = None


class MetricsRow(BaseModel):
    """One line of ``metrics.jsonl``: the step and one number (or ``null``) per metric key."""

    model_config = ConfigDict(strict=True, extra="allow")
    __pydantic_extra__: dict[str, float | bool | None]
    step: int = Field(ge=-(2**63), le=2**63 - 1)


def shape_problem(model: type[BaseModel], err: ValidationError) -> str:
    """Why data is not a ``model``: the first field that does not fit, what came."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    got = "" if first["type"] == "missing" else f", got {type(first['input']).__name__}"
    what = f"{where!r}: {first['msg']}{got}" if where else first["msg"] + got
    return f"{what[:300]} (the {model.__name__} shape of the results format)"


class SummaryFile(BaseModel):
    """``summary.json`` (or a child's part): each variant's numbers a table."""

    model_config = ConfigDict(extra="allow")
    blocked: dict[str, Any] = {}
    unblocked: dict[str, Any] = {}


def summary_problem(data: Any) -> str | None:
    """What makes ``data`` not a :class:`SummaryFile`, or ``None``."""
    try:
        SummaryFile.model_validate(data)
    except ValidationError as err:
        return shape_problem(SummaryFile, err)
    return None


class FindingsFile(BaseModel):
    """``findings.json``: the verdicts by section over ``seeds``, and what went wrong."""

    model_config = ConfigDict(extra="forbid")
    seeds: list[Seed] = Field(min_length=1)
    findings: dict[str, list[Verdict]] = {}
    problems: list[str] = []


class GroupFile(BaseModel):
    """``group.json``: a seed group's member runs (beside it, ``../<run_id>``) and seeds."""

    model_config = _OPEN
    kind: Literal["seed group"] = "seed group"
    experiment: str
    seeds: list[Seed] = Field(min_length=1)
    runs: list[Annotated[str, Field(pattern=r"^\.\./[A-Za-z0-9_][A-Za-z0-9_.\-]*$")]]
    created: str | None = None
    started: str | None = None
    ended: str | None = None
    run_seconds: list[Seconds | None] = []
    wall_seconds: Seconds | None = None

    @model_validator(mode="after")
    def _a_run_per_seed(self) -> GroupFile:
        if len(self.runs) != len(self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"a group holds one run per seed, got {len(self.runs)} runs for "
                             f"the seeds {self.seeds}")
        return self


_PLACEHOLDER = r"\{(\w+)(?::([^{}/]+))?\}"
_PART = rf"(?:[^/{{}}]|{_PLACEHOLDER})+"


class MetricDoc(BaseModel):
    """What the metric keys matching one pattern mean (an experiment's ``METRICS``): in
    ``key``, ``{name}`` stands for any text within one part, ``{name:a|b}`` for one of the
    words, ``{variant}`` for either variant."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(pattern=rf"^{_PART}(?:/{_PART})+$", description="the key pattern: "
                     "non-empty parts joined by '/', braces as {name} or {name:a|b}")
    meaning: str = Field(min_length=1, description="what the number is, in one sentence")
    unit: str = Field("", description="its unit in words; empty for a pure number")

    @property
    def pattern(self) -> re.Pattern[str]:
        """The regular expression of :attr:`key` (a whole key must match)."""
        parts = re.split(_PLACEHOLDER, self.key)  # text, name, choices, text, ...
        out = re.escape(parts[0])
        for name, choices, text in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            choices = choices or ("|".join(VARIANTS) if name == "variant" else None)
            out += (f"(?:{'|'.join(map(re.escape, choices.split('|')))})" if choices
                    else "[^/]+?") + re.escape(text)
        return re.compile(out)

    def matches(self, key: str) -> bool:
        return self.pattern.fullmatch(key) is not None


def metric_doc_for(key: str, docs: tuple[MetricDoc, ...] | list[MetricDoc]) -> MetricDoc | None:
    """The first declaration among ``docs`` that describes ``key``, or ``None``."""
    return next((doc for doc in docs if doc.matches(key)), None)
