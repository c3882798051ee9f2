"""From a config file (or values given in Python) to validated runs, in one pass.

A config file (:class:`~toolkit.lab.results.schema.ConfigFile`; see ``configs/*.toml``) holds a
run's keys, its seeds, a ``[sweep]`` grid and its ``[executor]``. :meth:`Plan.read` reads it
once, applies the ``--set`` overrides once, validates the file's keys and counts the runs
before any is made, without importing torch or the experiment; :meth:`Plan.specs` validates one
``RunConfig[Params]`` per sweep point and hands back one :class:`RunSpec` per run, what every
executor runs as it is. Every mistake is a :class:`~toolkit.lab.errors.ConfigError`: one line
naming the file (or ``--set``), the key, the problem and the fix.
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
from toolkit.lab.plan.registry import (
    Experiment,
    code_files,
    config_files,
    discover,
    load_experiment,
)
from toolkit.lab.results.files import read_bytes
from toolkit.lab.results.schema import (
    MAX_DEPTH,
    MAX_SEED,
    ConfigFile,
    ExecutorConfig,
    RunConfig,
    flatten,
)

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_MAX_RUNS", "MAX_CONFIG_BYTES", "Plan", "RunSpec", "code_digest",
           "executor_for", "parse_override", "parse_seeds", "plan", "plan_one", "request_key",
           "resolve_device"]

#: The most runs one command makes unless told otherwise (``--max-runs``, ``max_runs=``):
#: a typo in a seed range or a sweep list is refused by its count, before anything is made.
DEFAULT_MAX_RUNS = 10_000
#: The largest config file read: a config is a few hundred bytes.
MAX_CONFIG_BYTES = 2**20
#: the common keys a ``[sweep]`` may vary (besides ``params.<name>``)
SWEEPABLE = ("device", "dtype", "disable_blocks", "threads")
_KEY_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
# A value given on the command line that is not a TOML literal but reads as a plain word
# (``cpu``, ``em.*``, ``results/tmp``) is taken as a string, so quoting is rarely needed.
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-*/:+]*$")


class Sources:
    """Which input (the file, a ``--set``, the ``[sweep]``) a key came from, for errors."""

    def __init__(self, path: str, overrides: Sequence[tuple[str, str]] = ()) -> None:
        self.path = path
        self.overrides = list(overrides)  # (dotted key, original text)
        self.sweep: set[str] = set()

    def __call__(self, key: str) -> str:
        for okey, text in reversed(self.overrides):
            if key == okey or key.startswith(okey + ".") or okey.startswith(key + "."):
                return f"--set {text}"
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


def _model_at(model: Any, loc: Sequence[str]) -> Any:
    """The model that holds the key at ``loc`` (``params.lr``: the experiment's Params)."""
    for part in loc[:-1]:
        info = getattr(model, "model_fields", {}).get(part)
        if info is None:
            return None
        model = info.annotation
    return model


def pydantic_error(err: ValidationError, model: type[BaseModel], *, prefix: str,
                   sources: Callable[[str], str]) -> ConfigError:
    """The first error of ``err`` as a one-line ConfigError (the value echoed, cut short)."""
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join([prefix, *loc] if prefix else loc)
    if first["type"] == "extra_forbidden":
        fields = list(getattr(_model_at(model, loc), "model_fields", {}))
        hint = suggest(loc[-1], fields)
        valid = f"valid keys: {', '.join(fields) or 'none'}"
        return ConfigError(sources(key), key, "unknown key", f"{hint} ({valid})" if hint else valid)
    try:
        fix = _FIXES.get(first["type"], "").format(**dict(first.get("ctx") or {}))
    except (KeyError, IndexError):
        fix = ""
    info = getattr(_model_at(model, loc), "model_fields", {}).get(loc[-1]) if loc else None
    if info is not None and info.description:
        fix = f"{fix} ({loc[-1]}: {info.description})" if fix else f"{loc[-1]}: {info.description}"
    problem = first["msg"].removeprefix("Value error, ")
    if first["type"] not in ("missing", "value_error", "assertion_error"):
        problem += f", got {echo(first.get('input'))}"
    return ConfigError(sources(key), key, problem, fix)


def parse_override(text: str) -> tuple[str, Any]:
    """``"params.n_steps=10"`` → ``("params.n_steps", 10)``: a dotted key and a TOML literal
    (``10``, ``1e-3``, ``true``, ``[1, 2]``, ``"a b"``) on one line; a plain word that is not
    a literal (``cpu``, ``em.*``) is a string."""
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


def parse_seeds(text: str, *, source: str = "--seeds", limit: int = DEFAULT_MAX_RUNS
                ) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` → the seeds, each in ``0..MAX_SEED``, counted before they are
    listed (a typo such as ``0-100000000`` is refused above ``limit``)."""
    parts: list[range] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if m is None or (m[2] is not None and int(m[2]) < int(m[1])):
            raise ConfigError(source, "", f"{echo(text)} is not a list of seeds",
                              "use non-negative integers separated by commas (0,1,2) or a "
                              "range (0-4)")
        parts.append(range(int(m[1]), int(m[2] or m[1]) + 1))
    top = max(r[-1] for r in parts)
    if top > MAX_SEED:
        raise ConfigError(source, "", f"seed {top} is above {MAX_SEED} (2^63 - 1), the largest "
                          "numpy and torch accept", "use smaller seeds")
    n = sum(map(len, parts))
    if n > limit:
        raise _too_many(source, "seeds", n, f"{n:,} seeds", limit)
    return [seed for r in parts for seed in r]


def _too_many(source: str, key: str, n: int, shape: str, limit: int) -> ConfigError:
    return ConfigError(source, key, f"gives {n:,} runs ({shape}), above the limit of {limit:,}",
                       "check the seeds and the [sweep] lists; to run that many, raise the "
                       "limit with --max-runs N (Python: max_runs=N)")


def _check_depth(value: Any, source: str, key: str, depth: int = 0) -> None:
    """Refuse tables or lists nested deeper than MAX_DEPTH (a value tomllib read: its own
    recursion bounds the depth)."""
    if depth > MAX_DEPTH:
        raise ConfigError(source, key, f"nests tables or lists more than {MAX_DEPTH} deep",
                          "flatten the value; no parameter needs that depth")
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


def resolve_device(device: str, *, source: str = "<python>", key: str = "device"
                   ) -> torch.device:
    """The config's ``device`` on this machine (``auto``: CUDA when there is one); a device
    that does not exist here is a ConfigError naming the file and key."""
    from toolkit._utils.array_validation import resolve_device as resolve

    try:
        return resolve(device, where=key)
    except ValueError as err:
        problem = str(err).removeprefix(f"{key}: ").split("; use")[0]
        raise ConfigError(source, key, problem, 'use device = "cpu" or "auto"') from None


@dataclass(frozen=True)
class RunSpec:
    """One run, validated once: what every executor runs as it is.

    ``config``: what ``config.toml`` will hold; ``params``: the experiment's validated
    ``Params``, handed to ``run(params, ctx)``; ``device``: ``config.device`` resolved on the
    machine that runs it; ``source``: where the config came from; ``sweep_point``: its
    ``[sweep]`` values; ``tensorboard``: the folder of its live curves (not in the config);
    ``request``: :func:`request_key` (``""`` for params given in Python); ``resumes``: the
    folder of an interrupted run whose finished parts it carries over (``--resume``).

    A spec sent to another process travels by reference: the experiment is loaded there again,
    the params rebuilt without a second validation (with a private cache, such as the
    showcase's validated children, when that process can import its classes) and the device
    resolved there.
    """

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
    """A spec in the process that runs it: the params rebuilt as they were validated, the
    device resolved here."""
    params = spec["experiment"].Params.__new__(spec["experiment"].Params)
    params.__setstate__(state)
    return RunSpec(**spec, params=params, device=resolve_device(spec["config"].device,
                                                                 source=spec["source"]))


def experiment_named(name: str, source: str) -> Experiment:
    """The registered (or loose-file) experiment ``name``; ConfigError naming ``source``."""
    try:
        return load_experiment(name)
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


def _validated(model: type[BaseModel], raw: Any, prefix: str, sources: Sources) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise pydantic_error(err, model, prefix=prefix, sources=sources) from None


def code_digest(experiment: str) -> str:
    """SHA-256 of the code that validates and runs ``experiment`` (its files, those of every
    experiment for a composite: :func:`~toolkit.lab.plan.registry.code_files`) and of the
    toolkit's version, read without importing it; ``""`` when no file is found."""
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
    """SHA-256 of what a run was asked for: its keys as the config gives them (params not yet
    validated; ``output_dir`` aside, as in :meth:`RunConfig.identity`), its seed and the
    ``code`` it runs (:func:`code_digest`). The same request with the same code makes the
    same validated config, so ``--resume`` matches runs by it without loading the experiment;
    a change to the experiment's code changes the key, and the experiment decides again."""
    data = {key: value for key, value in member.items() if key != "output_dir"}
    text = json.dumps({**data, "seed": int(seed), "code": code}, sort_keys=True,
                      ensure_ascii=False, allow_nan=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Plan:
    """A config read once: its validated keys, seeds and ``[sweep]`` grid (:meth:`read`, or
    :func:`plan_one`); :meth:`specs` gives the runs."""

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
        """Read, override and validate the file at ``path`` and count its runs (refused above
        ``max_runs``); torch and the experiment are not imported yet. ``overrides``:
        ``"dotted.key=VALUE"`` (``--set``), in order; ``params`` given in Python go on top;
        ``seeds``, ``output_dir`` and ``tensorboard`` replace the file's."""
        path = Path(path)
        raw = _read_file(path)
        parsed = [(*parse_override(text), text) for text in overrides]
        sources = Sources(str(path), [(key, cut(text)) for key, _, text in parsed])
        for key, value, text in parsed:
            if key in ("seed", "seeds"):  # an overridden seed replaces the file's seeds
                raw.pop("seeds" if key == "seed" else "seed", None)
            _set(raw, key, value, f"--set {echo(text)}")
        for key, value in (params or {}).items():
            _set(raw, f"params.{key}", copy.deepcopy(value), sources.path)
            sources.overrides.append((f"params.{key}", f"params.{key}=... (given in Python)"))
        for key, value in (("output_dir", output_dir), ("tensorboard", tensorboard)):
            if value is not None:
                raw[key] = str(value)
        return cls._from_raw(raw, sources, seeds=seeds, max_runs=max_runs)

    @classmethod
    def _from_raw(cls, raw: dict[str, Any], sources: Sources, *, seeds: Sequence[int] | None,
                  max_runs: int) -> Plan:
        given_params = raw.pop("params", {})
        if not isinstance(given_params, dict):
            raise ConfigError(sources("params"), "params", f"must be a table, got "
                              f"{echo(given_params)}", "write the experiment's keys under "
                              "[params]")
        for key in ("output_dir", "tensorboard"):
            if isinstance(raw.get(key), str):
                raw[key] = expand_path(raw[key], sources(key), key)
        try:
            file = ConfigFile.model_validate(raw)
        except ValidationError as err:
            _misplaced_param(err, raw, sources)
            raise pydantic_error(err, ConfigFile, prefix="", sources=sources) from None
        file = file.model_copy(update={"params": given_params})
        grid = _grid(file.sweep, sources.path)
        sources.sweep = set(grid)
        if seeds is not None:
            seeds_from = "--seeds"
            if not seeds or any(isinstance(s, bool) or not isinstance(s, int)
                                or not 0 <= s <= MAX_SEED for s in seeds):
                raise ConfigError("--seeds", "", f"{echo(list(seeds))} is not a list of seeds",
                                  "give non-negative integers such as 0,1,2")
        elif file.seeds is not None:
            seeds, seeds_from = file.seeds, sources("seeds")
        else:
            seeds, seeds_from = [file.seed or 0], sources("seed")
        plan = cls(file, list(seeds), grid, sources)
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
            if not isinstance(raw, (Mapping, experiment.Params)):
                raise ConfigError(sources("params"), "params", f"must be a table, got "
                                  f"{echo(raw)}", "write the experiment's keys under [params]")
            run = _validated(typed, {**member, "params": raw}, "", sources)
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
        """Each sweep point and its run's keys as given, before the experiment validates
        its params (the grid in the order its keys appear, last key fastest)."""
        base = self.file.model_dump(include=set(RunConfig.model_fields) - {"seed"},
                                    exclude_none=True)
        for combo in itertools.product(*self.grid.values()):
            point = dict(zip(self.grid, combo))
            member = copy.deepcopy(base)
            for key, value in point.items():
                _set(member, key, value, f"{self.source} [sweep]")
            yield point, member

    def requests(self) -> list[str]:
        """The :func:`request_key` of each run, in the order of :meth:`specs`, found without
        importing the experiment; ``[]`` when there are none (params given in Python, an
        experiment not found)."""
        code = code_digest(self.file.experiment) if self.given_params is None else ""
        return [request_key(member, seed, code) for _, member in self._members()
                for seed in self.seeds] if code else []


def _read_file(path: Path) -> dict[str, Any]:
    """The TOML file at ``path``: a regular file of at most MAX_CONFIG_BYTES, UTF-8, nested
    at most MAX_DEPTH deep; a ConfigError saying why not."""
    source = str(path)
    if not os.path.lexists(path):
        close = suggest(path.name, [p.name for p in config_files()])
        raise ConfigError(source, "", "no such file", "check the path; `toolkit list` shows "
                          f"the configs{f' ({close})' if close else ''}")
    try:
        # utf-8-sig: a byte-order mark (an editor's, on Windows) is read as no character at all
        text = (read_bytes(path, limit=MAX_CONFIG_BYTES) or b"").decode("utf-8-sig")
    except DamagedFile as err:
        raise ConfigError(source, "", err.problem, "give a .toml file such as "
                          "configs/showcase.toml") from None
    except UnicodeDecodeError as err:
        raise ConfigError(source, "", f"is not UTF-8 text ({err.reason} at byte {err.start})",
                          "save the file as UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(source, "", f"invalid TOML: {err}",
                          "fix the syntax at that line and column") from None
    except RecursionError:
        raise ConfigError(source, "", f"nests tables or lists more than {MAX_DEPTH} deep",
                          "flatten the value; no parameter needs that depth") from None
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
    grid = flatten(sweep)
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
    """One run given in Python, with the checks of a config file (``experiment``: a name or an
    :class:`~toolkit.lab.plan.registry.Experiment`; ``params``: a dict, or the experiment's
    ``Params`` taken as it is; ``keys``: ``seed``, ``device``, ``dtype``, ``disable_blocks``,
    ``threads``, ``output_dir``, ``tensorboard``)."""
    loaded = experiment if isinstance(experiment, Experiment) else None
    raw = {key: str(value) if key in ("output_dir", "tensorboard") and value is not None
           else value for key, value in keys.items()}
    if not isinstance(raw.get("disable_blocks", ""), str):
        raw["disable_blocks"] = list(raw["disable_blocks"])
    plan = Plan._from_raw({"experiment": loaded.name if loaded else experiment, **raw},
                          Sources(source), seeds=None, max_runs=1)
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
        def source(key: str) -> str:
            key = key.removeprefix("executor.")
            if key in given:
                return "--executor" if key == "kind" else f"--{key.replace('_', '-')}"
            return " ".join(p.source for p in plans) or "<python>"
        raise pydantic_error(err, ExecutorConfig, prefix="executor", sources=source) from None
