"""The package's public names: every name in __all__ loads, nothing heavy loads with it, old
module paths are gone (no shims), and imports run one way."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import toolkit
import toolkit.audit
import toolkit.core
import toolkit.lab
import toolkit.lens

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", [toolkit, toolkit.core, toolkit.lens, toolkit.audit,
                                     toolkit.lab],
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


def test_toolkit_exports_the_primitive_the_lens_and_the_audit() -> None:
    assert set(toolkit._CORE) == set(toolkit.core.__all__) - {"is_compiling"}
    assert set(toolkit._LENS) == set(toolkit.lens.__all__)
    assert set(toolkit._AUDIT) == set(toolkit.audit.__all__) - {"RULES", "Edit", "apply_edits",
                                                                 "Kind", "Proof"}
    assert len(toolkit.__all__) == len(set(toolkit.__all__))
    for names, package in ((toolkit._CORE, toolkit.core), (toolkit._LENS, toolkit.lens),
                           (toolkit._AUDIT, toolkit.audit)):
        for name in names:
            assert getattr(toolkit, name) is getattr(package, name), name


def test_the_lab_lists_its_lazy_names_once() -> None:
    lab = toolkit.lab
    assert len(lab.__all__) == len(set(lab.__all__)) and set(lab.__all__) == set(lab._EXPORTS)
    for name, module in lab._EXPORTS.items():
        assert getattr(lab, name) is getattr(importlib.import_module(module), name), name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'toolkit' has no attribute 'nope'"):
        toolkit.nope  # noqa: B018


def test_import_toolkit_imports_neither_torch_nor_matplotlib() -> None:
    code = ("import sys, toolkit, toolkit.lab, toolkit.lab.cli\n"
            "heavy = [m for m in ('torch', 'matplotlib', 'sklearn', 'torch._dynamo') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


#: Module paths that no longer exist: the import shims of ``toolkit._utils.moved`` are gone
#: (issue 52: no release ever had those paths), and so are the lab's old runner and schema.
GONE = ("toolkit._utils.moved", "toolkit.runner", "toolkit.runner.config", "toolkit.cli",
        "toolkit.data", "toolkit.measure", "toolkit.report", "toolkit.style",
        "toolkit.core.audit", "toolkit.audit_graph", "toolkit.lab.runner",
        "toolkit.lab.runner.config", "toolkit.lab.runner.tomlio", "toolkit.lab.schema",
        "toolkit.lab.planning", "toolkit.lens.audit", "toolkit.lens.unused",
        "toolkit.audit.watch", "toolkit.audit.watch.session", "toolkit.audit.watch.cli",
        "toolkit.audit.watch.source", "toolkit.audit.watch.verify", "toolkit.audit.watch.edits",
        "toolkit.audit.watch.findings")

_GONE_PROBE = """
import importlib, json, sys
still = {}
for old in json.loads(sys.argv[1]):
    try:
        module = importlib.import_module(old)
    except ModuleNotFoundError:
        continue
    still[old] = module.__spec__.name
print(json.dumps(still))
"""


@pytest.mark.slow  # a subprocess
def test_old_module_paths_are_gone() -> None:
    out = subprocess.run([sys.executable, "-c", _GONE_PROBE, json.dumps(GONE)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}
    assert not any(type(f).__module__.startswith("toolkit") for f in sys.meta_path)


#: What an experiment, a notebook or a test is written with: ``from toolkit.lab import ...``.
LAB_NAMES = {
    "errors": {"ConfigError", "DamagedFile", "ExperimentLoadError", "RunInterrupted"},
    "experiments": {"Experiment", "ExperimentParams", "discover", "load_all", "load_experiment"},
    "planning": {"Plan", "RunSpec", "plan_one"},
    "running": {"RunContext", "RunOutcome", "run_all", "run_experiment"},
    "findings": {"Finding", "Headline", "Story", "TimeRatio", "Verdict"},
    "schema": {"BLOCKED", "UNBLOCKED", "VARIANTS", "MetricDoc", "RunConfig", "metric_key"},
    "results": {"RunResults", "SeedGroup", "find_runs", "group_runs", "read_findings",
                "write_group", "fmt"},
}


def test_the_lab_exports_the_authoring_names() -> None:
    lab = toolkit.lab
    assert set(lab.__all__) == set().union(*LAB_NAMES.values())
    # no name hides a subpackage of the lab (``toolkit.lab.plan`` is the package, always)
    subpackages = {p.stem for p in (ROOT / "toolkit" / "lab").iterdir()
                   if not p.name.startswith("_")}
    assert not set(lab.__all__) & subpackages, set(lab.__all__) & subpackages
    assert isinstance(importlib.import_module("toolkit.lab.plan"), types.ModuleType)


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
    "toolkit/audit": ("toolkit.core", "toolkit.lens", "toolkit.audit", "toolkit._utils"),
    "toolkit/integrations": ("toolkit.core", "toolkit.lens", "toolkit.audit",
                             "toolkit.integrations", "toolkit._utils"),
    "toolkit/_utils": ("toolkit._utils",),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_imports_run_one_way(layer: str) -> None:
    """The primitive imports nothing of the toolkit; the lens and the algorithms only the
    primitive (and ``_utils``); the audit only the lens; the integrations only the audit and the
    lens; nothing below the lab imports the lab."""
    allowed = LAYERS[layer]
    wrong = {f"{path.relative_to(ROOT)}: {name}"
             for path in (ROOT / layer).rglob("*.py") for name in _imports(path)
             if not any(name == a or name.startswith(a + ".") for a in allowed)}
    assert not wrong, sorted(wrong)


def test_no_loose_module_at_the_top_of_the_package() -> None:
    loose = {p.name for p in (ROOT / "toolkit").glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "pytest_plugin.py"}, loose

