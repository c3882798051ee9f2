"""Initial responsibilities: scikit-learn's draws for the same random_state, and weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit.algorithms.em import GaussianMixture, m_step
from toolkit.algorithms.em.initialization import (
    INIT_PARAMS,
    MAX_REPEATED_ROWS,
    initial_responsibilities,
)

from ._helpers import F64


@pytest.mark.parametrize("init_params", INIT_PARAMS)
@pytest.mark.parametrize("ct", ["full", "diag", "spherical"])
def test_initial_parameters_are_sklearns(init_params: str, ct: str) -> None:
    """max_iter=0 keeps the initial parameters: the same as scikit-learn's from the same seed.

    Covariances agree to 1e-12 absolutely. After one-point seeds ("k-means++",
    "random_from_data") they are ``reg_covar = 1e-6``: scikit-learn's expanded
    ``E[x²] − μ²`` leaves a rounding error near 1e-13 there (our centered form gives exactly
    1e-6), which the precisions ``1/√Σ`` amplify to about 5e-8 relative.
    """
    X = load_iris().data
    kw = {"covariance_type": ct, "init_params": init_params, "max_iter": 0, "random_state": 3}
    ours = GaussianMixture(3, **kw).fit(X)
    ref = SkGaussianMixture(3, **kw).fit(X)
    for name in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-12,
                                   atol=1e-12, err_msg=name)
    assert ours.n_iter_ == ref.n_iter_ == 0 and ours.lower_bound_ == ref.lower_bound_ == -np.inf


def test_tied_covariance_of_one_point_seeds_is_the_pooled_scatter() -> None:
    """Where ours and scikit-learn's start differ: tied covariances after one-point seeds.

    "k-means++" and "random_from_data" give one-hot rows at k seeds and all-zero rows
    elsewhere. scikit-learn's tied estimate, ``(XᵀX − Σ_k N_k μ_k μ_kᵀ) / Σ_k N_k``, assumes
    that every row of the responsibilities sums to one; here it gives ``XᵀX / 3`` for iris
    (entries near 1,700). The pooled scatter of three single points is zero, so the initial
    covariance is ``reg_covar · I`` (what :func:`m_step` computes, and the full, diag and
    spherical estimates of both libraries give). The fits then differ.
    """
    X = load_iris().data
    for init_params in ("k-means++", "random_from_data"):
        kw = {"covariance_type": "tied", "init_params": init_params, "max_iter": 0,
              "random_state": 0}
        ours = GaussianMixture(3, **kw).fit(X)
        np.testing.assert_allclose(ours.covariances_, 1e-6 * np.eye(4), rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(ours.means_, SkGaussianMixture(3, **kw).fit(X).means_)


def test_kmeans_plusplus_picks_distinct_points_far_apart(seed: int) -> None:
    X = torch.tensor([[0.0, 0.0], [0.1, 0.0], [10.0, 10.0], [10.1, 10.0], [-10.0, 10.0]],
                     dtype=F64)
    gm = GaussianMixture(3, init_params="k-means++", max_iter=0, random_state=seed).fit(X)
    # one initial component at each well-separated group
    groups = {int(torch.argmin(((X[[0, 2, 4]] - m) ** 2).sum(1))) for m in gm.means_}
    assert groups == {0, 1, 2}


def test_sample_weights_reach_the_initialization() -> None:
    X = torch.as_tensor(load_iris().data)
    w = torch.rand(150, dtype=F64, generator=torch.Generator().manual_seed(0))
    w[::2] = 0.0
    rs = lambda: np.random.RandomState(5)  # noqa: E731
    # "kmeans": the labels of a weighted KMeans
    resp = initial_responsibilities(X, 3, "kmeans", w, rs())
    labels = KMeans(3, n_init=1, random_state=rs()).fit(X.numpy(), sample_weight=w.numpy())
    np.testing.assert_array_equal(resp.argmax(1).numpy(), labels.labels_)
    # seeds are drawn in proportion to the weights: never a zero-weight row
    for init_params in ("k-means++", "random_from_data"):
        for seed in range(5):
            resp = initial_responsibilities(X, 3, init_params, w, np.random.RandomState(seed))
            seeds = resp.sum(1).nonzero()[:, 0]
            assert len(seeds) == 3 and (w[seeds] > 0).all(), init_params
    # "random": rows on the simplex; with the weights, the first M-step is the weighted one
    resp = initial_responsibilities(X, 3, "random", None, rs())
    torch.testing.assert_close(resp.sum(1), torch.ones(150, dtype=F64))
    gm = GaussianMixture(3, init_params="random", max_iter=0, random_state=5).fit(
        X, sample_weight=w)
    expected = m_step(X, torch.log(resp), sample_weight=w)
    torch.testing.assert_close(gm.means_, expected.means, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("init_params", INIT_PARAMS)
def test_integer_weights_draw_the_start_of_the_repeated_rows(init_params: str) -> None:
    """Row i gets the mean of its copies' responsibilities in the repeated rows' start; counts
    beyond MAX_REPEATED_ROWS are drawn once per row (no row allocated per count)."""
    X = torch.as_tensor(load_iris().data)[::5]
    counts = torch.as_tensor(np.random.RandomState(3).randint(0, 4, len(X)), dtype=F64)
    counts[:3] = 1
    reps = counts.long()
    resp = initial_responsibilities(X, 3, init_params, counts, np.random.RandomState(8))
    copies = initial_responsibilities(torch.repeat_interleave(X, reps, dim=0), 3, init_params,
                                      None, np.random.RandomState(8))
    owner = torch.repeat_interleave(torch.arange(len(X)), reps)
    summed = torch.zeros_like(resp).index_add_(0, owner, copies)
    torch.testing.assert_close(resp * counts[:, None], summed, rtol=1e-12, atol=1e-12)
    heavy = counts * MAX_REPEATED_ROWS
    resp = initial_responsibilities(X, 3, init_params, heavy, np.random.RandomState(8))
    assert resp.shape == (len(X), 3) and resp.isfinite().all()
