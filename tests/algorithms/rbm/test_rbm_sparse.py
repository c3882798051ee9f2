"""BernoulliRBM as scikit-learn's drop-in: sparse input in every method (never densified whole),
float32 and float64 data drawing the same random numbers, boolean gibbs samples, and the
private helpers scikit-learn's own tests call."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import load_digits
from sklearn.neural_network import BernoulliRBM as SkBernoulliRBM

from toolkit.algorithms.rbm import BernoulliRBM, DataRangeWarning, inputs
from toolkit.algorithms.rbm.core import bernoulli

SPARSE = [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.csc_array, sp.coo_matrix, sp.lil_array]


def digits(n: int = 60) -> np.ndarray:
    X = load_digits().data[:n] / 16
    X[X < 0.3] = 0.0  # sparse enough for a sparse matrix to make sense
    return X


@pytest.fixture
def densified(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every block that a sparse matrix is densified into."""
    sizes: list[int] = []
    real = inputs.SparseRows.rows

    def rows(self: inputs.SparseRows, index: slice | np.ndarray) -> torch.Tensor:
        block = real(self, index)
        sizes.append(block.shape[0])
        return block

    monkeypatch.setattr(inputs.SparseRows, "rows", rows)
    return sizes


@pytest.mark.parametrize("container", SPARSE)
@pytest.mark.parametrize("method", ["pcd", "cd"])
def test_sparse_input_gives_the_dense_results_in_every_method(container, method: str,
                                                              densified: list[int], seed: int) -> None:
    X = digits()
    kw = {"n_components": 8, "batch_size": 7, "n_iter": 2, "method": method, "shuffle": True}
    dense = BernoulliRBM(**kw, random_state=seed).fit(X)
    sparse = BernoulliRBM(**kw, random_state=seed).fit(container(X))
    assert densified and max(densified) <= 7  # a mini-batch at a time, never the whole matrix
    for name in ("components_", "intercept_hidden_", "intercept_visible_"):
        np.testing.assert_array_equal(getattr(sparse, name), getattr(dense, name), err_msg=name)
    for fn in ("transform", "score_samples"):
        np.testing.assert_array_equal(getattr(sparse, fn)(container(X)), getattr(dense, fn)(X))
    dense.partial_fit(X[:9])
    sparse.partial_fit(container(X[:9]))
    np.testing.assert_array_equal(sparse.components_, dense.components_)
    v_sparse, v_dense = sparse.gibbs(container(X)), dense.gibbs(X)
    assert v_sparse.dtype == v_dense.dtype == np.bool_ and v_sparse.shape == X.shape
    np.testing.assert_array_equal(v_sparse, v_dense)  # same generator state, same draws


def test_a_large_sparse_matrix_is_read_in_chunks(monkeypatch: pytest.MonkeyPatch,
                                                 densified: list[int], seed: int) -> None:
    monkeypatch.setattr(inputs, "CHUNK_ELEMENTS", 64 * 16)  # 16 rows of 64 features per chunk
    X = digits(50)
    rbm = BernoulliRBM(n_components=4, batch_size=10, n_iter=1, random_state=seed).fit(X)
    densified.clear()
    np.testing.assert_array_equal(rbm.transform(sp.csr_array(X)), rbm.transform(X))
    assert densified == [16, 16, 16, 2]


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csc_array, sp.lil_matrix])
def test_sparse_transform_and_gibbs_agree_with_sklearn(container, seed: int) -> None:
    """With scikit-learn's fitted parameters, transform is scikit-learn's on sparse input, and
    gibbs returns booleans as scikit-learn's does."""
    X = digits()
    ref = SkBernoulliRBM(n_components=8, n_iter=3, random_state=seed).fit(container(X))
    ours = BernoulliRBM(n_components=8, n_iter=0, random_state=seed).fit(X)
    for name in ("components_", "intercept_hidden_", "intercept_visible_"):
        setattr(ours, name, getattr(ref, name).copy())
    np.testing.assert_allclose(ours.transform(container(X)), ref.transform(container(X)),
                               rtol=1e-12, atol=1e-15)
    assert ours.gibbs(container(X)).dtype == ref.gibbs(container(X)).dtype == np.bool_
    assert ours.gibbs(torch.as_tensor(X)).dtype == torch.bool


def test_sparse_input_is_checked_like_dense_input(seed: int) -> None:
    rbm = BernoulliRBM(n_components=3, n_iter=1, random_state=seed).fit(digits())
    with pytest.warns(DataRangeWarning, match=r"BernoulliRBM.fit: X has values outside "
                                              r"\[0, 1\] \(got values in \[0, 16\]\)"):
        BernoulliRBM(3, n_iter=1).fit(sp.csr_matrix(load_digits().data[:10]))
    # the implicit zeros count: stored values all above 1 still give a range from 0
    with pytest.warns(DataRangeWarning, match=r"got values in \[0, 3\]"):
        rbm.transform(sp.csr_matrix(np.diag(np.full(64, 3.0))))
    bad = sp.csr_matrix(digits(5))
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match=r"BernoulliRBM.transform: X contains NaN or infinity"):
        rbm.transform(bad)
    with pytest.raises(ValueError, match=r"BernoulliRBM.score_samples: X has 2 features, but "
                                         r"BernoulliRBM is expecting 64 features as input"):
        rbm.score_samples(sp.csr_matrix(np.zeros((3, 2))))
    with pytest.raises(ValueError, match=r"BernoulliRBM.log_likelihood: X must be binary"):
        rbm.log_likelihood(sp.csr_matrix(digits(5)))


def test_sparse_scores_equal_dense_scores_without_clipping(seed: int) -> None:
    """What scikit-learn's test_score_samples checks before its out-of-range line: sparse
    (LIL) and dense scores agree, and 1000 units give a finite (unclipped) sum of logs."""
    X = np.vstack([np.zeros(1000), np.ones(1000)])
    rbm = BernoulliRBM(n_components=10, batch_size=2, n_iter=10, random_state=seed).fit(X)
    dense = rbm.score_samples(X)
    np.testing.assert_array_equal(rbm.score_samples(sp.lil_matrix(X)), dense)
    assert np.isfinite(dense).all() and (dense < 0).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float32_and_float64_models_draw_the_same_samples(seed: int) -> None:
    """The uniforms are float32 for both: where p is the same number in both dtypes (k/1024),
    the samples are equal for every seed."""
    p = torch.randint(0, 1025, (50, 40), generator=torch.Generator().manual_seed(seed)) / 1024
    a = bernoulli(p.to(torch.float64), torch.Generator().manual_seed(seed))
    b = bernoulli(p.to(torch.float32), torch.Generator().manual_seed(seed))
    assert a.dtype == torch.float64 and b.dtype == torch.float32
    assert torch.equal(a, b.to(torch.float64))
    assert 0 < float(a.mean()) < 1


@pytest.mark.parametrize("method", ["pcd", "cd"])
def test_float32_data_fit_like_float64_data(method: str) -> None:
    """dtype unset: float32 data are fitted in float32, float64 data in float64, from the same
    draws, so the fits agree to float32 precision. (A sample differs only if a uniform falls
    between the float32 and the float64 probability, about 1e-7 apart: probability below 1e-3
    over this run's 6,000 draws.)"""
    X = digits(40)
    kw = {"n_components": 6, "batch_size": 8, "n_iter": 3, "method": method, "random_state": 0}
    r64 = BernoulliRBM(**kw).fit(X)
    r32 = BernoulliRBM(**kw).fit(X.astype(np.float32))
    assert r32.components_.dtype == np.float32 and r64.components_.dtype == np.float64
    np.testing.assert_allclose(r32.components_, r64.components_, rtol=0, atol=1e-5)
    np.testing.assert_allclose(r32.transform(X.astype(np.float32)), r64.transform(X), atol=1e-5)
    if method == "pcd":
        np.testing.assert_array_equal(r32.h_samples_, r64.h_samples_)


def test_sklearns_private_helpers(seed: int) -> None:
    X = digits()
    rbm = BernoulliRBM(n_components=5, n_iter=2, random_state=seed).fit(X)
    np.testing.assert_array_equal(rbm._mean_hiddens(X), rbm.transform(X))
    np.testing.assert_array_equal(rbm._mean_hiddens(X[0]), rbm.transform(X[:1])[0])
    p = rbm._mean_hiddens(X[0])
    draws = np.array([rbm._sample_hiddens(X[0], np.random.RandomState(i)) for i in range(400)])
    assert draws.dtype == np.bool_ and draws.shape == (400, 5)
    # 400 Bernoulli draws per unit: the mean is within 5 standard errors of p
    assert (np.abs(draws.mean(0) - p) <= 5 * np.sqrt(p * (1 - p) / 400) + 1e-12).all()
