"""Run configurations: TOML files validated by pydantic, dotted overrides, sweeps and seeds.

A config file holds the common keys and the experiment's own ``[params]``::

    experiment = "em_gmm"
    seed = 0                    # or: seeds = [0, 1, 2]   (replicates)
    device = "auto"             # auto | cpu | cuda | cuda:N
    dtype = "float64"           # float16 | bfloat16 | float32 | float64
    disable_blocks = ["em.*"]   # patterns switched off in the "unblocked" variant
    threads = 1                 # torch's intra-op threads per run (results may depend on it)
    output_dir = "results"

    [executor]                  # optional: where the runs run (the CLI's options win)
    kind = "local"              # local (process pool) | dask
    address = "tls://host:8786" # dask scheduler; without it a LocalCluster is started
    tls_ca_file = "ca.pem"      # with tls_cert and tls_key (or dask's distributed.comm.tls.*)
    workers = 2

    [params]
    n_iter = 100

    [sweep]                     # optional grid: every combination is one run (per seed)
    params.n_components = [2, 3, 4]

What a config *is* lives here: the file's common keys (:class:`FileConfig`), one resolved
run (:class:`RunConfig`, what ``config.toml`` of a run directory holds), the executor table,
dotted overrides and seed lists. Turning a file (or Python values) into validated runs is
:mod:`toolkit.lab.runner.planning`'s job: :func:`~toolkit.lab.runner.planning.plan` validates each run
once and hands back :class:`~toolkit.lab.runner.planning.RunSpec` objects. Every mistake raises
:class:`~toolkit.lab.runner.errors.ConfigError`, whose message is one line naming the file, the
key path and the fix.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkit._utils.array_validation import resolve_device as _resolve_device
from toolkit.lab.runner import tomlio
from toolkit.lab.runner.errors import ConfigError

__all__ = ["DTYPES", "EXECUTORS", "MAX_SEED", "SWEEPABLE", "ExecutorSpec", "FileConfig",
           "RunConfig", "Seeds", "parse_override", "parse_seeds", "resolve_device", "set_path",
           "split_key"]

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_KEY_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
#: the common keys a ``[sweep]`` may vary (besides ``params.<name>``)
SWEEPABLE = ("device", "dtype", "disable_blocks", "threads")
EXECUTORS = ("local", "dask")
#: the largest seed: what numpy's and torch's generators take (a signed 64-bit integer)
MAX_SEED = 2**63 - 1


class ExecutorSpec(BaseModel):
    """Where the runs of a config run: the ``[executor]`` table (the CLI's options win)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["local", "dask"] = Field(
        "local", description="local: a pool of processes on this machine; dask: a Dask cluster")
    address: str | None = Field(
        None, description="dask scheduler address: tls://HOST:PORT, or tcp://HOST:PORT on "
                          "loopback only (none: start a LocalCluster on loopback)")
    workers: int = Field(1, ge=1, description="processes of the local pool or LocalCluster")
    tls_ca_file: str | None = Field(
        None, description="CA certificate of the cluster (PEM), for a tls:// address")
    tls_cert: str | None = Field(
        None, description="this client's certificate (PEM), signed by that CA")
    tls_key: str | None = Field(
        None, description="this client's private key (PEM; none: it is in tls_cert)")
    insecure: bool = Field(
        False, description="accept a plain tcp:// address that is not loopback (anyone who "
                           "reaches it can run code on the workers)")
    dashboard: bool = Field(
        False, description="serve the LocalCluster's dashboard on loopback and print its link")
    connect_timeout: float = Field(
        10.0, gt=0, le=600, description="seconds to reach the scheduler and hear Dask answer")


class FileConfig(BaseModel):
    """The common keys of a config file (``[params]`` and ``[sweep]`` are read as tables; the
    experiment's ``Params`` validates the first)."""

    model_config = ConfigDict(extra="forbid")

    experiment: str = Field(description="name of a module in experiments/ (see `toolkit list`)")
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="random seed of a single run")
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = Field(
        None, min_length=1, description="seeds of replicate runs")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    dtype: Literal["float16", "bfloat16", "float32", "float64"] = "float32"
    disable_blocks: list[str] = Field(default_factory=lambda: ["*"],
                                      description="fnmatch patterns of blocks to switch off")
    threads: int = Field(1, ge=1, le=1024,
                         description="torch intra-op threads of each run (part of the result: "
                                     "reductions may round differently with more threads)")
    output_dir: str = Field("results", min_length=1, description="root of the run directories")
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, Any] = Field(default_factory=dict)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec,
                                   description="where the runs run (see [executor])")


    @field_validator("disable_blocks", mode="before")
    @classmethod
    def _one_pattern(cls, value: Any) -> Any:
        # `--set disable_blocks=em.*` gives a string: one pattern
        return [value] if isinstance(value, str) else value

    @field_validator("executor", mode="before")
    @classmethod
    def _no_insecure(cls, value: Any) -> Any:
        # Only the command line lowers security: a config file, perhaps from someone else,
        # never switches on plain TCP to a remote scheduler by itself.
        if isinstance(value, dict) and "insecure" in value:
            raise ValueError("`insecure` is not a config key: only the command line's "
                             "--insecure accepts a plain tcp:// scheduler off this machine")
        return value

    @field_validator("output_dir")
    @classmethod
    def _a_path(cls, value: str) -> str:
        if "\0" in value:
            raise ValueError("a path cannot hold a NUL byte (\\x00)")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if not _DEVICE_RE.match(value):
            raise ValueError(f"unknown device {value!r}")
        return value


@dataclass(frozen=True)
class RunConfig:
    """One fully resolved and validated run: what ``config.toml`` of a run directory holds."""

    experiment: str
    params: dict[str, Any]
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    disable_blocks: tuple[str, ...] = ("*",)
    output_dir: str = "results"
    threads: int = 1
    source: str = field(default="<python>", compare=False)
    sweep_point: dict[str, Any] = field(default_factory=dict, compare=False)
    executor: ExecutorSpec = field(default_factory=ExecutorSpec, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain nested dict (what ``config.toml`` contains)."""
        return {
            "experiment": self.experiment,
            "seed": self.seed,
            "device": self.device,
            "dtype": self.dtype,
            "disable_blocks": list(self.disable_blocks),
            "threads": self.threads,
            "output_dir": self.output_dir,
            "params": copy.deepcopy(self.params),
        }

    def to_toml(self) -> str:
        header = f"resolved config of a {self.experiment} run (from {self.source})"
        return tomlio.dumps(self.to_dict(), header=header)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


def resolve_device(device: str, *, source: str = "<python>", key: str = "device"
                   ) -> torch.device:
    """The config's ``device`` as a ``torch.device`` (``auto``: CUDA when available, else CPU).

    The meaning is :func:`toolkit._utils.array_validation.resolve_device`'s; a device that does not exist
    here becomes a :class:`ConfigError` naming the file and key.
    """
    if not isinstance(device, str) or not _DEVICE_RE.match(device):
        raise ConfigError(source, key, f"unknown device {device!r}",
                          'use "auto", "cpu", "cuda" or "cuda:N"')
    try:
        return _resolve_device(device, where=key)
    except ValueError as err:
        problem = str(err).removeprefix(f"{key}: ").split("; use")[0]
        raise ConfigError(source, key, problem, 'use device = "cpu" or "auto"') from None


# ----------------------------------------------------------------------------- overrides


def split_key(key: str, source: str) -> list[str]:
    """The parts of a dotted key; ConfigError when it is not one."""
    parts = key.split(".")
    if not key or not all(_KEY_PART.match(p) for p in parts):
        raise ConfigError(source, key or "''", "not a valid dotted key",
                          "use letters, digits and '_' separated by dots, e.g. "
                          "params.n_steps=10")
    return parts


def parse_override(text: str) -> tuple[str, Any]:
    """``"params.n_steps=10"`` → ``("params.n_steps", 10)``.

    The value is a TOML literal (``10``, ``1e-3``, ``true``, ``[1, 2]``, ``"a b"``); a plain
    word that is not one (``cpu``, ``em.*``) is taken as a string.
    """
    source = f"--set {text}"
    if "=" not in text:
        raise ConfigError(source, "", "expected KEY=VALUE",
                          "write it as --set params.n_steps=10 (a dotted key, '=', a TOML value)")
    key, _, raw = text.partition("=")
    key = key.strip()
    raw = raw.strip()
    split_key(key, source)
    if not raw:
        raise ConfigError(source, key, "missing value after '='",
                          "give a TOML value, e.g. 10, 0.5, true, \"text\" or [1, 2]")
    try:
        value = tomlio.parse_literal(raw)
    except ValueError:
        raise ConfigError(source, key, f"{raw!r} is not a TOML value",
                          "quote strings (\"text\") and close lists ([1, 2])") from None
    return key, value


class Seeds(Sequence[int]):
    """Seeds given as ranges (``--seeds 0-4,7``): counted without being listed, so that a
    typo such as ``0-100000000`` is refused by its count before a list is made."""

    def __init__(self, parts: Sequence[range]) -> None:
        self.parts = tuple(parts)

    def __len__(self) -> int:
        return sum(len(r) for r in self.parts)

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        if index < 0:
            index += len(self)
        for r in self.parts:
            if 0 <= index < len(r):
                return r[index]
            index -= len(r)
        raise IndexError("seed index out of range")

    def __iter__(self) -> Iterator[int]:
        for r in self.parts:
            yield from r

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Seeds):
            return self.parts == other.parts or list(self) == list(other)
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return ",".join(f"{r.start}-{r.stop - 1}" if len(r) > 1 else str(r.start)
                        for r in self.parts)


def parse_seeds(text: str, *, source: str = "--seeds") -> Seeds:
    """``"0,1,2"`` or ``"0-4"`` → the seeds, each in ``0..MAX_SEED`` (counted, not listed)."""
    parts: list[range] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if re.fullmatch(r"\d+-\d+", part):
                lo, hi = (int(x) for x in part.split("-"))
                if hi < lo:
                    raise ValueError(part)
                parts.append(range(lo, hi + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError(part)
                parts.append(range(value, value + 1))
    except ValueError:
        raise ConfigError(source, "", f"{text!r} is not a list of seeds",
                          "use non-negative integers separated by commas (0,1,2) or a range "
                          "(0-4)") from None
    top = max(r[-1] for r in parts)
    if top > MAX_SEED:
        raise ConfigError(source, "", f"seed {top} is above {MAX_SEED} (2^63 - 1), the largest "
                          "numpy and torch accept", "use smaller seeds")
    return Seeds(parts)


def set_path(data: dict[str, Any], parts: list[str], value: Any, source: str) -> None:
    """Set ``data[parts[0]][parts[1]]... = value``, making tables on the way; ConfigError
    (naming ``source``) when a part is already a value."""
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            path = ".".join(parts[: i + 1])
            raise ConfigError(source, path, f"is a value ({child!r}), not a table",
                              f"set {path}=... directly")
        node = child
    node[parts[-1]] = value
