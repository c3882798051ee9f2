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

:func:`load_config` turns a file (+ ``--set`` overrides) into a list of :class:`RunConfig`, one
per run, each fully validated before anything is written. Every mistake raises
:class:`~toolkit.lab.runner.errors.ConfigError`, whose message is one line naming the file, the key
path and the fix.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolkit._utils.array_validation import resolve_device as _resolve_device
from toolkit.lab.runner import tomlio
from toolkit.lab.runner.config_errors import Sources, pydantic_error
from toolkit.lab.runner.errors import ConfigError, ExperimentLoadError, suggest

__all__ = ["DTYPES", "EXECUTORS", "ExecutorSpec", "RunConfig", "load_config", "make_config",
           "parse_override", "parse_seeds", "resolve_device"]

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_KEY_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_SWEEPABLE = ("device", "dtype", "disable_blocks", "threads")
EXECUTORS = ("local", "dask")


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


class _FileConfig(BaseModel):
    """The common keys of a config file."""

    model_config = ConfigDict(extra="forbid")

    experiment: str = Field(description="name of a module in experiments/ (see `toolkit list`)")
    seed: int | None = Field(None, ge=0, description="random seed of a single run")
    seeds: list[int] | None = Field(None, min_length=1, description="seeds of replicate runs")
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


def _split_key(key: str, source: str) -> list[str]:
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
    _split_key(key, source)
    if not raw:
        raise ConfigError(source, key, "missing value after '='",
                          "give a TOML value, e.g. 10, 0.5, true, \"text\" or [1, 2]")
    try:
        value = tomlio.parse_literal(raw)
    except ValueError:
        raise ConfigError(source, key, f"{raw!r} is not a TOML value",
                          "quote strings (\"text\") and close lists ([1, 2])") from None
    return key, value


def parse_seeds(text: str, *, source: str = "--seeds") -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` → a list of non-negative seeds."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if re.match(r"^\d+-\d+$", part):
                lo, hi = (int(x) for x in part.split("-"))
                if hi < lo:
                    raise ValueError(part)
                seeds.extend(range(lo, hi + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError(part)
                seeds.append(value)
    except ValueError:
        raise ConfigError(source, "", f"{text!r} is not a list of seeds",
                          "use non-negative integers separated by commas (0,1,2) or a range "
                          "(0-4)") from None
    return seeds


def _set_path(data: dict[str, Any], parts: list[str], value: Any, source: str) -> None:
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


# ----------------------------------------------------------------------------- validation

def _misplaced_param(err: ValidationError, raw: Mapping[str, Any], sources: Sources) -> None:
    """An unknown top-level key that is a parameter of the experiment: suggest ``params.<key>``."""
    first = err.errors()[0]
    if first["type"] != "extra_forbidden" or len(first["loc"]) != 1:
        return
    key = str(first["loc"][0])
    name = raw.get("experiment")
    if not isinstance(name, str):
        return
    try:
        fields = _load_experiment(name, sources("experiment")).Params.model_fields
    except ConfigError:
        return
    if key in fields:
        raise ConfigError(sources(key), key, "unknown key",
                          f"did you mean params.{key}? ({key} is a parameter of {name}; "
                          f"write --set params.{key}=... or put it under [params])") from None


def _common(raw: Mapping[str, Any], sources: Sources) -> _FileConfig:
    """The common keys of ``raw`` validated; a ConfigError naming the first mistake."""
    try:
        return _FileConfig.model_validate(raw)
    except ValidationError as err:
        _misplaced_param(err, raw, sources)
        raise pydantic_error(err, _FileConfig, prefix="", source_of=sources) from None


def _load_experiment(name: str, source: str):
    from toolkit.lab.runner.registry import discover, load_experiment

    try:
        return load_experiment(name)
    except KeyError:
        hint = suggest(name, discover())
        fix = f"{hint} (`toolkit list` shows all)" if hint else "`toolkit list` shows the experiments"
        raise ConfigError(source, "experiment", f"unknown experiment {name!r}", fix) from None
    except ExperimentLoadError as err:
        raise ConfigError(source, "experiment", f"experiment {name!r} cannot be loaded: "
                          f"{err.problem}", "fix that module (see `toolkit list`)") from None


def _validate_params(experiment: Any, raw: Mapping[str, Any], sources: Sources
                     ) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(sources("params"), "params", f"must be a table, got {raw!r}",
                          "write the experiment's keys under [params]")
    try:
        model = experiment.Params.model_validate(dict(raw))
    except ValidationError as err:
        raise pydantic_error(err, experiment.Params, prefix="params",
                              source_of=sources) from None
    return model.model_dump(mode="json")


def _runs(common: _FileConfig, experiment: Any, params: Any, seeds: Sequence[int],
          sources: Sources, **where: Any) -> list[RunConfig]:
    """One :class:`RunConfig` per seed, once the experiment accepts ``params`` and the device
    exists here; ``where``: ``source``, ``sweep_point``, ``executor``."""
    values = _validate_params(experiment, params, sources)
    resolve_device(common.device, source=sources("device"))
    return [RunConfig(experiment=common.experiment, params=values, seed=int(seed),
                      device=common.device, dtype=common.dtype,
                      disable_blocks=tuple(common.disable_blocks), threads=common.threads,
                      output_dir=common.output_dir, **where) for seed in seeds]


def make_config(experiment: str, params: Mapping[str, Any] | BaseModel | None = None, *,
                seed: int = 0, device: str = "auto", dtype: str = "float32",
                disable_blocks: Sequence[str] = ("*",), output_dir: str | Path = "results",
                threads: int = 1, source: str = "<python>", loaded: Any = None) -> RunConfig:
    """Validate one run given in Python (the same checks as a config file).

    ``loaded``: the :class:`~toolkit.lab.runner.Experiment` itself, for one that is not registered.
    """
    sources = Sources(source, [])
    common = _common({"experiment": experiment, "seed": seed, "device": device, "dtype": dtype,
                      "disable_blocks": list(disable_blocks), "threads": threads,
                      "output_dir": str(output_dir)}, sources)
    exp = loaded if loaded is not None else _load_experiment(common.experiment, source)
    if isinstance(params, BaseModel):
        params = params.model_dump(mode="json")
    return _runs(common, exp, params or {}, [seed], sources, source=source)[0]


# ----------------------------------------------------------------------------- config files


def _read(path: Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict; a ConfigError saying why it cannot be read."""
    source = str(path)
    if not path.exists():
        close = ""
        with contextlib.suppress(Exception):  # the hint is optional
            from toolkit.lab.runner.registry import config_files

            close = suggest(path.name, [p.name for p in config_files()])
        raise ConfigError(source, "", "no such file", "check the path; `toolkit list` shows the "
                          f"configs{f' ({close})' if close else ''}")
    if path.is_dir():
        raise ConfigError(source, "", "is a directory, not a config file",
                          "give a .toml file such as configs/showcase.toml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(source, "", f"cannot be read ({err})",
                          "check the file's permissions and encoding (UTF-8)") from None
    try:
        return tomlio.loads(text)
    except tomlio.TOMLDecodeError as err:
        raise ConfigError(source, "", f"invalid TOML: {err}",
                          "fix the syntax at that line and column") from None


def _override(raw: dict[str, Any], overrides: Sequence[str], path: str) -> Sources:
    """Apply ``--set`` overrides to ``raw`` in order (all parsed first); where each key came from."""
    parsed = [(parse_override(text), text) for text in overrides]
    for (key, value), text in parsed:
        # an overridden seed/seeds replaces the other one of the file
        if key in ("seed", "seeds"):
            raw.pop("seeds" if key == "seed" else "seed", None)
        _set_path(raw, key.split("."), value, f"--set {text}")
    return Sources(path, [(key, text) for (key, _), text in parsed])


def _seeds(common: _FileConfig, seeds: Sequence[int] | None, sources: Sources) -> list[int]:
    """The replicate seeds: ``--seeds``, else the file's ``seeds``, else its ``seed`` (or 0)."""
    if common.seed is not None and common.seeds is not None:
        raise ConfigError(sources("seeds"), "seeds", "both `seed` and `seeds` are set",
                          "keep one: seed = 0 for one run, seeds = [0, 1, 2] for replicates")
    if seeds is not None:
        run_seeds = list(seeds)
        if not run_seeds or any(s < 0 for s in run_seeds):
            raise ConfigError("--seeds", "", f"{run_seeds} is not a list of seeds",
                              "give non-negative integers such as 0,1,2")
    elif common.seeds is not None:
        run_seeds = list(common.seeds)
        if any(s < 0 for s in run_seeds):
            raise ConfigError(sources("seeds"), "seeds", f"seeds must be >= 0, got {run_seeds}",
                              "use non-negative integers")
    else:
        run_seeds = [common.seed if common.seed is not None else 0]
    if len(set(run_seeds)) != len(run_seeds):
        raise ConfigError(sources("seeds"), "seeds", f"repeated seeds in {run_seeds}",
                          "list each seed once")
    return run_seeds


def _grid(sweep: Mapping[str, Any], fields: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The ``[sweep]`` table as dotted key → values, every key sweepable and known."""
    grid = tomlio.flatten(sweep)
    for key, values in grid.items():
        if not (key.startswith("params.") or key in _SWEEPABLE):
            hint = suggest(key, [*_SWEEPABLE, *(f"params.{f}" for f in fields)])
            raise ConfigError(source, f"sweep.{key}", "cannot be swept",
                              (hint + " " if hint else "") + "sweep params.<name>, device, dtype "
                              "or disable_blocks; use `seeds = [...]` for replicates")
        if key.startswith("params.") and key.split(".")[1] not in fields:
            hint = suggest(key.split(".")[1], fields)
            raise ConfigError(source, f"sweep.{key}", "unknown key",
                              f"{hint} (valid keys: {', '.join(fields)})"
                              if hint else f"valid keys: {', '.join(fields)}")
        if not isinstance(values, list) or not values:
            raise ConfigError(source, f"sweep.{key}", f"must be a non-empty list, got {values!r}",
                              f"write {key} = [value1, value2]")
    return grid


def _sweep_points(raw: Mapping[str, Any], grid: Mapping[str, list[Any]], source: str
                  ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each point of the grid (last key fastest) with the file's keys, the point's values set."""
    base = {k: v for k, v in raw.items() if k not in ("sweep", "seeds", "seed", "executor")}
    for combo in itertools.product(*grid.values()):
        point = dict(zip(grid, combo))
        member = copy.deepcopy(base)
        member.setdefault("params", {})
        for key, value in point.items():
            _set_path(member, key.split("."), value, f"{source} [sweep]")
        yield point, member


def load_config(path: str | Path, overrides: Sequence[str] = (), *,
                seeds: Sequence[int] | None = None, output_dir: str | Path | None = None
                ) -> list[RunConfig]:
    """Read, override, validate and expand a config file into one :class:`RunConfig` per run.

    Args:
        path: the TOML file.
        overrides: ``"dotted.key=VALUE"`` strings (``--set``), applied in order before validation.
        seeds: replicate seeds that replace ``seed``/``seeds`` of the file (``--seeds``).
        output_dir: replaces ``output_dir`` of the file (``--out``).

    Returns:
        The runs: the ``[sweep]`` grid (in the order the keys appear, last key fastest) times the
        seeds. Everything is validated before this returns; nothing is written.
    """
    path = Path(path)
    source = str(path)
    raw = _read(path)
    sources = _override(raw, overrides, source)
    if output_dir is not None:
        raw["output_dir"] = str(output_dir)
    common = _common(raw, sources)
    run_seeds = _seeds(common, seeds, sources)
    exp = _load_experiment(common.experiment, sources("experiment"))
    grid = _grid(common.sweep, exp.Params.model_fields, source)
    sources.sweep = set(grid)
    runs: list[RunConfig] = []
    for point, member in _sweep_points(raw, grid, source):
        m = _common(member, sources)
        runs += _runs(m, exp, m.params, run_seeds, sources, source=source, sweep_point=point,
                      executor=common.executor)
    return runs
