"""The oracles of held-out cases, vouched for by a lock: tests marked ``oracle`` check a case
itself (its bug twin and its published twin run to their end, their backward passes watched),
not the toolkit. A case is committed once and never edited, so what its oracle says changes
only with its files or with torch: ``oracles.lock.json`` holds, for each test module whose
oracle tests all passed, the SHA-256 of what they read (:func:`digest`), and the torch they ran
on. Where a module's files hash as the lock says, on that torch, its oracle tests are
deselected (the run's header says how many); anywhere else (a new case, an edited one, another
torch, or ``TOOLKIT_ORACLES=run``) they run. The audit's own tests in those modules always run.

``python tests/oracles.py --lock`` runs every oracle test and, for each module whose oracle
tests all pass, writes its digest into the lock (a module that fails keeps no entry).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import torch

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
LOCK = TESTS / "oracles.lock.json"
TORCH = torch.__version__.split("+")[0]
#: a file name written in a module's source (a script of a case, as a string literal)
_NAMED = re.compile(r"""["']([\w.-]+\.(?:py|toml|json))["']""")
#: a module of the tests the module imports names from (its harness: ``script_audit``)
_FROM = re.compile(r"^from\s+([\w.]+)\s+import\b", re.MULTILINE)
#: the mark of an oracle test, as a decorator
_MARK = re.compile(r"^@pytest\.mark\.oracle\b", re.MULTILINE)


@cache
def _by_name() -> dict[str, tuple[Path, ...]]:
    """Every file under ``tests/``, by its name."""
    found: dict[str, list[Path]] = {}
    for path in TESTS.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            found.setdefault(path.name, []).append(path)
    return {name: tuple(sorted(paths)) for name, paths in found.items()}


def digest(module: Path) -> str:
    """The SHA-256 of what the oracle tests of ``module`` read: the module, the modules of the
    tests it imports from (by name, beside it or at the top of ``tests/``), and every file under
    ``tests/`` named by a string in its source (its cases' scripts), each by its path."""
    text = module.read_text(encoding="utf-8")
    files = {module}
    for name in _FROM.findall(text):
        files.update(p for p in (module.parent / f"{name}.py", TESTS / f"{name}.py")
                     if p.is_file())
    for name in _NAMED.findall(text):
        files.update(_by_name().get(name, ()))
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def key(module: Path) -> str:
    """The lock's name for ``module``: its path from the repository's root."""
    return module.resolve().relative_to(ROOT).as_posix()


def vouched(module: Path) -> bool:
    """Whether the lock vouches for the oracle tests of ``module``: its files hash as the lock
    says, on the lock's torch (never when ``TOOLKIT_ORACLES=run``)."""
    if os.environ.get("TOOLKIT_ORACLES") == "run" or not LOCK.is_file():
        return False
    lock = _lock()
    return lock.get("torch") == TORCH and lock.get("modules", {}).get(key(module)) == \
        digest(module)


@cache
def _lock() -> dict:
    try:
        lock = json.loads(LOCK.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RuntimeError(f"{LOCK.name} could not be read as JSON: {err}") from None
    if not isinstance(lock, dict) or not isinstance(lock.get("modules", {}), dict):
        raise RuntimeError(f"{LOCK.name}: expected an object with a 'modules' object, got "
                           f"{type(lock).__name__}")
    return lock


def modules() -> list[Path]:
    """The test modules with oracle tests (``@pytest.mark.oracle`` in their source)."""
    return sorted(p for p in TESTS.rglob("test_*.py")
                  if _MARK.search(p.read_text(encoding="utf-8")))


def main() -> int:
    if sys.argv[1:] != ["--lock"]:
        sys.exit("usage: python tests/oracles.py --lock")
    passed = {}
    for module in modules():
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "oracle",
             str(module)], cwd=ROOT, env={**os.environ, "TOOLKIT_ORACLES": "run"})
        print(f"{key(module)}: {'passed' if code == 0 else f'failed (exit {code})'}")
        if code == 0:
            passed[key(module)] = digest(module)
    LOCK.write_text(json.dumps({"torch": TORCH, "modules": passed}, indent=1, sort_keys=True)
                    + "\n", encoding="utf-8")
    print(f"wrote {LOCK.name}: {len(passed)} of {len(modules())} modules on torch {TORCH}")
    return 0 if len(passed) == len(modules()) else 1


if __name__ == "__main__":
    sys.exit(main())
