"""The pytest plugin: the ``clean_step`` fixture, registered through the ``pytest11`` entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

USER_TESTS = '''
import copy
import torch

q = torch.nn.Linear(3, 2)
q_target = copy.deepcopy(q)
opt = torch.optim.SGD(q.parameters(), lr=0.1)
s = torch.ones(4, 3)


def test_clean(clean_step):
    audit = clean_step(lambda: (q(s) - q_target(s).detach()).pow(2).mean(), opt)
    assert audit.ok


def test_leaky(clean_step):
    clean_step(lambda: (q(s) - q_target(s)).pow(2).mean(), opt)
'''


def _installed() -> bool:
    return any(ep.name == "toolkit" and ep.value == "toolkit.pytest_plugin"
               for ep in metadata.entry_points(group="pytest11"))


def test_the_entry_point_is_declared() -> None:
    from tomllib import loads

    project = loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"toolkit": "toolkit.pytest_plugin"}


@pytest.mark.slow
def test_the_fixture_passes_a_clean_step_and_fails_a_leaky_one(tmp_path: Path) -> None:
    (tmp_path / "test_user_step.py").write_text(USER_TESTS)
    # an installed package registers the plugin itself; a checkout not yet reinstalled loads it
    plugin = [] if _installed() else ["-p", "toolkit.pytest_plugin"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *plugin, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=_env(), timeout=120)
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "GradientLeakError: audit_step: 2 leaking tensors" in proc.stdout
    assert "fix:  detach the output of q_target (shape (4, 2)) where it is made" in proc.stdout
    # the user's own line, as pytest names a failing one
    assert "at:   test_user_step.py:17: clean_step(lambda: (q(s) - q_target(s))" in proc.stdout
    # the report, not the toolkit's own frame and docstring (pytest's __tracebackhide__)
    assert "def assert_clean_step" not in proc.stdout and ">>> import torch" not in proc.stdout


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p)}


def test_importing_the_plugin_loads_no_torch() -> None:
    code = ("import sys, toolkit.pytest_plugin\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
