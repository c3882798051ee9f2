"""The float64 fast path (moment matrices) against the plain functions."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from toolkit.algorithms.em import COVARIANCE_TYPES, GaussianMixture, e_step, m_step
from toolkit.data import iris

from ._helpers import _init_params


def test_fast_path_matches_plain_functions() -> None:
    """The estimator's float64 moment-matrix path equals a loop of e_step / m_step."""
    X = torch.as_tensor(iris().X)
    for ct in COVARIANCE_TYPES:
        init = _init_params(X.numpy(), 3, ct)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm = GaussianMixture(3, covariance_type=ct, max_iter=20, tol=0.0, **init).fit(X)
        p = GaussianMixture(3, covariance_type=ct, max_iter=0, **init).fit(X)._fitted_params()
        lbs = []
        for _ in range(20):
            lpn, log_resp = e_step(X, p.weights, p.means, p.precisions_cholesky, ct)
            lbs.append(lpn.mean().item())
            p = m_step(X, log_resp, covariance_type=ct)
        np.testing.assert_allclose(gm.lower_bounds_, lbs, rtol=1e-10)
        torch.testing.assert_close(gm.covariances_, p.covariances, rtol=1e-8, atol=1e-10)
