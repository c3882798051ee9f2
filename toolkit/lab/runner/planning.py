"""Planning runs: a config file, or values given in Python, become runs validated once.

:func:`plan` reads a TOML file, applies the ``--set`` overrides, checks the common keys, counts
the runs (the ``[sweep]`` grid times the seeds) before making any, and validates the
experiment's ``Params`` once per grid point. It returns one :class:`RunSpec` per run: the
resolved config (what ``config.toml`` will hold), the experiment, the validated ``Params``
object and the device. :func:`plan_one` does the same for one run given in Python.
:func:`~toolkit.lab.runner.run.execute` runs a spec as it is: nothing downstream validates the
parameters again, nor resolves the device again in the same process.

:func:`load_config` and :func:`make_config` are the same planning, returning only the configs.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ValidationError

from toolkit.lab.runner import tomlio
from toolkit.lab.runner.config import (
    SWEEPABLE,
    ExecutorSpec,
    FileConfig,
    RunConfig,
    Seeds,
    parse_override,
    resolve_device,
    set_path,
)
from toolkit.lab.runner.config_errors import Sources, pydantic_error
from toolkit.lab.runner.errors import ConfigError, ExperimentLoadError, suggest
from toolkit.lab.runner.limits import DEFAULT_MAX_RUNS
from toolkit.lab.runner.registry import Experiment, config_files, discover, load_experiment

__all__ = ["DEFAULT_MAX_RUNS", "RunSpec", "count_runs", "load_config", "make_config", "plan",
           "plan_one"]

@dataclass(frozen=True)
class RunSpec:
    """One run, validated once: what :func:`~toolkit.lab.runner.run.execute` runs.

    ``config``: the resolved config (``config.toml`` of the run directory, ``params`` as plain
    values); ``experiment``: the experiment that runs it; ``params``: its ``Params`` object,
    handed to ``run(params, ctx)`` as it is; ``device``: ``config.device`` resolved on this
    machine (``auto`` → CUDA when there is one).

    A spec sent to another process (a pool worker, a Dask worker) travels by reference: the
    experiment is loaded there again, the params are rebuilt from their values without a
    second validation (a private cache a ``Params`` keeps, such as the showcase's validated
    children, travels too, unless it holds classes that process cannot import, such as a
    loose file's: then it is rebuilt there when used), and the device is resolved there,
    since the machine that runs a spec decides what ``auto`` means.
    """

    config: RunConfig
    experiment: Experiment
    params: BaseModel
    device: torch.device

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def dtype(self) -> torch.dtype:
        return self.config.torch_dtype

    def __reduce__(self) -> tuple[Any, ...]:
        state = self.params.__getstate__()
        if state.get("__pydantic_private__"):
            try:  # a cache of objects whose classes another process can import travels
                pickle.dumps(state["__pydantic_private__"])
            except (pickle.PicklingError, TypeError, AttributeError):
                fresh = {name: attr.default_factory() if attr.default_factory is not None
                         else copy.deepcopy(attr.default)
                         for name, attr in type(self.params).__private_attributes__.items()}
                state = {**state, "__pydantic_private__": fresh}
        return _restore, (self.config, self.experiment, state)


def _restore(config: RunConfig, experiment: Experiment, state: dict[str, Any]) -> RunSpec:
    """A spec in another process: the params rebuilt as pickle rebuilds a model (no
    validation), with the class of the experiment loaded there."""
    cls = experiment.Params
    params = cls.__new__(cls)
    params.__setstate__(state)
    return RunSpec(config, experiment, params, resolve_device(config.device,
                                                              source=config.source))


# ----------------------------------------------------------------------------- the pieces


def experiment_named(name: str, source: str) -> Experiment:
    """The registered (or loose-file) experiment ``name``; ConfigError naming ``source``."""
    try:
        return load_experiment(name)
    except KeyError:
        hint = suggest(name, discover())
        fix = (f"{hint} (`toolkit list` shows all)" if hint
               else "`toolkit list` shows the experiments")
        raise ConfigError(source, "experiment", f"unknown experiment {name!r}", fix) from None
    except ExperimentLoadError as err:
        raise ConfigError(source, "experiment", f"experiment {name!r} cannot be loaded: "
                          f"{err.problem}", "fix that module (see `toolkit list`)") from None


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
        fields = experiment_named(name, sources("experiment")).Params.model_fields
    except ConfigError:
        return
    if key in fields:
        raise ConfigError(sources(key), key, "unknown key",
                          f"did you mean params.{key}? ({key} is a parameter of {name}; "
                          f"write --set params.{key}=... or put it under [params])") from None


def _common(raw: Mapping[str, Any], sources: Sources) -> FileConfig:
    """The common keys of ``raw`` validated; a ConfigError naming the first mistake."""
    try:
        return FileConfig.model_validate(raw)
    except ValidationError as err:
        _misplaced_param(err, raw, sources)
        raise pydantic_error(err, FileConfig, prefix="", source_of=sources) from None


def _params(experiment: Experiment, raw: Any, sources: Sources) -> BaseModel:
    """The experiment's ``Params`` from ``raw``: the one validation of a run's parameters."""
    if isinstance(raw, experiment.Params):
        return raw  # validated when it was made
    if isinstance(raw, BaseModel):
        raw = raw.model_dump(mode="json")
    if not isinstance(raw, Mapping):
        raise ConfigError(sources("params"), "params", f"must be a table, got {raw!r}",
                          "write the experiment's keys under [params]")
    try:
        return experiment.Params.model_validate(dict(raw))
    except ValidationError as err:
        raise pydantic_error(err, experiment.Params, prefix="params",
                             source_of=sources) from None


class _Devices:
    """Each device string resolved once per plan (a sweep over dtypes resolves ``auto`` once)."""

    def __init__(self) -> None:
        self.seen: dict[str, torch.device] = {}

    def __call__(self, device: str, source: str) -> torch.device:
        if device not in self.seen:
            self.seen[device] = resolve_device(device, source=source)
        return self.seen[device]


def _specs(common: FileConfig, experiment: Experiment, params: Any, seeds: Sequence[int],
           sources: Sources, devices: _Devices, **where: Any) -> list[RunSpec]:
    """One :class:`RunSpec` per seed, sharing one validated (frozen) ``Params``; ``where``:
    ``source``, ``sweep_point``, ``executor`` of the configs."""
    model = _params(experiment, params, sources)
    device = devices(common.device, sources("device"))
    values = model.model_dump(mode="json")
    return [RunSpec(RunConfig(experiment=common.experiment, params=copy.deepcopy(values),
                              seed=int(seed), device=common.device, dtype=common.dtype,
                              disable_blocks=tuple(common.disable_blocks),
                              threads=common.threads, output_dir=common.output_dir, **where),
                    experiment, model, device) for seed in seeds]


def read_file(path: Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict; a ConfigError saying why it cannot be read."""
    source = str(path)
    if not path.exists():
        close = ""
        with contextlib.suppress(Exception):  # the hint is optional
            close = suggest(path.name, [p.name for p in config_files()])
        raise ConfigError(source, "", "no such file", "check the path; `toolkit list` shows the "
                          f"configs{f' ({close})' if close else ''}")
    if path.is_dir():
        raise ConfigError(source, "", "is a directory, not a config file",
                          "give a .toml file such as configs/showcase.toml")
    if not path.is_file():  # a FIFO would wait for a writer forever, a device never ends
        raise ConfigError(source, "", f"is not a regular file ({_kind(path)})",
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


def _kind(path: Path) -> str:
    """What a path that is not a regular file is, in words."""
    import stat

    mode = path.stat().st_mode
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a file"


def _override(raw: dict[str, Any], overrides: Sequence[str], path: str,
              params: Mapping[str, Any] | None) -> Sources:
    """Apply ``--set`` overrides to ``raw`` in order (all parsed first), then ``params`` given
    in Python; where each key came from."""
    parsed = [(parse_override(text), text) for text in overrides]
    for (key, value), text in parsed:
        # an overridden seed/seeds replaces the other one of the file
        if key in ("seed", "seeds"):
            raw.pop("seeds" if key == "seed" else "seed", None)
        set_path(raw, key.split("."), value, f"--set {text}")
    given = [(key, text) for (key, _), text in parsed]
    if params:
        table = raw.setdefault("params", {})
        if not isinstance(table, dict):
            raise ConfigError(path, "params", f"must be a table, got {table!r}",
                              "write the experiment's keys under [params]")
        for key, value in params.items():
            table[key] = copy.deepcopy(value)
            given.append((f"params.{key}", f"params.{key}=... (given in Python)"))
    return Sources(path, given)


def _seeds(common: FileConfig, seeds: Sequence[int] | None, sources: Sources
           ) -> tuple[Sequence[int], str]:
    """The replicate seeds (``--seeds``, else the file's ``seeds``, else its ``seed`` or 0)
    and where they came from; not listed yet (a range is counted first)."""
    if common.seed is not None and common.seeds is not None:
        raise ConfigError(sources("seeds"), "seeds", "both `seed` and `seeds` are set",
                          "keep one: seed = 0 for one run, seeds = [0, 1, 2] for replicates")
    if seeds is not None:
        if not isinstance(seeds, Seeds) and (not seeds or any(s < 0 for s in seeds)):
            raise ConfigError("--seeds", "", f"{list(seeds)} is not a list of seeds",
                              "give non-negative integers such as 0,1,2")
        return seeds, "--seeds"
    if common.seeds is not None:
        return common.seeds, sources("seeds")
    return [common.seed if common.seed is not None else 0], sources("seed")


def _grid(sweep: Mapping[str, Any], fields: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The ``[sweep]`` table as dotted key → values, every key sweepable and known."""
    grid = tomlio.flatten(sweep)
    for key, values in grid.items():
        if not (key.startswith("params.") or key in SWEEPABLE):
            hint = suggest(key, [*SWEEPABLE, *(f"params.{f}" for f in fields)])
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


def _count(grid: Mapping[str, list[Any]], seeds: Sequence[int], where: tuple[str, str],
           max_runs: int) -> int:
    """Runs in the grid times the seeds, counted before any is made; ConfigError above
    ``max_runs``."""
    points = math.prod(len(v) for v in grid.values())
    count = points * len(seeds)
    if count > max_runs:
        source, key = where
        shape = (f"{points:,} sweep points x {len(seeds):,} seeds" if grid
                 else f"{len(seeds):,} seeds")
        raise ConfigError(source, key, f"gives {count:,} runs ({shape}), above the limit of "
                          f"{max_runs:,}", "check the seeds and the [sweep] lists; to run that "
                          "many, raise the limit with --max-runs N (Python: max_runs=N)")
    return count


def _sweep_points(raw: Mapping[str, Any], grid: Mapping[str, list[Any]], source: str
                  ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each point of the grid (last key fastest) with the file's keys, the point's values set."""
    base = {k: v for k, v in raw.items() if k not in ("sweep", "seeds", "seed", "executor")}
    for combo in itertools.product(*grid.values()):
        point = dict(zip(grid, combo))
        member = copy.deepcopy(base)
        member.setdefault("params", {})
        for key, value in point.items():
            set_path(member, key.split("."), value, f"{source} [sweep]")
        yield point, member


# ----------------------------------------------------------------------------- planning


def count_runs(path: str | Path, overrides: Sequence[str] = (), *,
               seeds: Sequence[int] | None = None) -> tuple[int, ExecutorSpec]:
    """How many runs :func:`plan` makes of the file (seeds times ``[sweep]`` points) and the
    executor the file names, read without importing the experiment: the command line starts
    a pool's fork server with it while the experiments are imported. Raises
    :class:`ConfigError` as ``plan`` does for the keys it reads (the others are not checked)."""
    path = Path(path)
    raw = read_file(path)
    sources = _override(raw, overrides, str(path), None)
    common = _common(raw, sources)
    run_seeds, _ = _seeds(common, seeds, sources)
    points = math.prod(len(v) if isinstance(v, list) else 1
                       for v in tomlio.flatten(common.sweep).values())
    return points * len(run_seeds), common.executor


def plan(path: str | Path, overrides: Sequence[str] = (), *,
         params: Mapping[str, Any] | None = None, seeds: Sequence[int] | None = None,
         output_dir: str | Path | None = None, max_runs: int = DEFAULT_MAX_RUNS
         ) -> list[RunSpec]:
    """Read, override, validate and expand a config file into one :class:`RunSpec` per run.

    Args:
        path: the TOML file.
        overrides: ``"dotted.key=VALUE"`` strings (``--set``), applied in order.
        params: the experiment's parameters given in Python, on top of the file's
            ``[params]`` and the overrides (no round trip through TOML text).
        seeds: replicate seeds that replace ``seed``/``seeds`` of the file (``--seeds``).
        output_dir: replaces ``output_dir`` of the file (``--out``).
        max_runs: refuse, before making any, a config that gives more runs.

    Returns:
        The runs: the ``[sweep]`` grid (in the order the keys appear, last key fastest) times
        the seeds. Everything is validated before this returns; nothing is written.
    """
    path = Path(path)
    source = str(path)
    raw = read_file(path)
    sources = _override(raw, overrides, source, params)
    if output_dir is not None:
        raw["output_dir"] = str(output_dir)
    common = _common(raw, sources)
    run_seeds, seeds_from = _seeds(common, seeds, sources)
    exp = experiment_named(common.experiment, sources("experiment"))
    grid = _grid(common.sweep, exp.Params.model_fields, source)
    sources.sweep = set(grid)
    where = (f"{source} [sweep]", "sweep") if grid and math.prod(map(len, grid.values())) > 1 \
        else (seeds_from, "seeds")
    _count(grid, run_seeds, where, max_runs)
    run_seeds = list(run_seeds)  # counted: small enough to list
    if len(set(run_seeds)) != len(run_seeds):
        raise ConfigError(seeds_from, "seeds", f"repeated seeds in {run_seeds}",
                          "list each seed once")
    devices = _Devices()
    specs: list[RunSpec] = []
    for point, member in _sweep_points(raw, grid, source):
        m = _common(member, sources)
        specs += _specs(m, exp, m.params, run_seeds, sources, devices, source=source,
                        sweep_point=point, executor=common.executor)
    return specs


def plan_one(experiment: str | Experiment, params: Mapping[str, Any] | BaseModel | None = None,
             *, seed: int = 0, device: str = "auto", dtype: str = "float32",
             disable_blocks: Sequence[str] = ("*",), output_dir: str | Path = "results",
             threads: int = 1, source: str = "<python>",
             executor: ExecutorSpec | None = None) -> RunSpec:
    """Validate one run given in Python (the same checks as a config file).

    ``experiment``: a registered name, or the :class:`~toolkit.lab.runner.Experiment` itself
    (one that is not registered). ``params``: a dict, or the experiment's own ``Params`` object
    (taken as it is: it was validated when it was made).
    """
    name = experiment.name if isinstance(experiment, Experiment) else experiment
    sources = Sources(source, [])
    common = _common({"experiment": name, "seed": seed, "device": device, "dtype": dtype,
                      "disable_blocks": list(disable_blocks), "threads": threads,
                      "output_dir": str(output_dir)}, sources)
    exp = experiment if isinstance(experiment, Experiment) else \
        experiment_named(common.experiment, source)
    where: dict[str, Any] = {"source": source}
    if executor is not None:
        where["executor"] = executor
    return _specs(common, exp, params if params is not None else {}, [seed], sources,
                  _Devices(), **where)[0]


def load_config(path: str | Path, overrides: Sequence[str] = (), *,
                seeds: Sequence[int] | None = None, output_dir: str | Path | None = None,
                max_runs: int = DEFAULT_MAX_RUNS) -> list[RunConfig]:
    """The configs of :func:`plan` (one per run, validated; nothing is written)."""
    return [spec.config for spec in plan(path, overrides, seeds=seeds, output_dir=output_dir,
                                         max_runs=max_runs)]


def make_config(experiment: str, params: Mapping[str, Any] | BaseModel | None = None, *,
                seed: int = 0, device: str = "auto", dtype: str = "float32",
                disable_blocks: Sequence[str] = ("*",), output_dir: str | Path = "results",
                threads: int = 1, source: str = "<python>", loaded: Any = None) -> RunConfig:
    """The config of :func:`plan_one` (``loaded``: the Experiment, for one not registered)."""
    return plan_one(loaded if loaded is not None else experiment, params, seed=seed,
                    device=device, dtype=dtype, disable_blocks=disable_blocks,
                    output_dir=output_dir, threads=threads, source=source).config
