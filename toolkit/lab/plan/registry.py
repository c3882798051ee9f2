"""Experiments found as plugins and loaded into checked :class:`Experiment` objects.

An experiment is a module with ``Params`` (a subclass of :class:`ExperimentParams`; a parameter
that may be ``None`` defaults to ``None``: TOML has no null) and ``run(params, ctx)``;
optionally ``QUICK``, ``DTYPE``, ``DESCRIPTION``, ``STORY``, ``BLOCKS``, ``METRICS``,
``findings(run)``, ``figures(run)`` and ``parts()`` (a composite: the showcase). The contract
is checked on loading (:func:`contract_problems`), each broken hook named.

Experiments are found through the entry-point group ``toolkit.experiments`` (one entry point
per experiment: ``my_probe = "my_package.my_probe"``; the built-in ones are declared so) and as
loose ``*.py`` files in the folders of ``TOOLKIT_EXPERIMENTS_PATH`` (``os.pathsep``-separated);
the entry point wins a clash. An :class:`Experiment` pickles by reference (module or file), so
that a worker process loads the same code.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from toolkit.lab.errors import ExperimentLoadError
from toolkit.lab.results.schema import MetricDoc

__all__ = ["Experiment", "ExperimentInfo", "ExperimentParams", "code_files", "config_files",
           "contract_problems", "describe", "discover", "load_all", "load_experiment"]

GROUP = "toolkit.experiments"
ENV_PATH = "TOOLKIT_EXPERIMENTS_PATH"
_EXTERNAL_PACKAGE = "_toolkit_external_experiments"
_DISTRIBUTION = "stop-gradient-toolkit"


@dataclass(frozen=True)
class _Source:
    """Where an experiment comes from: a module to import, or a loose file."""

    name: str
    module: str | None
    path: Path | None

    def file(self) -> Path | None:
        if self.path is not None:
            return self.path
        try:  # imports the parent package only (not the experiment itself)
            spec = importlib.util.find_spec(self.module or "")
        except (ImportError, ValueError):
            return None
        return Path(spec.origin) if spec is not None and spec.origin else None


def _plugin_sources() -> dict[str, _Source]:
    found: dict[str, _Source] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
        found.setdefault(ep.name, _Source(ep.name, ep.module, None))
    return found


def _path_sources() -> dict[str, _Source]:
    found: dict[str, _Source] = {}
    for entry in os.environ.get(ENV_PATH, "").split(os.pathsep):
        folder = Path(entry.strip())
        if not entry.strip() or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py")):
            if not path.stem.startswith("_") and path.stem.isidentifier():
                found.setdefault(path.stem, _Source(path.stem, None, path))
    return found


def _sources() -> dict[str, _Source]:
    return {**_path_sources(), **_plugin_sources()}


def discover() -> dict[str, Path]:
    """Experiment name → module file, for every entry point and loose file (sorted by name)."""
    found = {name: src.file() for name, src in sorted(_sources().items())}
    return {name: path for name, path in found.items() if path is not None}


def code_files(name: str) -> list[Path]:
    """The files experiment ``name``'s code is read from, found without importing it: its
    module, or every ``.py`` file of its package; for a composite (the showcase), those of
    every experiment (``[]`` for an unknown name)."""
    found = discover()
    if name not in found:
        return []
    names = list(found) if describe(name, found[name]).composite else [name]
    files: list[Path] = []
    for each in names:
        path = found[each]
        files += sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
    return files


def config_files() -> list[Path]:
    """The ``*.toml`` configs next to the built-in experiments (the repository's ``configs/``)
    and in ``./configs`` of the working directory: sorted, without duplicates."""
    dirs: list[Path] = []
    own = [ep for ep in entry_points(group=GROUP)
           if ep.dist is not None and ep.dist.name == _DISTRIBUTION]
    where = _Source(own[0].name, own[0].module, None).file() if own else None
    if where is not None:  # <repository>/experiments/<name>.py → <repository>/configs
        dirs.append(where.parent.parent / "configs")
    dirs.append(Path.cwd() / "configs")
    seen: set[Path] = set()
    files: list[Path] = []
    for folder in dirs:
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
            if path.resolve() not in seen:
                seen.add(path.resolve())
                files.append(path)
    return files


def _import(source: _Source) -> ModuleType:
    if source.module is not None:
        return importlib.import_module(source.module)
    assert source.path is not None
    qualified = f"{_EXTERNAL_PACKAGE}.{source.name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, source.path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a spec
        raise ImportError(f"cannot import {source.path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[qualified]
        raise
    return module


def _load(source: _Source) -> Experiment:
    try:
        module = _import(source)
    except Exception as err:
        where = traceback.extract_tb(err.__traceback__)
        line = f" ({Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
        raise ExperimentLoadError(source.name, f"import failed: {type(err).__name__}: {err}"
                                               f"{line}") from err
    _check(source.name, module)
    return Experiment(source.name, module, Path(module.__file__ or ""), source)


@dataclass(frozen=True)
class Experiment:
    """A loaded experiment module and the parts of the contract it provides.

    ``Experiment.from_module(module)`` wraps a module that is not registered (a script run as
    ``python -m``, a module in a test).
    """

    name: str
    module: ModuleType
    path: Path
    source: _Source | None = None

    @classmethod
    def from_module(cls, module: ModuleType, name: str | None = None) -> Experiment:
        spec_name = getattr(getattr(module, "__spec__", None), "name", None) or module.__name__
        name = name or spec_name.rsplit(".", 1)[-1]
        _check(name, module)
        return cls(name, module, Path(module.__file__ or ""), _Source(name, spec_name, None))

    def __reduce__(self) -> tuple[Any, ...]:
        # by reference: a worker process imports the same module (or file) again
        if self.source is None:
            raise TypeError(f"experiment {self.name!r} has no source to load it from again")
        return _load, (self.source,)

    @property
    def parts(self) -> dict[str, Experiment]:
        """The experiments a run of this one may contain, by name: itself, and for a
        composite (the showcase, which defines ``parts()``) every one it can run."""
        fn = getattr(self.module, "parts", None)
        return {**(fn() if callable(fn) else {}), self.name: self}

    @property
    def blocks(self) -> tuple[str, ...]:
        """The names of the blocks a run of this experiment can meet, as it declares them: its
        module's ``BLOCKS`` (a tuple of names), else the block names it imports (an algorithm's
        ``BLOCK`` and ``*_BLOCK`` constants, its own or those of the modules its imported
        functions and classes come from); for a composite (the showcase) the union of its
        parts'. Empty when undeclared: then no ``disable_blocks`` pattern can be checked."""
        declared = getattr(self.module, "BLOCKS", None)
        if declared is not None:
            return tuple(declared)
        if callable(getattr(self.module, "parts", None)):
            union: dict[str, None] = {}
            for name, part in self.parts.items():
                if name != self.name:
                    if not part.blocks:
                        return ()  # one part without declared blocks: the union is unknown
                    union.update(dict.fromkeys(part.blocks))
            return tuple(union)
        found = _block_constants(vars(self.module))
        for value in list(vars(self.module).values()):
            origin = getattr(value, "__module__", None)
            if (inspect.isfunction(value) or inspect.isclass(value)) and origin in sys.modules \
                    and origin != self.module.__name__:
                found.update(_block_constants(vars(sys.modules[origin])))
        return tuple(found)

    Params = property(lambda self: self.module.Params)
    run = property(lambda self: self.module.run)
    #: ``findings(run)`` / ``figures(run)``, or ``None`` when the experiment has none
    findings = property(lambda self: _callable(getattr(self.module, "findings", None)))
    figures = property(lambda self: _callable(getattr(self.module, "figures", None)))
    story = property(lambda self: getattr(self.module, "STORY", None))
    #: the precision the comparison is defined in (``DTYPE``), if declared
    dtype = property(lambda self: getattr(self.module, "DTYPE", None))

    @property
    def description(self) -> str:
        return _first_line(str(getattr(self.module, "DESCRIPTION", None)
                               or self.module.__doc__ or ""))

    @property
    def quick(self) -> dict[str, Any] | None:
        quick = getattr(self.module, "QUICK", None)
        return None if quick is None else dict(quick)


def _callable(value: Any) -> Any:
    return value if callable(value) else None


def _block_constants(namespace: dict[str, Any]) -> dict[str, None]:
    """The values of ``BLOCK`` and ``*_BLOCK`` string constants of a module namespace."""
    return {value: None for key, value in namespace.items()
            if (key == "BLOCK" or key.endswith("_BLOCK")) and isinstance(value, str)}


def _check(name: str, module: ModuleType) -> None:
    params = getattr(module, "Params", None)
    if not (isinstance(params, type) and issubclass(params, ExperimentParams)):
        raise ExperimentLoadError(name, "it must define `class Params(ExperimentParams)` "
                                        "(from toolkit.lab import ExperimentParams)")
    problems = contract_problems(module)
    if problems:
        raise ExperimentLoadError(name, "; ".join(problems))
    quick = getattr(module, "QUICK", None)
    if quick is not None:
        if not isinstance(quick, dict):
            raise ExperimentLoadError(name, f"QUICK must be a dict of parameter overrides, got "
                                            f"{type(quick).__name__}")
        try:
            params.model_validate(quick)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise ExperimentLoadError(name, f"QUICK is not valid for Params: {loc}: "
                                            f"{first['msg']}") from None


def load_experiment(name: str) -> Experiment:
    """Load and check experiment ``name``: ``KeyError`` when none has that name,
    :class:`ExperimentLoadError` when it fails to import or breaks the contract."""
    sources = _sources()
    if name not in sources:
        raise KeyError(name)
    return _load(sources[name])


def load_all() -> tuple[dict[str, Experiment], dict[str, str]]:
    """Every discovered experiment: ``(loaded, broken)``, ``broken`` maps name → problem (one
    broken module never hides the others)."""
    loaded: dict[str, Experiment] = {}
    broken: dict[str, str] = {}
    for name, source in sorted(_sources().items()):
        try:
            loaded[name] = _load(source)
        except ExperimentLoadError as err:
            broken[name] = err.problem
    return loaded, broken


@dataclass(frozen=True)
class ExperimentInfo:
    """What an experiment module's source says, read without importing it (``problem``: a
    missing ``Params`` or ``run``; import errors show only on importing, :func:`load_all`)."""

    name: str
    path: Path
    description: str
    has_quick: bool
    problem: str | None
    composite: bool = False  # it defines ``parts()``: it runs others (the showcase)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines[0] if lines else ""


def describe(name: str, path: Path) -> ExperimentInfo:
    """``DESCRIPTION``, ``QUICK``, ``Params``, ``run`` and ``parts`` read from the module's
    source (``ast``): ``toolkit list`` answers at once, without importing torch."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as err:
        return ExperimentInfo(name, path, "", False, f"cannot be read: {type(err).__name__}: {err}")
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(dict.fromkeys((a.asname or a.name).split(".")[0] for a in node.names))
        elif hasattr(node, "name"):  # a class or a function
            names[node.name] = None
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            if isinstance(target, ast.Name):
                names[target.id] = getattr(node.value, "value", None)
    text = names.get("DESCRIPTION")
    description = _first_line(text if isinstance(text, str) else ast.get_docstring(tree) or "")
    problems = [problem for key, problem in (
        ("Params", "it must define `class Params(ExperimentParams)` (from toolkit.lab import "
                   "ExperimentParams)"), ("run", "it must define `run(params, ctx)`"))
        if key not in names]
    return ExperimentInfo(name, path, description, "QUICK" in names, "; ".join(problems) or None,
                          "parts" in names)


class ExperimentParams(BaseModel):
    """Base class of an experiment's ``Params``: a pydantic model, unknown keys rejected, frozen.
    Declare each field with ``Field(default, description="...")`` and constraints (``ge``,
    ``gt``...): a config's ``[params]`` is validated against it, a mistake reported as one line
    naming the file, the key path and the fix."""

    # inf and nan stay numbers in config.toml (pydantic writes an untyped one as null)
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              ser_json_inf_nan="constants")

_DTYPES = ("float32", "float64")


def _takes(fn: Callable[..., Any], n: int) -> bool:
    """Whether ``fn`` can be called with ``n`` positional arguments (a builtin without a
    signature is trusted)."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:
        pass
    return True


#: optional callables: name -> (arguments, how it is called)
_HOOKS = {"run": (2, "run(params, ctx)"), "findings": (1, "findings(run)"),
          "figures": (1, "figures(run)"), "parts": (0, "parts()")}


def contract_problems(module: ModuleType) -> list[str]:
    """What ``module`` gets wrong of the contract beyond ``Params`` and ``QUICK`` (checked by
    the registry): each a sentence naming the hook and what it must be; empty when it keeps
    to it."""
    problems = []
    for name, (n, call) in _HOOKS.items():
        value = getattr(module, name, None)
        if value is None:
            if name == "run":
                problems.append("it must define `run(params, ctx)`")
            continue
        if not callable(value):
            problems.append(f"`{name}` must be a function called as `{call}`, got "
                            f"{type(value).__name__}")
        elif not _takes(value, n):
            problems.append(f"`{name}` must accept {n} argument{'s' * (n != 1)} "
                            f"(`{call}`), its signature is {name}{inspect.signature(value)}")
    dtype, text, blocks = (getattr(module, k, None) for k in ("DTYPE", "DESCRIPTION", "BLOCKS"))
    problems += [problem for ok, problem in (
        (dtype in (None, *_DTYPES), f"DTYPE must be one of {', '.join(map(repr, _DTYPES))}, "
                                    f"got {dtype!r}"),
        (text is None or isinstance(text, str), f"DESCRIPTION must be a string, got "
                                                f"{type(text).__name__}"),
        (blocks is None or (isinstance(blocks, (tuple, list))
                            and all(isinstance(b, str) for b in blocks)),
         "BLOCKS must be a tuple of block names (strings)")) if not ok]
    problems += _metrics_problems(getattr(module, "METRICS", None))
    params = getattr(module, "Params", None)
    if isinstance(params, type) and issubclass(params, BaseModel):
        problems += _none_defaults(params)
    return problems


def _none_defaults(params: type[BaseModel]) -> list[str]:
    """A parameter that may be ``None`` must default to ``None``: TOML has no null, so
    ``config.toml`` leaves a ``None`` out, and the default is what reading it back gives."""
    return [f"Params.{name} may be None, so it must default to None (TOML has no null: a None "
            f"left out of config.toml reads back as the default {info.default!r})"
            for name, info in params.model_fields.items()
            if get_origin(info.annotation) in (Union, types.UnionType)
            and type(None) in get_args(info.annotation) and not info.is_required()
            and info.default is not None]


def _metrics_problems(metrics: Any) -> list[str]:
    """What is wrong with a ``METRICS`` hook (``None``: not defined, nothing wrong)."""
    if metrics is None:
        return []
    if not (isinstance(metrics, (tuple, list)) and all(isinstance(m, MetricDoc) for m in metrics)):
        return ["METRICS must be a tuple of toolkit.lab.MetricDoc (key pattern, "
                "meaning, unit)"]
    keys = [m.key for m in metrics]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    return [f"METRICS declares {', '.join(twice)} more than once"] if twice else []
