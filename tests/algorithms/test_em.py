"""EM for Gaussian mixtures against independent references (numpy, scipy, scikit-learn)."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms.em import (
    COVARIANCE_TYPES,
    GaussianMixture,
    GMMParams,
    e_step,
    expected_complete_loglik,
    from_unconstrained,
    gradient_m_step,
    log_likelihood,
    m_step,
    precisions_cholesky_from_covariances,
    to_unconstrained,
)
from toolkit.data import MIXTURE_2D, gaussian_mixture, iris

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny problems: one thread avoids barrier waits on a busy machine (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data() -> torch.Tensor:
    return gaussian_mixture(300, MIXTURE_2D, seed=1).X


def _init_params(X: np.ndarray, k: int, ct: str, seed: int = 0) -> dict:
    """Explicit initial parameters in scikit-learn's shapes for each covariance type."""
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    weights = rng.dirichlet(np.full(k, 5.0))
    means = X[rng.choice(len(X), k, replace=False)]
    if ct == "full":
        A = rng.normal(size=(k, d, d))
        prec = A @ A.transpose(0, 2, 1) / d + np.eye(d)
    elif ct == "tied":
        A = rng.normal(size=(d, d))
        prec = A @ A.T / d + np.eye(d)
    elif ct == "diag":
        prec = rng.uniform(0.5, 2.0, size=(k, d))
    else:
        prec = rng.uniform(0.5, 2.0, size=k)
    return {"weights_init": weights, "means_init": means, "precisions_init": prec}


def _random_params(k: int, d: int, ct: str, seed: int = 0) -> GMMParams:
    g = torch.Generator().manual_seed(seed)
    weights = torch.softmax(torch.randn(k, generator=g, dtype=F64), 0)
    means = 2 * torch.randn(k, d, generator=g, dtype=F64)
    if ct in ("full", "tied"):
        A = torch.randn(k, d, d, generator=g, dtype=F64)
        cov = A @ A.mT / d + 0.5 * torch.eye(d, dtype=F64)
        cov = cov[0] if ct == "tied" else cov
    elif ct == "diag":
        cov = torch.rand(k, d, generator=g, dtype=F64) + 0.5
    else:
        cov = torch.rand(k, generator=g, dtype=F64) + 0.5
    return GMMParams(weights, means, cov, precisions_cholesky_from_covariances(cov, ct))


def _full_covs(cov: torch.Tensor, ct: str, k: int, d: int) -> np.ndarray:
    c = cov.numpy()
    if ct == "full":
        return c
    if ct == "tied":
        return np.broadcast_to(c, (k, d, d))
    if ct == "diag":
        return np.stack([np.diag(v) for v in c])
    return np.stack([v * np.eye(d) for v in c])


# ---------------------------------------------------------------------------------------------
# plain functions


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_e_step_matches_scipy(data: torch.Tensor, ct: str) -> None:
    k, d = 3, 2
    p = _random_params(k, d, ct)
    log_prob_norm, log_resp = e_step(data, p.weights, p.means, p.precisions_cholesky, ct)
    covs = _full_covs(p.covariances, ct, k, d)
    X = data.numpy()
    joint = np.stack([np.log(p.weights[j].item())
                      + multivariate_normal(p.means[j].numpy(), covs[j]).logpdf(X)
                      for j in range(k)], axis=1)
    ref_norm = logsumexp(joint, axis=1)
    np.testing.assert_allclose(log_prob_norm.numpy(), ref_norm, rtol=1e-12)
    np.testing.assert_allclose(log_resp.numpy(), joint - ref_norm[:, None], atol=1e-10)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_m_step_matches_numpy_weighted_moments(data: torch.Tensor, ct: str) -> None:
    k, d = 3, 2
    rng = np.random.default_rng(0)
    resp = rng.dirichlet(np.ones(k), size=len(data))
    sw = rng.uniform(0.2, 3.0, size=len(data))
    X = data.numpy()
    reg = 1e-4
    p = m_step(data, torch.log(torch.as_tensor(resp)), covariance_type=ct, reg_covar=reg,
               sample_weight=torch.as_tensor(sw))
    rw = resp * sw[:, None]
    nk = rw.sum(0)
    means = np.stack([np.average(X, axis=0, weights=rw[:, j]) for j in range(k)])
    covs = np.stack([np.cov(X.T, aweights=rw[:, j], bias=True) for j in range(k)])
    np.testing.assert_allclose(p.weights.numpy(), nk / nk.sum(), rtol=1e-12)
    np.testing.assert_allclose(p.means.numpy(), means, rtol=1e-10, atol=1e-12)
    if ct == "full":
        expected = covs + reg * np.eye(d)
    elif ct == "tied":
        expected = (nk[:, None, None] * covs).sum(0) / nk.sum() + reg * np.eye(d)
    elif ct == "diag":
        expected = np.stack([np.diag(c) for c in covs]) + reg
    else:
        expected = np.stack([np.diag(c).mean() for c in covs]) + reg
    np.testing.assert_allclose(p.covariances.numpy(), expected, rtol=1e-10)
    # precisions_cholesky: U Uᵀ = Σ⁻¹ (scikit-learn's convention), U upper triangular
    U = p.precisions_cholesky
    if ct in ("full", "tied"):
        np.testing.assert_allclose((U @ U.mT).numpy(), np.linalg.inv(expected), rtol=1e-9)
        assert torch.equal(U, torch.triu(U))
    else:
        np.testing.assert_allclose(U.square().numpy(), 1.0 / expected, rtol=1e-12)


def test_log_likelihood_never_decreases_over_100_iterations() -> None:
    X = gaussian_mixture(400, MIXTURE_2D, seed=3).X
    for ct in COVARIANCE_TYPES:
        p = _random_params(3, 2, ct, seed=5)
        lls = []
        for _ in range(100):
            log_prob_norm, log_resp = e_step(X, p.weights, p.means, p.precisions_cholesky, ct)
            lls.append(log_prob_norm.mean().item())
            p = m_step(X, log_resp, covariance_type=ct, reg_covar=0.0)
        diffs = np.diff(lls)
        assert diffs.min() >= -1e-12 * abs(lls[-1]), (ct, diffs.min())
        assert lls[-1] > lls[0] + 0.1


def _grads(fn, theta: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(fn(), theta)])


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_fisher_identity_holds_with_the_block_and_fails_without(data: torch.Tensor,
                                                                ct: str) -> None:
    p = _random_params(3, 2, ct, seed=2)
    sw = torch.rand(len(data), dtype=F64, generator=torch.Generator().manual_seed(0)) + 0.5
    theta = to_unconstrained(p, ct)

    def q() -> torch.Tensor:
        return expected_complete_loglik(data, *from_unconstrained(theta, ct), covariance_type=ct,
                                        sample_weight=sw)

    def ll() -> torch.Tensor:
        return log_likelihood(data, *from_unconstrained(theta, ct), ct, sample_weight=sw)

    g_ll = _grads(ll, theta)
    with record_blocks() as names:
        g_blocked = _grads(q, theta)
    assert names == ["em.responsibilities"]
    with disable_blocks("em.*"):
        g_unblocked = _grads(q, theta)
    rel = lambda g: ((g - g_ll).norm() / g_ll.norm()).item()  # noqa: E731
    assert rel(g_blocked) < 1e-8
    assert rel(g_unblocked) > 1e-3


def test_unblocked_objective_is_loglik_minus_entropy(data: torch.Tensor) -> None:
    """Without the block, ∇Q is the gradient of LL − H(r(θ)), computed here independently."""
    ct = "full"
    p = _random_params(3, 2, ct, seed=4)
    theta = to_unconstrained(p, ct)

    def reference() -> torch.Tensor:
        w, mu, U = from_unconstrained(theta, ct)
        _, log_resp = e_step(data, w, mu, U, ct)
        entropy = -(log_resp.exp() * log_resp).sum(1).mean()
        return log_likelihood(data, w, mu, U, ct) - entropy

    with disable_blocks("em.responsibilities"):
        q = expected_complete_loglik(data, *from_unconstrained(theta, ct))
        g_q = _grads(lambda: expected_complete_loglik(data, *from_unconstrained(theta, ct)),
                     theta)
    torch.testing.assert_close(q, reference(), rtol=1e-12, atol=0)
    torch.testing.assert_close(g_q, _grads(reference, theta), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_gradient_m_step_reaches_closed_form(data: torch.Tensor, ct: str) -> None:
    p = _random_params(3, 2, ct, seed=7)
    _, log_resp = e_step(data, p.weights, p.means, p.precisions_cholesky, ct)
    closed = m_step(data, log_resp, covariance_type=ct, reg_covar=1e-6)
    grad = gradient_m_step(data, log_resp, p, covariance_type=ct, reg_covar=1e-6, n_steps=200)

    def q(params: GMMParams) -> float:
        return expected_complete_loglik(data, params.weights, params.means,
                                        params.precisions_cholesky, log_resp,
                                        covariance_type=ct).item()

    assert abs(q(grad) - q(closed)) < 1e-9 * abs(q(closed))
    torch.testing.assert_close(grad.means, closed.means, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grad.covariances, closed.covariances, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad.weights, closed.weights, rtol=1e-6, atol=1e-8)


def test_gradient_m_step_with_adam_improves_q(data: torch.Tensor) -> None:
    p = _random_params(3, 2, "full", seed=8)
    _, log_resp = e_step(data, p.weights, p.means, p.precisions_cholesky, "full")
    q0 = expected_complete_loglik(data, p.weights, p.means, p.precisions_cholesky, log_resp)
    new = gradient_m_step(data, log_resp, p, n_steps=50, optimizer="adam", reg_covar=0.0)
    q1 = expected_complete_loglik(data, new.weights, new.means, new.precisions_cholesky,
                                  log_resp)
    assert q1 > q0


def test_gradient_m_step_bad_arguments(data: torch.Tensor) -> None:
    p = _random_params(3, 2, "full")
    with pytest.raises(ValueError, match="gradient_m_step: optimizer must be one of"):
        gradient_m_step(data, None, p, optimizer="newton")
    with pytest.raises(ValueError, match="gradient_m_step: n_steps must be a positive int"):
        gradient_m_step(data, None, p, n_steps=0)
    with pytest.raises(ValueError, match="gradient_m_step: lr must be > 0"):
        gradient_m_step(data, None, p, lr=-1.0)
    with pytest.raises(ValueError, match="gradient_m_step: covariance_type must be one of"):
        gradient_m_step(data, None, p, covariance_type="banded")


def test_no_detach_in_the_module() -> None:
    import toolkit.algorithms.em as em

    assert ".detach()" not in pathlib.Path(em.__file__).read_text()


# ---------------------------------------------------------------------------------------------
# the estimator against scikit-learn


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_trajectory_matches_sklearn_from_the_same_init(ct: str) -> None:
    X = gaussian_mixture(400, MIXTURE_2D, seed=2).X.numpy() + 5.0
    init = _init_params(X, 3, ct)
    kw = {"covariance_type": ct, "max_iter": 30, "tol": 0.0, **init}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = GaussianMixture(3, **kw).fit(X)
        ref = SkGaussianMixture(3, **kw).fit(X)
    assert len(ours.lower_bounds_) == len(ref.lower_bounds_) == 30
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-6)
    np.testing.assert_allclose(ours.weights_.numpy(), ref.weights_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.means_.numpy(), ref.means_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.covariances_.numpy(), ref.covariances_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.precisions_cholesky_.numpy(), ref.precisions_cholesky_,
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.precisions_.numpy(), ref.precisions_, rtol=1e-6, atol=1e-8)
    assert ours.n_iter_ == ref.n_iter_ and ours.converged_ == ref.converged_
    np.testing.assert_allclose(ours.score_samples(X).numpy(), ref.score_samples(X), rtol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X).numpy(), ref.predict_proba(X), atol=1e-9)
    np.testing.assert_array_equal(ours.predict(X).numpy(), ref.predict(X))
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-10)
    assert ours.bic(X) == pytest.approx(ref.bic(X), rel=1e-10)
    assert ours.aic(X) == pytest.approx(ref.aic(X), rel=1e-10)


def test_gradient_m_step_estimator_follows_closed_form() -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=0).X
    init = _init_params(X.numpy(), 3, "full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        closed = GaussianMixture(3, max_iter=5, tol=0.0, **init).fit(X)
        grad = GaussianMixture(3, max_iter=5, tol=0.0, m_step="gradient", **init).fit(X)
    np.testing.assert_allclose(grad.lower_bounds_, closed.lower_bounds_, rtol=1e-7)


def test_fast_path_matches_plain_functions() -> None:
    """The estimator's float64 moment-matrix path equals a loop of e_step / m_step."""
    X = torch.as_tensor(iris().X)
    for ct in COVARIANCE_TYPES:
        init = _init_params(X.numpy(), 3, ct)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm = GaussianMixture(3, covariance_type=ct, max_iter=20, tol=0.0, **init).fit(X)
        p = GaussianMixture(3, covariance_type=ct, max_iter=0, **init).fit(X)._get_params()
        lbs = []
        for _ in range(20):
            lpn, log_resp = e_step(X, p.weights, p.means, p.precisions_cholesky, ct)
            lbs.append(lpn.mean().item())
            p = m_step(X, log_resp, covariance_type=ct)
        np.testing.assert_allclose(gm.lower_bounds_, lbs, rtol=1e-10)
        torch.testing.assert_close(gm.covariances_, p.covariances, rtol=1e-8, atol=1e-10)


def test_integer_sample_weights_equal_repeated_rows() -> None:
    X = gaussian_mixture(120, MIXTURE_2D, seed=4).X
    counts = torch.randint(0, 4, (120,), generator=torch.Generator().manual_seed(0))
    X_rep = torch.repeat_interleave(X, counts, dim=0)
    init = _init_params(X.numpy(), 3, "full")
    for dtype in (torch.float64, torch.float32):
        kw = {"max_iter": 50, "tol": 0.0, "dtype": dtype, **init}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            weighted = GaussianMixture(3, **kw).fit(X, sample_weight=counts)
            repeated = GaussianMixture(3, **kw).fit(X_rep)
        tol = 1e-9 if dtype == torch.float64 else 1e-4
        np.testing.assert_allclose(weighted.lower_bounds_, repeated.lower_bounds_, rtol=tol)
        torch.testing.assert_close(weighted.means_, repeated.means_, rtol=tol, atol=tol)
        torch.testing.assert_close(weighted.covariances_, repeated.covariances_, rtol=tol,
                                   atol=tol)
    # the score with weights is the weighted mean of score_samples
    assert weighted.score(X, sample_weight=counts) == pytest.approx(
        repeated.score(X_rep), rel=1e-4)


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


def test_n_init_keeps_the_best_and_warm_start_continues() -> None:
    X = gaussian_mixture(300, MIXTURE_2D, seed=0).X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        best = GaussianMixture(3, init="random", n_init=4, random_state=1).fit(X)
        one = GaussianMixture(3, init="random", n_init=1, random_state=1).fit(X)
        assert best.lower_bound_ >= one.lower_bound_ - 1e-12
        gm = GaussianMixture(3, max_iter=2, tol=0.0, warm_start=True, random_state=0)
        gm.fit(X)
        first = gm.lower_bounds_
        gm.fit(X)
    assert gm.n_iter_ == 2 and gm.lower_bounds_[0] >= first[-1] - 1e-12
    full = GaussianMixture(3, max_iter=4, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full.fit(X)
    np.testing.assert_allclose(first + gm.lower_bounds_, full.lower_bounds_, rtol=1e-12)


def test_tensor_numpy_and_float32_inputs() -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=0).X
    a = GaussianMixture(3, random_state=0).fit(X)
    b = GaussianMixture(3, random_state=0).fit(X.numpy())
    np.testing.assert_array_equal(a.lower_bounds_, b.lower_bounds_)
    c = GaussianMixture(3, random_state=0, dtype=torch.float32).fit(X.numpy())
    assert c.means_.dtype == torch.float32
    assert c.lower_bound_ == pytest.approx(a.lower_bound_, rel=1e-4)


def test_sample_matches_the_fitted_mixture() -> None:
    X = gaussian_mixture(500, MIXTURE_2D, seed=0).X
    for ct in COVARIANCE_TYPES:
        gm = GaussianMixture(3, covariance_type=ct, random_state=0).fit(X)
        S, y = gm.sample(20000)
        S2, y2 = gm.sample(20000)
        assert S.shape == (20000, 2) and torch.equal(S, S2) and torch.equal(y, y2)
        assert torch.all(y[1:] >= y[:-1])  # grouped by component, as in scikit-learn
        freq = torch.bincount(y, minlength=3).double() / 20000
        torch.testing.assert_close(freq, gm.weights_, atol=0.015, rtol=0)
        for j in range(3):
            Sj = S[y == j]
            torch.testing.assert_close(Sj.mean(0), gm.means_[j], atol=0.08, rtol=0)
            cov_j = _full_covs(gm.covariances_, ct, 3, 2)[j]
            np.testing.assert_allclose(np.cov(Sj.numpy().T), cov_j, atol=0.1)


def test_predict_proba_rows_sum_to_one_and_predict_is_argmax() -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=0).X
    gm = GaussianMixture(3, random_state=0).fit(X)
    proba = gm.predict_proba(X)
    torch.testing.assert_close(proba.sum(1), torch.ones(200, dtype=F64))
    assert torch.equal(gm.predict(X), proba.argmax(1))
    assert torch.equal(gm.fit_predict(X), gm.predict(X))
    assert gm.score(X) == pytest.approx(gm.score_samples(X).mean().item())


# ---------------------------------------------------------------------------------------------
# robustness


def test_emptied_component_gives_no_nan() -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=0).X
    means = torch.cat([MIXTURE_2D.means, torch.tensor([[1e4, 1e4]], dtype=F64)])
    for ct in COVARIANCE_TYPES:
        gm = GaussianMixture(4, covariance_type=ct, means_init=means, random_state=0,
                             max_iter=50).fit(X)
        for t in (gm.weights_, gm.means_, gm.covariances_, gm.precisions_cholesky_):
            assert torch.isfinite(t).all(), ct
        assert gm.weights_.min() < 1e-10
        assert torch.isfinite(gm.score_samples(X)).all()
    log_resp = torch.log(torch.tensor([[1.0, 0.0]], dtype=F64).expand(50, 2))
    new = m_step(X[:50], log_resp)
    assert all(torch.isfinite(t).all() for t in new)


def test_lost_positive_definiteness_fails_with_advice() -> None:
    X = torch.zeros(20, 2, dtype=F64)
    X[:, 0] = torch.linspace(0, 1, 20, dtype=F64)  # second feature constant: singular cov
    with pytest.raises(ValueError, match="decrease the number of components, increase "
                                         "reg_covar, or scale the input data"):
        GaussianMixture(2, reg_covar=0.0, random_state=0).fit(X)
    # ... and reg_covar repairs it
    gm = GaussianMixture(2, reg_covar=1e-6, random_state=0).fit(X)
    assert torch.isfinite(gm.covariances_).all()
    with pytest.raises(ValueError, match="float64"):
        precisions_cholesky_from_covariances(torch.zeros(1, 2, 2), "full")
    with pytest.raises(ValueError, match="increase reg_covar"):
        precisions_cholesky_from_covariances(torch.zeros(2, dtype=F64), "diag")


def test_non_convergence_warns_with_advice() -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=0).X
    with pytest.warns(ConvergenceWarning, match="Increase max_iter or tol"):
        gm = GaussianMixture(3, max_iter=2, random_state=0).fit(X)
    assert not gm.converged_ and gm.n_iter_ == 2


def test_bad_inputs_name_the_argument() -> None:
    X = gaussian_mixture(50, MIXTURE_2D, seed=0).X
    gm = GaussianMixture(3)
    bad_nan = X.clone()
    bad_nan[3, 1] = float("nan")
    bad_inf = X.clone()
    bad_inf[0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"GaussianMixture\.fit: X contains NaN or Inf"):
        gm.fit(bad_nan)
    with pytest.raises(ValueError, match=r"GaussianMixture\.fit: X contains NaN or Inf"):
        gm.fit(bad_inf)
    with pytest.raises(ValueError, match=r"GaussianMixture.fit: X must be 2-D .* got shape \(50,\)"):
        gm.fit(X[:, 0])
    with pytest.raises(ValueError, match="n_samples >= n_components, got n_samples=2"):
        gm.fit(X[:2])
    with pytest.raises(ValueError, match=r"GaussianMixture\.fit: sample_weight must be >= 0"):
        gm.fit(X, sample_weight=-torch.ones(50))
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(50,\), got \(3,\)"):
        gm.fit(X, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight must have a positive sum"):
        gm.fit(X, sample_weight=np.zeros(50))
    with pytest.raises(TypeError, match="X must be a numpy array or a tensor"):
        gm.fit("not data")
    for kwargs, match in [
        ({"covariance_type": "banded"}, "covariance_type must be one of"),
        ({"init": "kmeans+++"}, "init must be one of"),
        ({"m_step": "newton"}, "m_step must be one of"),
        ({"n_init": 0}, "n_init must be an int >= 1, got 0"),
        ({"max_iter": -1}, "max_iter must be an int >= 0, got -1"),
        ({"tol": -1.0}, "tol must be a float >= 0, got -1.0"),
        ({"reg_covar": -1e-6}, "reg_covar must be a float >= 0"),
        ({"weights_init": [0.5, 0.5]}, r"weights_init must have shape \(3,\)"),
        ({"weights_init": [0.5, 0.4, 0.4]}, "weights_init must sum to 1"),
        ({"means_init": np.zeros((3, 3))}, r"means_init must have shape \(3, 2\)"),
        ({"precisions_init": np.ones((3, 2))}, r"precisions_init must have shape \(3, 2, 2\)"),
        ({"precisions_init": -np.ones((3, 2)), "covariance_type": "diag"},
         "precisions_init must be > 0"),
        ({"precisions_init": np.stack([np.diag([1.0, -1.0])] * 3)},
         "precisions_init must be symmetric positive definite"),
        ({"random_state": "seed"}, "random_state must be None, an int or a torch.Generator"),
    ]:
        err = TypeError if "random_state" in kwargs else ValueError
        with pytest.raises(err, match=match):
            GaussianMixture(3, **kwargs).fit(X)
    with pytest.raises(ValueError, match="n_components must be an int >= 1, got 0"):
        GaussianMixture(0).fit(X)
    with pytest.raises(RuntimeError, match=r"GaussianMixture\.predict: this instance is not fitted"):
        GaussianMixture(3).predict(X)
    fitted = GaussianMixture(3, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"GaussianMixture\.score_samples: X has 3 features, but"):
        fitted.score_samples(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"GaussianMixture\.sample: n_samples must be an int >= 1"):
        fitted.sample(0)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_float32_follows_float64_sklearn_on_offset_data(ct: str) -> None:
    """float32 runs the centered plain e_step/m_step: no cancellation for data far from 0."""
    X = gaussian_mixture(300, MIXTURE_2D, seed=2).X.numpy() + 100.0
    init = _init_params(X, 3, ct)
    kw = {"covariance_type": ct, "max_iter": 30, "tol": 0.0, **init}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = GaussianMixture(3, dtype=torch.float32, **kw).fit(X)
        ref = SkGaussianMixture(3, **kw).fit(X)
    assert ours.means_.dtype == torch.float32
    # float32 rounding (~1e-7) is amplified where the EM trajectory moves fast
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-4)
    assert ours.lower_bounds_[-1] == pytest.approx(ref.lower_bounds_[-1], rel=1e-5)
