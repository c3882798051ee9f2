"""The package's public names: every name in __all__ loads, nothing heavy loads with it, old
module paths still import (with a DeprecationWarning), and imports run one way."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import toolkit
import toolkit.core
import toolkit.lab.runner
import toolkit.lens
from toolkit._utils import moved

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", [toolkit, toolkit.core, toolkit.lens, toolkit.lab.runner],
                         ids=lambda m: m.__name__)
def test_every_public_name_loads(package) -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert sorted(dir(package)) == sorted(set(dir(package)))


@pytest.mark.parametrize("package", [toolkit.core, toolkit.lens], ids=lambda m: m.__name__)
def test_a_subpackage_exports_exactly_what_it_imports(package) -> None:
    public = {name for name, value in vars(package).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert sorted(package.__all__) == package.__all__ == sorted(public)


def test_toolkit_exports_the_primitive_and_the_lens() -> None:
    assert set(toolkit._CORE) == set(toolkit.core.__all__) - {"is_compiling"}
    assert set(toolkit._LENS) == set(toolkit.lens.__all__)
    assert len(toolkit.__all__) == len(set(toolkit.__all__))
    for names, package in ((toolkit._CORE, toolkit.core), (toolkit._LENS, toolkit.lens)):
        for name in names:
            assert getattr(toolkit, name) is getattr(package, name), name


def test_the_runner_lists_its_lazy_names_once() -> None:
    runner = toolkit.lab.runner
    assert runner.__all__ == sorted(runner._EXPORTS)
    for name, module in runner._EXPORTS.items():
        assert getattr(runner, name) is getattr(importlib.import_module(module), name), name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'toolkit' has no attribute 'nope'"):
        toolkit.nope  # noqa: B018


def test_import_toolkit_imports_neither_torch_nor_matplotlib() -> None:
    code = ("import sys, toolkit, toolkit.lab.runner, toolkit.lab.cli\n"
            "heavy = [m for m in ('torch', 'matplotlib', 'sklearn', 'torch._dynamo') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


#: In one fresh interpreter (none of the old names imported yet), for each old path in turn:
#: the new module, then the old path's first import (it must warn, naming the new path), then
#: the old path again (the same module object, keeping its new name). A failure is recorded
#: against its old path, so that each parametrized test below reports only its own.
_MOVED_PROBE = """
import importlib, json, sys, warnings
failures = {}
for old, new_path in json.loads(sys.argv[1]).items():
    try:
        if old in sys.modules:
            raise AssertionError(f"imported before its own check: {sorted(sys.modules)}")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            new = importlib.import_module(new_path)
            try:
                importlib.import_module(old)
            except DeprecationWarning as w:
                assert new_path in str(w), str(w)
            else:
                raise AssertionError("no DeprecationWarning")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert importlib.import_module(old) is new
        assert new.__spec__.name == new_path, new.__spec__
    except BaseException as e:
        failures[old] = f"{type(e).__name__}: {e}"
print(json.dumps(failures))
"""


@pytest.fixture(scope="session")
def moved_failures() -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", _MOVED_PROBE, json.dumps(moved.MOVED)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_module_path_warns_and_is_the_new_module(old: str, moved_failures) -> None:
    assert old not in moved_failures, moved_failures[old]


def test_a_submodule_of_a_moved_package_is_the_same_module() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("toolkit.runner.config")
    assert old is importlib.import_module("toolkit.lab.runner.config")
    assert moved.new_name("toolkit.core.stop_gradient") is None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "toolkit" or name.startswith("toolkit.")}


# layer -> the toolkit packages it may import (``toolkit._utils`` is open to every layer)
LAYERS = {
    "toolkit/core": ("toolkit.core", "toolkit._utils"),
    "toolkit/lens": ("toolkit.core", "toolkit.lens", "toolkit._utils"),
    "toolkit/algorithms": ("toolkit.core", "toolkit.algorithms", "toolkit._utils"),
    "toolkit/integrations": ("toolkit.core", "toolkit.lens", "toolkit.integrations",
                             "toolkit._utils"),
    "toolkit/_utils": ("toolkit._utils",),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_imports_run_one_way(layer: str) -> None:
    """The primitive imports nothing of the toolkit; the lens and the algorithms only the
    primitive (and ``_utils``); the integrations only the lens; nothing below the lab imports
    the lab."""
    allowed = LAYERS[layer]
    wrong = {f"{path.relative_to(ROOT)}: {name}"
             for path in (ROOT / layer).rglob("*.py") for name in _imports(path)
             if not any(name == a or name.startswith(a + ".") for a in allowed)}
    assert not wrong, sorted(wrong)


def test_no_loose_module_at_the_top_of_the_package() -> None:
    loose = {p.name for p in (ROOT / "toolkit").glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "pytest_plugin.py"}, loose

