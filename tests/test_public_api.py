"""The package's public names: every name in __all__ loads, and nothing heavy loads with it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import toolkit
import toolkit.core
import toolkit.runner
from toolkit._utils import moved
from toolkit._utils.lazy import imported_names


@pytest.mark.parametrize("package", [toolkit, toolkit.core, toolkit.runner],
                         ids=lambda m: m.__name__)
def test_every_public_name_loads(package) -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert sorted(dir(package)) == sorted(set(dir(package)))


def test_the_imports_of_toolkit_core_are_the_one_export_list() -> None:
    """toolkit.core's imports give its __all__, and toolkit's __all__ and lazy table."""
    listed = imported_names(toolkit.core.__file__, "toolkit.core")
    public = {name for name, value in vars(toolkit.core).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert toolkit.core.__all__ == sorted(listed) == sorted(public)
    assert toolkit.__all__ == sorted(["__version__", *toolkit._EXPORTS])
    assert set(toolkit._EXPORTS) == set(listed) - {"is_compiling"}
    for name, module in toolkit._EXPORTS.items():
        defined = getattr(importlib.import_module(module), name)
        assert getattr(toolkit, name) is getattr(toolkit.core, name) is defined, name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'toolkit' has no attribute 'nope'"):
        toolkit.nope  # noqa: B018


def test_import_toolkit_imports_neither_torch_nor_matplotlib() -> None:
    code = ("import sys, toolkit, toolkit.runner\n"
            "heavy = [m for m in ('torch', 'matplotlib', 'sklearn', 'torch._dynamo') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_module_path_warns_and_is_the_new_module(old: str) -> None:
    code = ("import importlib, warnings\n"
            "warnings.simplefilter('error')\n"
            f"new = importlib.import_module({moved.MOVED[old]!r})\n"
            "try:\n"
            f"    importlib.import_module({old!r})\n"
            "except DeprecationWarning as w:\n"
            f"    assert {moved.MOVED[old]!r} in str(w), str(w)\n"
            "else:\n"
            "    raise SystemExit('no DeprecationWarning')\n"
            "warnings.simplefilter('ignore')\n"
            f"assert importlib.import_module({old!r}) is new\n"
            f"assert new.__spec__.name == {moved.MOVED[old]!r}, new.__spec__\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout


def test_a_module_that_did_not_move_is_not_redirected() -> None:
    assert moved.new_name("toolkit.core.stop_gradient") is None


def test_no_source_file_over_its_line_cap() -> None:
    """Library modules keep to 500 lines; an experiment, read top to bottom as one file
    (params, run, findings, figures), may run to 600."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [p for folder in ("toolkit", "experiments", "benchmarks", "scripts", "tests")
             for p in (root / folder).rglob("*.py")]
    long = {str(p.relative_to(root)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines()))
            > (600 if p.is_relative_to(root / "experiments") else 500)}
    assert not long, long
