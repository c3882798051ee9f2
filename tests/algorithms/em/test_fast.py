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


def test_one_pass_step_equals_e_step_then_m_step() -> None:
    from toolkit.algorithms.em.fast import _MomentEM

    X = torch.as_tensor(iris().X)
    init = _init_params(X.numpy(), 3, "full")
    p = GaussianMixture(3, max_iter=0, **init).fit(X)._fitted_params()
    fast = _MomentEM(X, torch.ones(len(X), dtype=X.dtype), "full", 1e-6)
    fast.chunk = 16  # many chunks, so that their sums are exercised
    lp, new = fast.step(fast.to_compute(p))
    lp_ref, resp = fast.e_step(fast.to_compute(p))
    ref = fast.m_step(resp)
    torch.testing.assert_close(lp, lp_ref, rtol=1e-13, atol=1e-13)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12)


def test_float32_fit_agrees_with_sklearn_float64(seed: int) -> None:
    """float32 data: the data-sized work in float32, parameters in float64 (target 1e-5)."""
    from sklearn.mixture import GaussianMixture as SkGM

    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 4, size=(4, 5))
    X = (centers[rng.integers(0, 4, 3000)] + rng.normal(size=(3000, 5))).astype(np.float64)
    for ct in COVARIANCE_TYPES:
        init = _init_params(X, 4, ct)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            sk = SkGM(4, covariance_type=ct, max_iter=20, tol=0.0, **init).fit(X)
            ours = GaussianMixture(4, covariance_type=ct, max_iter=20, tol=0.0,
                                   dtype="float32", **init).fit(X.astype(np.float32))
        assert ours.means_.dtype == np.float32
        assert abs(ours.lower_bound_ - sk.lower_bound_) <= 1e-5 * abs(sk.lower_bound_), ct
        np.testing.assert_allclose(ours.means_, sk.means_, rtol=1e-4, atol=1e-4)
