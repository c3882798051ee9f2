"""What the public entry points answer to inputs a tester of scikit-learn's estimator checks
would try (issue 55): the exception class a scikit-learn or torch user catches, in one line
naming the function, the argument, what was expected and what came; where the answer gives
advice, the advice is followed and the problem is gone. One test per row of the issue's table
(the RBM's values outside [0, 1] are in tests/algorithms/rbm/test_rbm_estimator_sklearn.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit.algorithms.em import GaussianMixture
from toolkit.algorithms.rbm import BernoulliRBM
from toolkit.algorithms.softmax import log_softmax, stable_softmax


@pytest.mark.parametrize("estimator", [GaussianMixture(2), BernoulliRBM(2, n_iter=1)],
                         ids=["GaussianMixture", "BernoulliRBM"])
def test_a_meta_tensor_is_a_value_error_naming_the_device(estimator) -> None:
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"^{name}\.fit: X is on the 'meta' device, which holds "
                                         r"a shape but no values; create it on a device with "
                                         r"data \('cpu' or 'cuda'\)$"):
        estimator.fit(torch.empty(10, 3, device="meta"))
    estimator.fit(torch.rand(10, 3, device="cpu", dtype=torch.float64))  # the advice works


@pytest.mark.parametrize("estimator", [GaussianMixture(2), BernoulliRBM(2, n_iter=1)],
                         ids=["GaussianMixture", "BernoulliRBM"])
@pytest.mark.parametrize("dtype", [object, str])
def test_strings_are_a_value_error_as_in_sklearn(estimator, dtype: type) -> None:
    text = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=dtype)
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"^{name}\.fit: X must hold numbers; could not convert "
                                         r"string to float: .*'a'"):
        estimator.fit(text)
    with pytest.raises(ValueError, match="could not convert string to float"):
        SkGaussianMixture(2).fit(text)  # the class scikit-learn users catch
    # numbers written as text convert, as in scikit-learn
    numbers = np.array([["0.1", "0.9"], ["0.2", "0.8"], ["0.7", "0.3"]], dtype=dtype)
    assert estimator.fit(numbers).n_features_in_ == 2


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_softmax_of_a_sparse_tensor_is_refused_naming_the_conversion(fn) -> None:
    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, -1.0]])
    name = fn.__name__
    with pytest.raises(TypeError, match=rf"^{name}: x must be a dense tensor, got layout "
                                        r"torch\.sparse_coo; convert it with x\.to_dense\(\)$"):
        fn(dense.to_sparse(), dim=1)
    with pytest.raises(TypeError, match=r"got layout torch\.sparse_csr"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: CSR support is in beta
        fn(dense.to_sparse_csr(), dim=1)
    # the advice, followed, gives torch's dense result
    expected = torch.softmax(dense, 1) if fn is stable_softmax else torch.log_softmax(dense, 1)
    torch.testing.assert_close(fn(dense.to_sparse().to_dense(), dim=1), expected)
