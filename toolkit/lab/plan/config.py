"""From a config file (or values given in Python) to validated runs, in one pass.

:meth:`Plan.read` reads a config (``configs/*.toml``: a run's keys, seeds, ``[sweep]``,
``[executor]``) once, applies the ``--set`` overrides once, validates it and counts its runs
without importing torch or the experiment; :meth:`Plan.specs` validates one
``RunConfig[Params]`` per sweep point into a :class:`RunSpec` per run. Every mistake is a
:class:`~toolkit.lab.errors.ConfigError`: one line naming the file, the key and the fix.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import itertools
import json
import math
import os
import pickle
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError, create_model

from toolkit.lab.errors import ConfigError, DamagedFile, ExperimentLoadError, cut, echo, suggest
from toolkit.lab.plan import registry
from toolkit.lab.plan.registry import Experiment, code_files, config_files, discover
from toolkit.lab.results import schema
from toolkit.lab.results.files import read_bytes
from toolkit.lab.results.schema import MAX_DEPTH, MAX_SEED, ConfigFile, ExecutorConfig, RunConfig

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_MAX_RUNS", "MAX_CONFIG_BYTES", "Plan", "RunSpec", "code_digest",
           "executor_for", "parse_override", "parse_seeds", "plan", "plan_one", "request_key",
           "resolve_device"]

#: The most runs one command makes unless told otherwise (``--max-runs``, ``max_runs=``).
DEFAULT_MAX_RUNS = 10_000
#: The largest config file read: a config is a few hundred bytes.
MAX_CONFIG_BYTES = 2**20
#: the common keys a ``[sweep]`` may vary (besides ``params.<name>``)
SWEEPABLE = ("device", "dtype", "disable_blocks", "threads")
_KEY_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
# a --set value that is no TOML literal but a plain word (``cpu``, ``em.*``) is a string
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-*/:+]*$")
_TOO_DEEP = (f"nests tables or lists more than {MAX_DEPTH} deep",
             "flatten the value; no parameter needs that depth")


@dataclass
class Sources:
    """Which input (the file, a ``--set``, the ``[sweep]``) a key came from, for errors."""

    path: str
    overrides: list[tuple[str, str]] = field(default_factory=list)  # (dotted key, the input)
    sweep: set[str] = field(default_factory=set)

    def __call__(self, key: str) -> str:
        for okey, source in reversed(self.overrides):
            if key == okey or key.startswith(okey + ".") or okey.startswith(key + "."):
                return source
        if any(key == s or key.startswith(s + ".") for s in self.sweep):
            return f"{self.path} [sweep]"
        return self.path


_FIXES = {
    **dict.fromkeys(("int_parsing", "int_type"), "use an integer such as 10"),
    **dict.fromkeys(("float_parsing", "float_type"), "use a number such as 0.5"),
    **dict.fromkeys(("bool_parsing", "bool_type"), "use true or false"),
    **dict.fromkeys(("list_type", "tuple_type"), "use a list such as [1, 2]"),
    **dict.fromkeys(("literal_error", "enum"), "use one of {expected}"),
    "greater_than": "use a value > {gt}", "greater_than_equal": "use a value >= {ge}",
    "less_than": "use a value < {lt}", "less_than_equal": "use a value <= {le}",
    "int_from_float": "use an integer such as 10 (no fractional part)",
    "string_type": 'use a quoted string such as "text"', "dict_type": "use a table",
    "missing": "add this key", "too_short": "give at least {min_length} item(s)",
    "too_long": "give at most {max_length} item(s)",
    "string_too_short": "give at least {min_length} character(s)",
    "string_too_long": "give at most {max_length} character(s)",
    "string_pattern_mismatch": "use a value matching {pattern}",
}


def pydantic_error(err: ValidationError, model: type[BaseModel], *, prefix: str,
                   sources: Callable[[str], str]) -> ConfigError:
    """The first error of ``err`` as a one-line ConfigError (the value echoed, cut short)."""
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join([prefix, *loc] if prefix else loc)
    holder: Any = model  # the model that holds the key (``params.lr``: the experiment's Params)
    for part in loc[:-1]:
        holder = getattr(getattr(holder, "model_fields", {}).get(part), "annotation", None)
    fields = getattr(holder, "model_fields", {})
    if first["type"] == "extra_forbidden":
        hint, valid = suggest(loc[-1], fields), f"valid keys: {', '.join(fields) or 'none'}"
        return ConfigError(sources(key), key, "unknown key", f"{hint} ({valid})" if hint else valid)
    try:
        fix = _FIXES.get(first["type"], "").format(**dict(first.get("ctx") or {}))
    except (KeyError, IndexError):
        fix = ""
    info = fields.get(loc[-1]) if loc else None
    if info is not None and info.description:
        fix = f"{fix} ({loc[-1]}: {info.description})" if fix else f"{loc[-1]}: {info.description}"
    problem = first["msg"].removeprefix("Value error, ")
    if first["type"] not in ("missing", "value_error", "assertion_error"):
        problem += f", got {echo(first.get('input'))}"
    return ConfigError(sources(key), key, problem, fix)


def parse_override(text: str) -> tuple[str, Any]:
    """``"params.n_steps=10"`` → ``("params.n_steps", 10)``: a dotted key and a TOML literal on
    one line; a plain word that is no literal (``cpu``, ``em.*``) is a string."""
    source = f"--set {echo(text)}"
    if "\n" in text or "\r" in text:
        raise ConfigError(source, "", "holds a line break", "give each --set on one line; "
                          "for text with line breaks write \\n inside a quoted string")
    if "=" not in text:
        raise ConfigError(source, "", "expected KEY=VALUE",
                          "write it as --set params.n_steps=10 (a dotted key, '=', a TOML value)")
    key, _, raw = (part.strip() for part in text.partition("="))
    if not key or not all(_KEY_PART.match(p) for p in key.split(".")):
        raise ConfigError(source, echo(key) or "''", "not a valid dotted key",
                          "use letters, digits and '_' separated by dots, e.g. params.n_steps=10")
    if not raw:
        raise ConfigError(source, key, "missing value after '='",
                          'give a TOML value, e.g. 10, 0.5, true, "text" or [1, 2]')
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        if not _BARE_WORD.match(raw):
            raise ConfigError(source, key, f"{echo(raw)} is not a TOML value",
                              'quote strings ("text") and close lists ([1, 2])') from None
        value = raw
    _check_depth(value, source, key)
    return key, value


def parse_seeds(text: str, *, limit: int = DEFAULT_MAX_RUNS) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` → the seeds, each in ``0..MAX_SEED``, counted before they are
    listed (a typo such as ``0-100000000`` is refused above ``limit``)."""
    parts: list[range] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if m is None or (m[2] is not None and int(m[2]) < int(m[1])):
            raise ConfigError("--seeds", "", f"{echo(text)} is not a list of seeds",
                              "use non-negative integers separated by commas (0,1,2) or a "
                              "range (0-4)")
        parts.append(range(int(m[1]), int(m[2] or m[1]) + 1))
    top = max(r[-1] for r in parts)
    if top > MAX_SEED:
        raise ConfigError("--seeds", "", f"seed {top} is above {MAX_SEED} (2^63 - 1), the largest "
                          "numpy and torch accept", "use smaller seeds")
    n = sum(map(len, parts))
    if n > limit:
        raise _too_many("--seeds", "seeds", n, f"{n:,} seeds", limit)
    return [seed for r in parts for seed in r]


def _too_many(source: str, key: str, n: int, shape: str, limit: int) -> ConfigError:
    return ConfigError(source, key, f"gives {n:,} runs ({shape}), above the limit of {limit:,}",
                       "check the seeds and the [sweep] lists; to run that many, raise the "
                       "limit with --max-runs N (Python: max_runs=N)")


def _check_depth(value: Any, source: str, key: str, depth: int = 0) -> None:
    """Refuse tables or lists nested deeper than MAX_DEPTH (tomllib's recursion bounds it)."""
    if depth > MAX_DEPTH:
        raise ConfigError(source, key, *_TOO_DEEP)
    for child in value.values() if isinstance(value, dict) else value \
            if isinstance(value, list) else ():
        _check_depth(child, source, key, depth + 1)


def _set(data: dict[str, Any], key: str, value: Any, source: str) -> None:
    """``data[a][b]... = value`` for the dotted ``key``, making tables on the way."""
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            path = ".".join(parts[: i + 1])
            raise ConfigError(source, path, f"is a value ({echo(child)}), not a table",
                              f"set {path}=... directly")
        node = child
    node[parts[-1]] = value


def expand_path(value: str, source: str, key: str = "output_dir") -> str:
    """``~`` and ``$VAR``/``${VAR}`` expanded as a shell would; an unset variable is refused
    (a folder named ``$HOME`` is never made)."""
    expanded = os.path.expandvars(os.path.expanduser(value))
    unset = re.search(r"\$(\w+|\{[^}]*\})", expanded)
    if unset:
        raise ConfigError(source, key, f"{echo(value)} names the environment variable "
                          f"{unset[0]}, which is not set", "set it, or write the path out")
    return expanded


def resolve_device(device: str, *, source: str = "<python>") -> torch.device:
    """The config's ``device`` on this machine (``auto``: CUDA when there is one); a device
    that does not exist here is a ConfigError naming the file and key."""
    from toolkit._utils.array_validation import resolve_device as resolve

    try:
        return resolve(device, where="device")
    except ValueError as err:
        problem = str(err).removeprefix("device: ").split("; use")[0]
        raise ConfigError(source, "device", problem, 'use device = "cpu" or "auto"') from None


@dataclass(frozen=True)
class RunSpec:
    """One run, validated once, that every executor runs as it is: ``config`` is what
    ``config.toml`` will hold, ``params`` what ``run(params, ctx)`` gets, ``device`` is resolved
    where it runs (in another process: the params rebuilt without a second validation);
    ``request``: its :func:`request_key`; ``resumes``: an interrupted run it carries over."""

    config: RunConfig
    experiment: Experiment
    params: BaseModel
    device: torch.device
    source: str = "<python>"
    sweep_point: dict[str, Any] = field(default_factory=dict)
    tensorboard: str | None = None
    request: str = ""
    resumes: str | None = None

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.config.dtype)

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
        return _restore, (state, {k: v for k, v in vars(self).items()
                                  if k not in ("params", "device")})


def _restore(state: dict[str, Any], spec: dict[str, Any]) -> RunSpec:
    """A spec where it runs: its params rebuilt as they were validated, its device resolved."""
    params = spec["experiment"].Params.__new__(spec["experiment"].Params)
    params.__setstate__(state)
    return RunSpec(**spec, params=params, device=resolve_device(spec["config"].device,
                                                                 source=spec["source"]))


def experiment_named(name: str, source: str) -> Experiment:
    """The registered (or loose-file) experiment ``name``; ConfigError naming ``source``."""
    try:
        return registry.load_experiment(name)
    except KeyError:
        hint = suggest(name, discover())
        raise ConfigError(source, "experiment", f"unknown experiment {echo(name)}",
                          f"{hint} (`toolkit list` shows all)" if hint
                          else "`toolkit list` shows the experiments") from None
    except ExperimentLoadError as err:
        raise ConfigError(source, "experiment", f"experiment {name!r} cannot be loaded: "
                          f"{err.problem}", "fix that module (see `toolkit list`)") from None


def check_blocks(config: RunConfig, experiment: Experiment, source: str) -> None:
    """Every ``disable_blocks`` pattern matches a block the experiment declares (one that
    declares none is not checked): else blocked and unblocked would compute the same thing."""
    declared = experiment.blocks
    for pattern in config.disable_blocks if declared else ():
        if not any(fnmatch.fnmatchcase(name, pattern) for name in declared):
            hint = suggest(pattern, declared)
            prefix = f"{declared[0].split('.')[0]}.*"
            raise ConfigError(source, "disable_blocks", f"{pattern!r} matches no block of "
                              f"{config.experiment} (its blocks: {', '.join(declared)}), so "
                              f"blocked and unblocked would compute the same thing",
                              (hint + " " if hint else "") + "use a block name or a pattern "
                              f"such as {prefix!r}")


def code_digest(experiment: str) -> str:
    """SHA-256 of the toolkit's version and of ``experiment``'s code files
    (:func:`~toolkit.lab.plan.registry.code_files`); ``""`` when none is found."""
    import toolkit

    digest = hashlib.sha256(f"toolkit {toolkit.__version__}".encode())
    files = code_files(experiment)
    for path in files:
        digest.update(f"\0{path.name}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            return ""
    return digest.hexdigest() if files else ""


def request_key(member: Mapping[str, Any], seed: int, code: str) -> str:
    """SHA-256 of a run's keys as given (``output_dir`` aside), seed and :func:`code_digest`:
    ``--resume`` matches runs by it without loading the experiment."""
    data = {key: value for key, value in member.items() if key != "output_dir"}
    text = json.dumps({**data, "seed": int(seed), "code": code}, sort_keys=True,
                      ensure_ascii=False, allow_nan=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Plan:
    """A config read once: its validated keys, seeds and ``[sweep]`` grid; :meth:`specs` gives
    the runs."""

    file: ConfigFile
    seeds: list[int]
    grid: dict[str, list[Any]]
    sources: Sources
    experiment: Experiment | None = None
    given_params: Any = None  # a Params object or dict given in Python (plan_one)

    source = property(lambda self: self.sources.path)
    executor = property(lambda self: self.file.executor)

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.grid.values()) * len(self.seeds)

    @classmethod
    def read(cls, path: str | Path, overrides: Sequence[str] = (), *,
             params: Mapping[str, Any] | None = None, seeds: Sequence[int] | None = None,
             output_dir: str | Path | None = None, tensorboard: str | Path | None = None,
             max_runs: int = DEFAULT_MAX_RUNS) -> Plan:
        """Read, override (``--set`` texts, then ``params``), validate and count (up to
        ``max_runs``) the file's runs without importing the experiment; ``seeds``,
        ``output_dir`` and ``tensorboard`` replace the file's."""
        raw, sources = _read_file(Path(path)), Sources(str(path))
        for text in overrides:
            key, value = parse_override(text)
            sources.overrides.append((key, f"--set {cut(text)}"))
            if key in ("seed", "seeds"):  # an overridden seed replaces the file's seeds
                raw.pop("seeds" if key == "seed" else "seed", None)
            _set(raw, key, value, f"--set {echo(text)}")
        for key, value in (params or {}).items():
            _set(raw, f"params.{key}", copy.deepcopy(value), sources.path)
            sources.overrides.append((f"params.{key}", f"--set params.{key}=... (given in "
                                                       "Python)"))
        if seeds is not None:
            raw.pop("seed", None)
            raw["seeds"] = list(seeds)
            sources.overrides.append(("seeds", "--seeds"))
        for key, value in (("output_dir", output_dir), ("tensorboard", tensorboard)):
            if value is not None:
                raw[key] = str(value)
        return cls._from_raw(raw, sources, max_runs=max_runs)

    @classmethod
    def _from_raw(cls, raw: dict[str, Any], sources: Sources, *, max_runs: int) -> Plan:
        for key in ("output_dir", "tensorboard"):
            if isinstance(raw.get(key), str):
                raw[key] = expand_path(raw[key], sources(key), key)
        try:
            file = ConfigFile.model_validate(raw)
        except ValidationError as err:
            _misplaced_param(err, raw, sources)
            raise pydantic_error(err, ConfigFile, prefix="", sources=sources) from None
        grid = _grid(file.sweep, sources.path)
        sources.sweep = set(grid)
        seeds = file.seeds or [file.seed or 0]
        seeds_from = sources("seeds" if file.seeds else "seed")
        plan = cls(file, seeds, grid, sources)
        if len(plan) > max_runs:
            points = len(plan) // len(seeds)
            shape = f"{points:,} sweep points x {len(seeds):,} seeds" if grid \
                else f"{len(seeds):,} seeds"
            where = (f"{sources.path} [sweep]", "sweep") if points > 1 else (seeds_from, "seeds")
            raise _too_many(*where, len(plan), shape, max_runs)
        if len(set(plan.seeds)) != len(plan.seeds):
            raise ConfigError(seeds_from, "seeds", f"repeated seeds in {echo(plan.seeds)}",
                              "list each seed once")
        return plan

    def specs(self) -> list[RunSpec]:
        """One validated run per sweep point and seed (the grid in the order its keys
        appear, last key fastest; then the seeds)."""
        file, sources = self.file, self.sources
        if self.experiment is None:
            self.experiment = experiment_named(file.experiment, sources("experiment"))
        experiment = self.experiment
        fields = experiment.Params.model_fields
        for key in self.grid:
            if key.startswith("params.") and key.split(".")[1] not in fields:
                hint = suggest(key.split(".")[1], fields)
                valid = f"valid keys: {', '.join(fields)}"
                raise ConfigError(self.source, f"sweep.{key}", "unknown key",
                                  f"{hint} ({valid})" if hint else valid)
        given = self.given_params
        code = code_digest(experiment.name) if given is None else ""
        devices: dict[str, torch.device] = {}
        specs: list[RunSpec] = []
        # one model validates a sweep point whole: the common keys and the experiment's Params
        typed = create_model(f"RunConfig[{experiment.Params.__name__}]", __base__=RunConfig,
                             params=(experiment.Params, ...))
        for point, member in self._members():
            raw = given if given is not None else member.get("params")
            if isinstance(raw, BaseModel) and not isinstance(raw, experiment.Params):
                raw = raw.model_dump(mode="json")
            try:
                run = typed.model_validate({**member, "params": raw})
            except ValidationError as err:
                raise pydantic_error(err, typed, prefix="", sources=sources) from None
            params = run.params  # a Params object given in Python is taken as it is
            config = RunConfig.model_construct(**{**dict(run), "params": params.model_dump(
                mode="json")})
            check_blocks(config, experiment, sources("disable_blocks"))
            if config.device not in devices:
                devices[config.device] = resolve_device(config.device,
                                                        source=sources("device"))
            specs += [RunSpec(config.model_copy(update={"seed": int(seed)}), experiment,
                              params, devices[config.device], self.source, point,
                              file.tensorboard, request_key(member, seed, code) if code else "")
                      for seed in self.seeds]
        return specs

    def _members(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Each sweep point and its run's keys as given (last key fastest), not yet validated."""
        base = self.file.model_dump(include=set(RunConfig.model_fields) - {"seed"},
                                    exclude_none=True)
        for combo in itertools.product(*self.grid.values()):
            point = dict(zip(self.grid, combo))
            member = copy.deepcopy(base)
            for key, value in point.items():
                _set(member, key, value, f"{self.source} [sweep]")
            yield point, member

    def requests(self) -> list[str]:
        """The :func:`request_key` of each run in the order of :meth:`specs`, without importing
        the experiment; ``[]`` for params given in Python or an experiment not found."""
        code = code_digest(self.file.experiment) if self.given_params is None else ""
        return [request_key(member, seed, code) for _, member in self._members()
                for seed in self.seeds] if code else []


def _read_file(path: Path) -> dict[str, Any]:
    """The TOML file at ``path`` (a regular UTF-8 file of at most MAX_CONFIG_BYTES, nested at
    most MAX_DEPTH deep), or a ConfigError saying why not."""
    source = str(path)
    if not os.path.lexists(path):
        close = suggest(path.name, [p.name for p in config_files()])
        raise ConfigError(source, "", "no such file", "check the path; `toolkit list` shows "
                          f"the configs{f' ({close})' if close else ''}")
    try:  # utf-8-sig: a byte-order mark (an editor's, on Windows) is read as no character
        raw = tomllib.loads((read_bytes(path, limit=MAX_CONFIG_BYTES) or b"").decode("utf-8-sig"))
    except DamagedFile as err:
        raise ConfigError(source, "", err.problem, "give a .toml file such as "
                          "configs/showcase.toml") from None
    except UnicodeDecodeError as err:
        raise ConfigError(source, "", f"is not UTF-8 text ({err.reason} at byte {err.start})",
                          "save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(source, "", f"invalid TOML: {err}",
                          "fix the syntax at that line and column") from None
    except RecursionError:
        raise ConfigError(source, "", *_TOO_DEEP) from None
    _check_depth(raw, source, "")
    return raw


def _misplaced_param(err: ValidationError, raw: Mapping[str, Any], sources: Sources) -> None:
    """An unknown top-level key that is a parameter of the experiment: say ``params.<key>``."""
    first = err.errors()[0]
    if first["type"] != "extra_forbidden" or len(first["loc"]) != 1:
        return
    key, name = str(first["loc"][0]), raw.get("experiment")
    try:
        fields = experiment_named(name, "").Params.model_fields if isinstance(name, str) else {}
    except ConfigError:
        return
    if key in fields:
        raise ConfigError(sources(key), key, "unknown key",
                          f"did you mean params.{key}? ({key} is a parameter of {name}; "
                          f"write --set params.{key}=... or put it under [params])") from None


def _grid(sweep: dict[str, Any], source: str) -> dict[str, list[Any]]:
    """The ``[sweep]`` table as dotted key → values, every key sweepable."""
    grid = schema.flatten(sweep)
    for key, values in grid.items():
        if not (key.startswith("params.") or key in SWEEPABLE):
            hint = suggest(key, SWEEPABLE)
            raise ConfigError(source, f"sweep.{key}", "cannot be swept",
                              (hint + " " if hint else "") + "sweep params.<name>, device, "
                              "dtype, threads or disable_blocks; use `seeds = [...]` for "
                              "replicates")
        if not isinstance(values, list) or not values:
            raise ConfigError(source, f"sweep.{key}", f"must be a non-empty list, got "
                              f"{echo(values)}", f"write {key} = [value1, value2]")
    return grid


def plan(path: str | Path, overrides: Sequence[str] = (), **options: Any) -> list[RunSpec]:
    """The runs of a config file: :meth:`Plan.read` then :meth:`Plan.specs`."""
    return Plan.read(path, overrides, **options).specs()


def plan_one(experiment: str | Experiment, params: Mapping[str, Any] | BaseModel | None = None,
             *, source: str = "<python>", **keys: Any) -> RunSpec:
    """One run given in Python, checked as a config file is: ``experiment`` by name or loaded,
    ``params`` a dict or a ``Params`` taken as it is, ``keys`` the config's other keys."""
    loaded = experiment if isinstance(experiment, Experiment) else None
    raw = {key: str(value) if key in ("output_dir", "tensorboard") and value is not None
           else value for key, value in keys.items()}
    plan = Plan._from_raw({"experiment": loaded.name if loaded else experiment, **raw},
                          Sources(source), max_runs=1)
    plan.experiment, plan.given_params = loaded, params if params is not None else {}
    return plan.specs()[0]


def executor_for(plans: Sequence[Plan], **options: Any) -> ExecutorConfig:
    """The executor of the configs' ``[executor]`` tables, the command line's ``options``
    (those not ``None``) on top."""
    tables = {p.executor for p in plans}
    if len(tables) > 1 and options.get("kind") is None:
        raise ConfigError("CONFIG", "executor", "the configs name different [executor] tables",
                          "run them separately or choose one with --executor")
    base = next(iter(tables)) if tables else ExecutorConfig()
    given = {k: v for k, v in options.items() if v is not None}
    try:
        return ExecutorConfig.model_validate({**base.model_dump(), **given})
    except ValidationError as err:
        flags = [(f"executor.{key}", "--executor" if key == "kind" else
                  f"--{key.replace('_', '-')}") for key in given]
        sources = Sources(" ".join(p.source for p in plans) or "<python>", flags)
        raise pydantic_error(err, ExecutorConfig, prefix="executor", sources=sources) from None
