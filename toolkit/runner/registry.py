"""Experiment registry: discovers experiment modules and the configs that come with them.

An experiment is a module ``experiments/<name>.py`` defining a ``Params`` model (a subclass of
:class:`~toolkit.runner.ExperimentParams`) and ``run(params, ctx)``; optionally ``DESCRIPTION``
(one line), ``QUICK`` (parameter overrides for a fast run) and ``figures(run)``.

Modules are found in the installed ``experiments`` package and in the folders listed in the
environment variable ``TOOLKIT_EXPERIMENTS_PATH`` (separated by ``os.pathsep``); the package wins
on a name clash. Configs are the ``*.toml`` files in ``configs/`` next to the ``experiments``
package (the repository root) and in ``./configs`` of the working directory.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from toolkit.runner.errors import ExperimentLoadError

__all__ = [
    "ENV_PATH",
    "Experiment",
    "ExperimentInfo",
    "config_files",
    "describe",
    "discover",
    "load_all",
    "load_experiment",
]

ENV_PATH = "TOOLKIT_EXPERIMENTS_PATH"
_EXTERNAL_PACKAGE = "_toolkit_external_experiments"


def _package_dir() -> Path | None:
    try:
        import experiments
    except ImportError:  # pragma: no cover - the package is installed with toolkit
        return None
    paths = list(getattr(experiments, "__path__", []))
    return Path(paths[0]) if paths else None


def experiment_dirs() -> list[Path]:
    """Folders searched for experiment modules, in priority order."""
    dirs: list[Path] = []
    pkg = _package_dir()
    if pkg is not None:
        dirs.append(pkg)
    for entry in os.environ.get(ENV_PATH, "").split(os.pathsep):
        if entry.strip():
            dirs.append(Path(entry.strip()))
    return dirs


def discover() -> dict[str, Path]:
    """Experiment name → module file, for every ``*.py`` not starting with ``_``."""
    found: dict[str, Path] = {}
    for folder in experiment_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py")):
            if path.stem.startswith("_") or not path.stem.isidentifier():
                continue
            found.setdefault(path.stem, path)
    return found


def config_files() -> list[Path]:
    """The ``*.toml`` configs that come with the experiments, sorted, without duplicates."""
    dirs: list[Path] = []
    pkg = _package_dir()
    if pkg is not None:
        dirs.append(pkg.parent / "configs")
    dirs.append(Path.cwd() / "configs")
    seen: set[Path] = set()
    files: list[Path] = []
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            resolved = path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                files.append(path)
    return files


@dataclass(frozen=True)
class Experiment:
    """A loaded experiment module and the parts of the contract it provides."""

    name: str
    module: ModuleType
    path: Path

    @property
    def Params(self) -> type[BaseModel]:
        return self.module.Params

    @property
    def run(self) -> Callable[..., Any]:
        return self.module.run

    @property
    def description(self) -> str:
        text = getattr(self.module, "DESCRIPTION", None) or (self.module.__doc__ or "")
        lines = [line.strip() for line in str(text).strip().splitlines()]
        return lines[0] if lines else ""

    @property
    def quick(self) -> dict[str, Any] | None:
        quick = getattr(self.module, "QUICK", None)
        return None if quick is None else dict(quick)

    @property
    def figures(self) -> Callable[..., Any] | None:
        fn = getattr(self.module, "figures", None)
        return fn if callable(fn) else None


def _import(name: str, path: Path) -> ModuleType:
    pkg = _package_dir()
    if pkg is not None and path.parent.resolve() == pkg.resolve():
        return importlib.import_module(f"experiments.{name}")
    qualified = f"{_EXTERNAL_PACKAGE}.{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a spec
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[qualified]
        raise
    return module


def _check(name: str, module: ModuleType) -> None:
    from toolkit.runner.params import ExperimentParams

    params = getattr(module, "Params", None)
    if not (isinstance(params, type) and issubclass(params, ExperimentParams)):
        raise ExperimentLoadError(name, "it must define `class Params(ExperimentParams)` "
                                        "(from toolkit.runner import ExperimentParams)")
    if not callable(getattr(module, "run", None)):
        raise ExperimentLoadError(name, "it must define `run(params, ctx)`")
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
    """Import and check experiment ``name``.

    Raises ``KeyError`` when no module has that name and :class:`ExperimentLoadError` when the
    module fails to import or does not follow the contract.
    """
    found = discover()
    if name not in found:
        raise KeyError(name)
    path = found[name]
    try:
        module = _import(name, path)
    except Exception as err:
        where = traceback.extract_tb(err.__traceback__)
        line = f" ({Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
        raise ExperimentLoadError(name, f"import failed: {type(err).__name__}: {err}{line}"
                                  ) from err
    _check(name, module)
    return Experiment(name, module, path)


def load_all() -> tuple[dict[str, Experiment], dict[str, str]]:
    """Every discovered experiment: ``(loaded, broken)`` where ``broken`` maps name → problem.

    One broken module never hides the others.
    """
    loaded: dict[str, Experiment] = {}
    broken: dict[str, str] = {}
    for name in discover():
        try:
            loaded[name] = load_experiment(name)
        except ExperimentLoadError as err:
            broken[name] = err.problem
    return loaded, broken


@dataclass(frozen=True)
class ExperimentInfo:
    """What the source of an experiment module says, read without importing it.

    ``problem`` is ``None`` when the module parses and defines ``Params`` and ``run``;
    failures at import time show only when the module is imported (:func:`load_all`).
    """

    name: str
    path: Path
    description: str
    has_quick: bool
    problem: str | None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines[0] if lines else ""


def describe(name: str, path: Path) -> ExperimentInfo:
    """Read ``DESCRIPTION``, ``QUICK``, ``Params`` and ``run`` from the module's source (``ast``).

    ``toolkit list`` uses this so that it answers at once, without importing torch or the
    experiments.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as err:
        return ExperimentInfo(name, path, "", False, f"cannot be read: {type(err).__name__}: {err}")
    assigned: dict[str, ast.expr | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            assigned[node.name] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            assigned[node.target.id] = node.value
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                assigned[(alias.asname or alias.name).split(".")[0]] = None
    description = ""
    value = assigned.get("DESCRIPTION")
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        description = _first_line(value.value)
    elif ast.get_docstring(tree):
        description = _first_line(ast.get_docstring(tree) or "")
    problems = []
    if "Params" not in assigned:
        problems.append("it must define `class Params(ExperimentParams)` "
                        "(from toolkit.runner import ExperimentParams)")
    if "run" not in assigned:
        problems.append("it must define `run(params, ctx)`")
    return ExperimentInfo(name, path, description, "QUICK" in assigned,
                          "; ".join(problems) or None)
