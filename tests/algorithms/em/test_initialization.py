"""Initial responsibilities: determinism, k-means++ seeding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit.algorithms.em import GaussianMixture
from toolkit.data import MIXTURE_2D, gaussian_mixture

from ._helpers import F64


@pytest.mark.parametrize("init", ["kmeans++", "kmeans", "random", "random_from_data"])
def test_inits_are_deterministic_and_fit(init: str) -> None:
    X = gaussian_mixture(300, MIXTURE_2D, seed=0).X
    a = GaussianMixture(3, init=init, n_init=3, random_state=3, max_iter=200).fit(X)
    b = GaussianMixture(3, init=init, n_init=3, random_state=3, max_iter=200).fit(X)
    assert a.converged_
    np.testing.assert_array_equal(a.lower_bounds_, b.lower_bounds_)
    ref = SkGaussianMixture(3, random_state=0, n_init=5).fit(X.numpy())
    assert a.lower_bound_ > ref.lower_bound_ - 0.05


def test_kmeans_plusplus_picks_distinct_points_far_apart() -> None:
    X = torch.tensor([[0.0, 0.0], [0.1, 0.0], [10.0, 10.0], [10.1, 10.0], [-10.0, 10.0]],
                     dtype=F64)
    gm = GaussianMixture(3, init="kmeans++", max_iter=0, random_state=0).fit(X)
    # one initial component at each well-separated group
    groups = {int(torch.argmin(((X[[0, 2, 4]] - m) ** 2).sum(1))) for m in gm.means_}
    assert groups == {0, 1, 2}
