"""scikit-learn's own GaussianMixture tests, run against ``toolkit.algorithms.em.GaussianMixture``.

The installed ``sklearn/mixture/tests/test_gaussian_mixture.py`` with one line changed: its
``from sklearn.mixture import GaussianMixture`` imports ours (see ``sklearn_own_tests``).
"""

from __future__ import annotations

from typing import Any

from sklearn_own_tests import load_tests

#: test-name glob → (why it fails, the exception it fails with); strict xfail marks.
EXPECTED_FAILURES: dict[str, tuple[str, Any]] = {
    # message wording: scikit-learn's message for weights outside [0, 1] labels the minimum
    # "max value" and the maximum "min value"; ours says "min value 1.45615, max value
    # 1.56843". The rest of the test (shape, sum, a valid weights_init) passes in ours and is
    # checked by tests/algorithms/em/test_estimator.py::test_bad_inputs_name_the_argument.
    "test_check_weights": (
        "message wording: scikit-learn swaps the labels of the minimum and maximum weight; "
        "ours labels them as they are", AssertionError),
    # a private function of scikit-learn: the test counts the calls of
    # sklearn.mixture._gaussian_mixture._estimate_gaussian_parameters (mocked), which ours
    # never calls; the property it guards (all three *_init given: no parameters estimated at
    # the start) is tests/algorithms/em/test_estimator.py::
    # test_all_three_inits_estimate_nothing_at_the_start.
    "test_gaussian_mixture_all_init_does_not_estimate_gaussian_parameters*": (
        "counts calls of scikit-learn's private _estimate_gaussian_parameters, which this "
        "implementation does not call", AssertionError),
}

globals().update(load_tests("mixture/tests/test_gaussian_mixture.py",
                            "from sklearn.mixture import GaussianMixture",
                            "from toolkit.algorithms.em import GaussianMixture"))
