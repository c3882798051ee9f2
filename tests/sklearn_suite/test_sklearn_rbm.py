"""scikit-learn's own BernoulliRBM tests, run against ``toolkit.algorithms.rbm.BernoulliRBM``.

The installed ``sklearn/neural_network/tests/test_rbm.py`` with one line changed: its
``from sklearn.neural_network import BernoulliRBM`` imports ours (see ``sklearn_own_tests``).
"""

from __future__ import annotations

from typing import Any

from sklearn_own_tests import load_tests

#: test-name glob → (why it fails, the exception it fails with); strict xfail marks.
EXPECTED_FAILURES: dict[str, tuple[str, Any]] = {
    # exact seeded weights: the class documents that its sampling draws come from a
    # torch.Generator, not from scikit-learn's numpy stream, so components_ after 42 seeded
    # passes differ from scikit-learn's 0.02649814, 0.02009084 (ours: 0.0271, 0.0207). Its
    # sparse half (a CSC fit equals the dense fit, gibbs on CSC equals gibbs on dense) is
    # test_rbm_sparse.py::test_sparse_input_gives_the_dense_results_in_every_method; its
    # "gibbs recreates [[0], [1]]" holds only for lucky seeds (scikit-learn's own comment says
    # the test "is very seed-dependent"), so it is not repeated.
    "test_fit_gibbs*": (
        "compares components_ with scikit-learn's seeded values; the sampling draws come "
        "from a torch.Generator (documented)", AssertionError),
}

#: test-name glob → why its pass depends on where rounding falls (non-strict xfail marks).
ROUNDING_DEPENDENT: dict[str, str] = {
    # float32 vs float64 fits at random_state=42 with rtol and atol=0: components_ to 1e-3
    # relative. Our torch.Generator trajectory (not scikit-learn's numpy one) ends one weight at
    # 1.4e-5, whose float32 error, 2.4e-8, is float32's floor there (with every stage but the
    # hidden probabilities in float64 it is still 1.8e-8), so the check passes or fails by
    # machine: 1.67x its tolerance on AVX-512, 0.77x with MKL_CBWR=COMPATIBLE. Over 101 seeds
    # scikit-learn's own BernoulliRBM fails this test in 22, ours in 10 (85 before issue 35).
    # What the test is for, float32 as accurate as scikit-learn's, holds for every seed:
    # tests/algorithms/rbm/test_rbm_float32.py checks it over 20 seeds, two batch sizes, dense
    # and sparse, against scikit-learn's own errors measured in the same run.
    "test_convergence_dtype_consistency": (
        "float32 vs float64 to rtol 1e-3 with atol=0 at one seed: a weight that ends near 0 "
        "sits at float32's floor (scikit-learn fails it in 22 of 101 seeds, ours in 10); "
        "test_rbm_float32.py checks the property over 20 seeds"),
}

globals().update(load_tests("neural_network/tests/test_rbm.py",
                            "from sklearn.neural_network import BernoulliRBM",
                            "from toolkit.algorithms.rbm import BernoulliRBM"))
