"""Experiments found as plugins and loaded into checked :class:`Experiment` objects.

An experiment is a module with ``Params`` (an :class:`ExperimentParams`) and ``run(params,
ctx)``; optionally ``QUICK``, ``DTYPE``, ``DESCRIPTION``, ``STORY``, ``BLOCKS``, ``METRICS``,
``findings(run)``, ``figures(run)`` and ``parts()`` (a composite: the showcase), each checked
on loading. Found through the entry-point group ``toolkit.experiments`` and as loose ``*.py``
files in the folders of ``TOOLKIT_EXPERIMENTS_PATH`` (the entry point wins a clash).
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
           "describe", "discover", "load_all", "load_experiment"]

GROUP = "toolkit.experiments"
ENV_PATH = "TOOLKIT_EXPERIMENTS_PATH"
_EXTERNAL_PACKAGE = "_toolkit_external_experiments"
#: what a module without ``Params`` or ``run`` is told
_NEEDS = {"Params": "it must define `class Params(ExperimentParams)` (from toolkit.lab import "
                    "ExperimentParams)", "run": "it must define `run(params, ctx)`"}


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


def _sources() -> dict[str, _Source]:
    """Every experiment by name: the loose files of ``TOOLKIT_EXPERIMENTS_PATH`` (the first
    folder wins), then the entry points over them (the first by name wins)."""
    found: dict[str, _Source] = {}
    for entry in filter(None, map(str.strip, os.environ.get(ENV_PATH, "").split(os.pathsep))):
        for path in sorted(Path(entry).glob("*.py")):
            if not path.stem.startswith("_") and path.stem.isidentifier():
                found.setdefault(path.stem, _Source(path.stem, None, path))
    eps = reversed(sorted(entry_points(group=GROUP), key=lambda ep: ep.name))
    return {**found, **{ep.name: _Source(ep.name, ep.module, None) for ep in eps}}


def discover() -> dict[str, Path]:
    """Experiment name → module file, for every entry point and loose file (sorted by name)."""
    found = {name: src.file() for name, src in sorted(_sources().items())}
    return {name: path for name, path in found.items() if path is not None}


def code_files(name: str) -> list[Path]:
    """The files of experiment ``name``'s code (its module, or its package's ``.py`` files; for
    a composite, those of every experiment), found without importing it."""
    found = discover()
    if name not in found:
        return []
    names = list(found) if describe(found[name]).composite else [name]
    files: list[Path] = []
    for each in names:
        path = found[each]
        files += sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
    return files


def config_files() -> list[Path]:
    """The ``*.toml`` configs of the repository's ``configs/`` (when the toolkit runs from its
    repository) and of ``./configs``: sorted, each once."""
    repository = Path(__file__).resolve().parents[3]  # <repository>/toolkit/lab/plan/
    dirs = [repository / "configs"] if (repository / "pyproject.toml").is_file() else []
    found: dict[Path, Path] = {}
    for folder in [*dirs, Path.cwd() / "configs"]:
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.resolve(), path)
    return list(found.values())


def _import(source: _Source) -> ModuleType:
    if source.module is not None:
        return importlib.import_module(source.module)
    qualified = f"{_EXTERNAL_PACKAGE}.{source.name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, source.path)  # a .py file: a spec
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
    """A loaded experiment module and the parts of the contract it provides;
    ``Experiment.from_module`` wraps one that is not registered. It pickles by reference."""

    name: str
    module: ModuleType
    path: Path
    source: _Source | None = None

    @classmethod
    def from_module(cls, module: ModuleType) -> Experiment:
        spec_name = getattr(getattr(module, "__spec__", None), "name", None) or module.__name__
        name = spec_name.rsplit(".", 1)[-1]
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
        """The blocks a run can meet: ``BLOCKS``, else the ``BLOCK``/``*_BLOCK`` constants of its
        module and of those its code comes from (a composite: its parts'); empty: unknown."""
        declared = getattr(self.module, "BLOCKS", None)
        if declared is not None:
            return tuple(declared)
        if callable(getattr(self.module, "parts", None)):
            parts = [part.blocks for name, part in self.parts.items() if name != self.name]
            # one part without declared blocks: the union is unknown
            return tuple(dict.fromkeys(b for blocks in parts for b in blocks)) if all(parts) else ()
        modules = {self.module.__name__: self.module}  # its own, then where its code comes from
        for value in list(vars(self.module).values()):
            origin = getattr(value, "__module__", None)
            if (inspect.isfunction(value) or inspect.isclass(value)) and origin in sys.modules:
                modules.setdefault(origin, sys.modules[origin])
        return tuple(dict.fromkeys(value for module in modules.values()
                                   for key, value in vars(module).items()
                                   if (key == "BLOCK" or key.endswith("_BLOCK"))
                                   and isinstance(value, str)))

    Params = property(lambda self: self.module.Params)
    run = property(lambda self: self.module.run)
    #: ``findings(run)`` / ``figures(run)``, or ``None`` when the experiment has none
    findings = property(lambda self: _callable(getattr(self.module, "findings", None)))
    figures = property(lambda self: _callable(getattr(self.module, "figures", None)))
    story = property(lambda self: getattr(self.module, "STORY", None))
    #: the precision the comparison is defined in (``DTYPE``), if declared
    dtype = property(lambda self: getattr(self.module, "DTYPE", None))
    description = property(lambda self: _first_line(str(
        getattr(self.module, "DESCRIPTION", None) or self.module.__doc__ or "")))
    #: a copy of ``QUICK``, or ``None``
    quick = property(lambda self: None if getattr(self.module, "QUICK", None) is None
                     else dict(self.module.QUICK))


def _callable(value: Any) -> Any:
    return value if callable(value) else None


def load_experiment(name: str) -> Experiment:
    """Load and check experiment ``name``: ``KeyError`` when none has that name,
    :class:`ExperimentLoadError` when it fails to import or breaks the contract."""
    return _load(_sources()[name])


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

    description: str
    has_quick: bool
    problem: str | None
    composite: bool = False  # it defines ``parts()``: it runs others (the showcase)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0].strip()


def describe(path: Path) -> ExperimentInfo:
    """``DESCRIPTION``, ``QUICK``, ``Params``, ``run`` and ``parts`` read from the module's
    source (``ast``): ``toolkit list`` answers at once, without importing torch."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as err:
        return ExperimentInfo("", False, f"cannot be read: {type(err).__name__}: {err}")
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
    problems = "; ".join(problem for key, problem in _NEEDS.items() if key not in names)
    return ExperimentInfo(description, "QUICK" in names, problems or None, "parts" in names)


class ExperimentParams(BaseModel):
    """Base class of an experiment's ``Params``: a frozen pydantic model, unknown keys rejected.
    Each field's ``Field(default, description=..., ge=...)`` validates a config's ``[params]``;
    a mistake is one line naming the file, the key and the fix."""

    # inf and nan stay numbers in config.toml (pydantic writes an untyped one as null)
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              ser_json_inf_nan="constants")


_DTYPES = ("float32", "float64")
#: the contract's callables: name -> (arguments, how it is called)
_HOOKS = {"run": (2, "run(params, ctx)"), "findings": (1, "findings(run)"),
          "figures": (1, "figures(run)"), "parts": (0, "parts()")}


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


def _check(name: str, module: ModuleType) -> None:
    """Raise :class:`ExperimentLoadError` naming each part of the contract ``module`` breaks."""
    params = getattr(module, "Params", None)
    if not (isinstance(params, type) and issubclass(params, ExperimentParams)):
        raise ExperimentLoadError(name, _NEEDS["Params"])
    problems = []
    for hook, (n, call) in _HOOKS.items():
        value = getattr(module, hook, None)
        if value is None and hook == "run":
            problems.append(_NEEDS["run"])
        elif value is not None and not callable(value):
            problems.append(f"`{hook}` must be a function called as `{call}`, got "
                            f"{type(value).__name__}")
        elif value is not None and not _takes(value, n):
            problems.append(f"`{hook}` must accept {n} argument{'s' * (n != 1)} "
                            f"(`{call}`), its signature is {hook}{inspect.signature(value)}")
    dtype, text, blocks, metrics, quick = (getattr(module, k, None) for k in (
        "DTYPE", "DESCRIPTION", "BLOCKS", "METRICS", "QUICK"))
    docs = isinstance(metrics, (tuple, list)) and all(isinstance(m, MetricDoc) for m in metrics)
    keys = [m.key for m in metrics] if docs else []
    twice = sorted({k for k in keys if keys.count(k) > 1})
    problems += [problem for ok, problem in (
        (dtype in (None, *_DTYPES), f"DTYPE must be one of {', '.join(map(repr, _DTYPES))}, "
                                    f"got {dtype!r}"),
        (text is None or isinstance(text, str), f"DESCRIPTION must be a string, got "
                                                f"{type(text).__name__}"),
        (blocks is None or (isinstance(blocks, (tuple, list))
                            and all(isinstance(b, str) for b in blocks)),
         "BLOCKS must be a tuple of block names (strings)"),
        (metrics is None or docs, "METRICS must be a tuple of toolkit.lab.MetricDoc (key "
                                  "pattern, meaning, unit)"),
        (not twice, f"METRICS declares {', '.join(twice)} more than once"),
        (quick is None or isinstance(quick, dict), f"QUICK must be a dict of parameter "
                                                   f"overrides, got {type(quick).__name__}"),
    ) if not ok]
    problems += [f"Params.{key} may be None, so it must default to None (TOML has no null: a "
                 f"None left out of config.toml reads back as the default {info.default!r})"
                 for key, info in params.model_fields.items()
                 if get_origin(info.annotation) in (Union, types.UnionType)
                 and type(None) in get_args(info.annotation) and not info.is_required()
                 and info.default is not None]
    try:
        if isinstance(quick, dict):
            params.model_validate(quick)
    except ValidationError as err:
        first = err.errors()[0]
        problems.append(f"QUICK is not valid for Params: "
                        f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")
    if problems:
        raise ExperimentLoadError(name, "; ".join(problems))
