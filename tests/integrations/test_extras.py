"""The integrations are optional: ``import toolkit`` never imports a training framework, and
a missing extra is an ``ImportError`` that names it."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.slow  # a subprocess
def test_import_toolkit_never_imports_a_framework() -> None:
    done = _run("import sys, toolkit, toolkit.integrations\n"
                "toolkit.explain_unused_parameters, toolkit.audit_step\n"
                "loaded = [m for m in ('lightning', 'pytorch_lightning', 'transformers', "
                "'accelerate') if m in sys.modules]\n"
                "assert not loaded, loaded\n")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # a subprocess per extra
@pytest.mark.parametrize(("module", "extra", "blocked"), [
    ("lightning", "lightning", ("lightning", "lightning.pytorch", "pytorch_lightning")),
    ("transformers", "transformers", ("transformers",)),
])
def test_a_missing_extra_is_named(module: str, extra: str, blocked: tuple[str, ...]) -> None:
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)  # as if not installed
    done = _run(f"import sys\n{hide}import toolkit.integrations.{module}\n")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: toolkit.integrations.") and (
        f'pip install -e ".[{extra}]"' in last), done.stderr
