"""scikit-learn's test fixtures for its own test files (run here against our estimators).

``sklearn.conftest`` is not a plugin of this session (its hooks would reach every test); its
fixtures and its ``global_random_seed`` parametrization are taken over for this directory
only, and the test modules' ``EXPECTED_FAILURES`` become strict xfail marks. A module's
``ROUNDING_DEPENDENT`` tests (``{pattern: reason}``) assert a float32 trajectory to a relative
tolerance that its rounding meets on some CPUs and not on others: they become non-strict xfail
marks that still fail for any exception but an assertion's.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import numpy as np
import pytest

sk_conftest = pytest.importorskip("sklearn.conftest", reason="the installed scikit-learn "
                                  "ships no conftest (a distribution without its tests)")

pyplot = sk_conftest.pyplot
hide_available_pandas = sk_conftest.hide_available_pandas


@pytest.fixture(params=[np.float32, np.float64])
def global_dtype(request: pytest.FixtureRequest) -> Any:
    """scikit-learn's ``global_dtype``, with float32 always on: scikit-learn skips its float32
    variants unless SKLEARN_RUN_FLOAT32_TESTS=1; the estimators here support float32 data
    (they compute in float32), so those variants run too."""
    return request.param


def pytest_configure(config: pytest.Config) -> None:
    for marker in ("thread_unsafe: scikit-learn's mark (serial test)",
                   "parallel_threads(n): scikit-learn's mark (threads per test)",
                   "iterations(n): scikit-learn's mark (repetitions per thread)"):
        config.addinivalue_line("markers", marker)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``global_random_seed``: 42, or SKLEARN_TESTS_GLOBAL_RANDOM_SEED, as in scikit-learn."""
    sk_conftest.pytest_generate_tests(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        expected: dict[str, tuple[str, Any]] = getattr(module, "EXPECTED_FAILURES", {})
        for pattern, (reason, raises) in expected.items():
            if fnmatchcase(item.name, pattern):
                item.add_marker(pytest.mark.xfail(reason=reason, raises=raises, strict=True))
                break
        rounding: dict[str, str] = getattr(module, "ROUNDING_DEPENDENT", {})
        for pattern, reason in rounding.items():
            if fnmatchcase(item.name, pattern):
                item.add_marker(pytest.mark.xfail(reason=reason, raises=AssertionError,
                                                  strict=False))
                break
