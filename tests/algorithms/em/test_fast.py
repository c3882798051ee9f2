"""The estimator's EM paths (moment matrices, float32 and float64) against the plain functions
and scikit-learn, and the choice between them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from toolkit.algorithms.em import COVARIANCE_TYPES, GaussianMixture, e_step, m_step
from toolkit.lab.data import iris

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
    from toolkit.algorithms.em.fast import MomentEM

    X = torch.as_tensor(iris().X)
    init = _init_params(X.numpy(), 3, "full")
    p = GaussianMixture(3, max_iter=0, **init).fit(X)._fitted_params()
    fast = MomentEM(X, torch.ones(len(X), dtype=X.dtype), "full", 1e-6)
    fast.chunk = 16  # many chunks, so that their sums are exercised
    lp, new = fast.step(fast.to_compute(p))
    lp_ref, resp = fast.e_step(fast.to_compute(p))
    ref = fast.m_step(resp)
    torch.testing.assert_close(lp, lp_ref, rtol=1e-13, atol=1e-13)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_centred_step_equals_e_step_then_m_step(ct: str, weighted: bool) -> None:
    """The whitened path's iteration is e_step followed by m_step (the plain functions)."""
    from toolkit.algorithms.em.centred import CentredEM

    X = torch.as_tensor(iris().X)
    init = _init_params(X.numpy(), 3, ct)
    p = GaussianMixture(3, covariance_type=ct, max_iter=0, **init).fit(X)._fitted_params()
    g = torch.Generator().manual_seed(0)
    sw = torch.rand(len(X), dtype=X.dtype, generator=g) + 0.5 if weighted else None
    path = CentredEM(X.float(), torch.ones(len(X)) if sw is None else sw, ct, 1e-6)
    path.chunk = 16  # many chunks, so that their sums are exercised
    X32 = X.float().double()  # the path reads float32 data, exactly
    lp, new = path.step(p)
    lp_ref, log_resp = e_step(X32, p.weights, p.means, p.precisions_cholesky, ct)
    ref = m_step(X32, log_resp, covariance_type=ct, sample_weight=sw)
    torch.testing.assert_close(lp, lp_ref, rtol=1e-13, atol=1e-13)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12)


def test_float32_fit_agrees_with_sklearn_float64(seed: int) -> None:
    """float32 data, parameters in float64 (target 1e-5); below 2**14 samples float64 moments."""
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


def _mixture_data(n: int, d: int, k: int, center_scale: float, flat: float, seed: int = 0
                  ) -> np.ndarray:
    """Issue 28's recipe: ``normal(n/k, d) @ normal(d, d) * 0.5 + center`` for each cluster.

    ``flat`` sets the smallest singular value of the first cluster's matrix (its covariance's
    smallest eigenvalue is ``(0.5 flat)²``), as some random draws of the recipe have.
    """
    rng = np.random.default_rng(seed)
    parts = []
    for j in range(k):
        A = rng.normal(size=(d, d))
        if j == 0:
            u, s, vt = np.linalg.svd(A)
            A = (u * np.r_[s[:-1], flat]) @ vt
        center = rng.normal(0.0, center_scale, size=d)
        parts.append(rng.normal(size=(n // k, d)) @ A * 0.5 + center)
    return np.concatenate(parts)


def _sklearn_lower_bound(X: np.ndarray, p, k: int) -> float:
    """scikit-learn's float64 mean log-likelihood at the parameters ``p`` (full covariances)."""
    from sklearn.mixture import GaussianMixture as SkGM

    sk = SkGM(k)
    sk.weights_, sk.means_, sk.precisions_cholesky_ = (
        t.numpy() for t in (p.weights, p.means, p.precisions_cholesky))
    sk.n_features_in_ = X.shape[1]
    return float(sk.score_samples(X).mean())


@pytest.mark.parametrize("case", ["well", "ill"])
def test_float32_moments_run_only_where_their_cancellation_is_small(case: str) -> None:
    """Path 0 (float32 moments) on a benchmark-like mixture; never on issue 28's ill one.

    The ill mixture (centres at scale 100, one cluster with smallest eigenvalue 2.5e-9) made
    the old float32 fit raise "ill-defined empirical covariance" although scikit-learn's
    float64 fit succeeds. Every iteration's lower bound must be scikit-learn's evaluation of
    the parameters it was computed at, to 1e-5 relative.
    """
    from toolkit.algorithms.em.fast import MOMENT_TOL, EMPath, cancellation_factor

    n, d, k = 2**15, 6, 4
    if case == "well":  # bench_em's data: covariances A Aᵀ/d + 0.09 I, centres N(0, 4²)
        rng = np.random.default_rng(0)
        labels = rng.integers(0, k, size=n)
        A = rng.normal(size=(k, d, d)) / np.sqrt(d)
        X = (rng.normal(0.0, 4.0, size=(k, d))[labels] + 0.3 * rng.normal(size=(n, d))
             + np.einsum("nij,nj->ni", A[labels], rng.normal(size=(n, d))))
    else:
        X = _mixture_data(n, d, k, 100.0, 1e-4)
    X32 = torch.as_tensor(X, dtype=torch.float32)
    X64 = X32.double()  # the same numbers: both sides see the float32 data
    init = GaussianMixture(k, max_iter=0, random_state=0).fit(X64)._fitted_params()
    path = EMPath(X32, torch.ones(n, dtype=torch.float64), "full", 1e-6)
    params = path.to_compute(init)
    for _ in range(4):
        u_g = torch.finfo(torch.float32).eps / 2 * cancellation_factor(params, path.center, "full")
        log_prob, new = path.step(params)
        ref = _sklearn_lower_bound(X64.numpy(), params, k)
        assert abs(log_prob.mean().item() - ref) <= 1e-5 * abs(ref), (case, u_g)
        params = new
    if case == "well":
        assert u_g <= MOMENT_TOL[torch.float32] and path.counts == [4, 0, 0]
    else:
        assert u_g > MOMENT_TOL[torch.float32] and path.counts[0] == 0
