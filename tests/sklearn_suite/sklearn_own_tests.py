"""Load one of scikit-learn's own test files, with only the estimator's import line changed.

scikit-learn ships its tests inside its wheel (``sklearn/<package>/tests/test_*.py``). A test
module here calls :func:`load_tests` with the file's path relative to the installed ``sklearn``
package, the import line to replace and the line that imports the toolkit's estimator instead.
The file is read from the installed scikit-learn at test time (nothing of it is copied into this
repository) and imported by the import system from the rewritten text under its own path (so
tracebacks point into it), registered in ``sys.modules`` (so that objects defined in it pickle). Its ``test_*``
functions, with their marks and parametrizations, are handed back to be collected as the
calling module's own tests; ``sklearn.conftest``'s fixtures and seed parametrization come from
``tests/sklearn_suite/conftest.py``.

The calling module declares every test expected to fail in ``EXPECTED_FAILURES``
(``{pattern: (reason, exception)}``, the pattern an ``fnmatch`` glob of the test's name with
its parameters); the conftest marks them ``xfail(strict=True, raises=exception)``, so a declared
failure that starts passing, or fails for another reason, fails the suite.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest


def sklearn_test_file(relative: str) -> Path:
    """The installed scikit-learn's test file ``relative`` (skips the module when absent)."""
    import sklearn

    path = Path(sklearn.__file__).resolve().parent / relative
    if not path.is_file():
        pytest.skip(f"the installed scikit-learn {sklearn.__version__} ships no "
                    f"{relative} (a distribution without its tests)", allow_module_level=True)
    return path


def load_tests(relative: str, old_import: str, new_import: str) -> dict[str, Any]:
    """The ``test_*`` functions of scikit-learn's ``relative``, run against our estimator.

    ``old_import`` must occur exactly once, as a whole line; it becomes ``new_import`` and no
    other line changes (line numbers stay scikit-learn's).
    """
    path = sklearn_test_file(relative)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == old_import]
    if len(hits) != 1:
        raise RuntimeError(f"load_tests: expected the line {old_import!r} once in {path}, found "
                           f"it {len(hits)} times; the installed scikit-learn changed its test "
                           f"file, update the import to replace")
    lines[hits[0]] = lines[hits[0]].replace(old_import, new_import)
    name = "sklearn_own_tests." + relative.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, path,
                                                  loader=_Rewritten(path, "".join(lines)))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # objects defined in the file pickle by reference
    spec.loader.exec_module(module)
    return {key: value for key, value in vars(module).items()
            if key.startswith("test") and callable(value)}


class _Rewritten(importlib.abc.SourceLoader):
    """Imports a file from the given source text (its import line rewritten), not from disk."""

    def __init__(self, path: Path, source: str) -> None:
        self.path, self.source = path, source

    def get_filename(self, fullname: str) -> str:
        return str(self.path)

    def get_data(self, path: str) -> bytes:
        return self.source.encode("utf-8")
