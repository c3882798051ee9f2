"""The loader of scikit-learn's own test files: skips without them, refuses a changed import."""

from __future__ import annotations

import pytest
from sklearn_own_tests import load_tests, sklearn_test_file


def test_a_distribution_without_tests_skips_with_a_reason() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"ships no mixture/tests/test_gone\.py "
                                                    r"\(a distribution without its tests\)"):
        sklearn_test_file("mixture/tests/test_gone.py")


def test_the_import_line_must_occur_exactly_once() -> None:
    with pytest.raises(RuntimeError, match=r"load_tests: expected the line 'from sklearn.mixture "
                                           r"import Nothing' once in .*test_gaussian_mixture.py, "
                                           r"found it 0 times"):
        load_tests("mixture/tests/test_gaussian_mixture.py",
                   "from sklearn.mixture import Nothing", "from toolkit import Nothing")


def test_only_the_import_line_changes() -> None:
    tests = load_tests("neural_network/tests/test_rbm.py",
                       "from sklearn.neural_network import BernoulliRBM",
                       "from toolkit.algorithms.rbm import BernoulliRBM")
    module = next(iter(tests.values())).__globals__
    assert module["BernoulliRBM"].__module__ == "toolkit.algorithms.rbm.estimator"
    assert module["load_digits"].__module__.startswith("sklearn.")
    assert "test_fit" in tests and all(name.startswith("test") for name in tests)
