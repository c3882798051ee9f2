"""What the estimators say about inputs scikit-learn would not expect (issue 43): a tensor that
requires grad is refused in one line naming the fix, and a batch larger than the data is the
data (scikit-learn's one batch of every row), never an allocation of ``batch_size`` rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit.algorithms.em import GaussianMixture
from toolkit.algorithms.rbm import BernoulliRBM


@pytest.mark.parametrize("estimator", [GaussianMixture(2), BernoulliRBM(n_components=3)],
                         ids=["GaussianMixture", "BernoulliRBM"])
def test_a_tensor_that_requires_grad_is_refused_naming_the_fix(estimator, seed: int) -> None:
    torch.manual_seed(seed)
    X = torch.rand(20, 3, requires_grad=True)
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"{name}.fit: X is a tensor that requires grad; .*"
                                         r"pass X\.detach\(\)"):
        estimator.fit(X)
    estimator.fit(X.detach())  # the fix it names works


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_a_batch_larger_than_the_data_is_the_data(method: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = (rng.random((30, 8)) > 0.5).astype(np.float64)
    huge = BernoulliRBM(n_components=4, batch_size=10**9, n_iter=3, random_state=seed,
                        method=method).fit(X)
    whole = BernoulliRBM(n_components=4, batch_size=30, n_iter=3, random_state=seed,
                         method=method).fit(X)
    np.testing.assert_array_equal(huge.components_, whole.components_)
    np.testing.assert_array_equal(huge.intercept_hidden_, whole.intercept_hidden_)
