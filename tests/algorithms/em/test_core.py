"""The functional core against independent references (numpy, scipy) and the block's theory."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from torch.nn import functional as F

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms.em import (
    COVARIANCE_TYPES,
    GMMParams,
    e_step,
    expected_complete_loglik,
    from_unconstrained,
    gradient_m_step,
    log_likelihood,
    m_step,
    to_unconstrained,
)
from toolkit.lab.data import MIXTURE_2D, gaussian_mixture

from ._helpers import F64, _full_covs, _grads, _random_params


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
def test_m_step_matches_numpy_weighted_moments(data: torch.Tensor, ct: str, seed: int) -> None:
    k, d = 3, 2
    rng = np.random.default_rng(seed)
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


def _smallest_variance(p: GMMParams, ct: str) -> float:
    cov = p.covariances
    if ct in ("full", "tied"):
        return float(torch.linalg.eigvalsh(cov).min())
    return float(cov.min())


def test_log_likelihood_never_decreases_over_100_iterations(seed: int) -> None:
    """Dempster, Laird & Rubin (1977): each EM iteration raises the log-likelihood, in exact
    arithmetic. Without reg_covar a component can collapse onto one point (seed shifts 72, 76
    and 77 of 0-99), where the likelihood is unbounded and its value is decided by rounding
    (77, spherical: N_k = 1, variance 3.6e-29), or the M-step refuses the singular covariance
    (76, full). The check stops there: once a variance falls below 1e-12 of the data's, or
    the M-step says the covariance is ill-defined."""
    X = gaussian_mixture(400, MIXTURE_2D, seed=seed + 3).X
    floor = 1e-12 * float(X.var(0).min())
    for ct in COVARIANCE_TYPES:
        p = _random_params(3, 2, ct, seed=seed + 5)
        lls = []
        for _ in range(100):
            log_prob_norm, log_resp = e_step(X, p.weights, p.means, p.precisions_cholesky, ct)
            lls.append(log_prob_norm.mean().item())
            try:
                p = m_step(X, log_resp, covariance_type=ct, reg_covar=0.0)
            except ValueError as err:  # the collapse, caught by the M-step
                assert "ill-defined empirical covariance" in str(err)
                break
            if _smallest_variance(p, ct) < floor:
                break
        diffs = np.diff(lls)
        assert diffs.min() >= -1e-12 * abs(lls[-1]), (ct, diffs.min())
        assert lls[-1] > lls[0] + 0.1


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_fisher_identity_holds_with_the_block_and_fails_without(data: torch.Tensor,
                                                                ct: str, seed: int) -> None:
    p = _random_params(3, 2, ct, seed=seed + 2)
    sw = torch.rand(len(data), dtype=F64, generator=torch.Generator().manual_seed(seed)) + 0.5
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


def test_unblocked_objective_is_loglik_minus_entropy(data: torch.Tensor, seed: int) -> None:
    """Without the block, ∇Q is the gradient of LL − H(r(θ)), computed here independently."""
    ct = "full"
    p = _random_params(3, 2, ct, seed=seed + 4)
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


@pytest.mark.parametrize("optimizer", ["lbfgs", "rprop"])
@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_gradient_m_step_reaches_closed_form(ct: str, optimizer: str, seed: int) -> None:
    """With fixed responsibilities (log_resp given) the optimizer finds the closed form.

    The responsibilities are the data's own components, blurred by seeded noise, so that every
    component holds a share of the data (64 points at least over seed shifts 0-99) and Q pins
    every parameter. Q's curvature along a component's mean is its mass N_k: responsibilities
    made from a random start can leave N_k = 7e-4 (seed shift 15), where the optimizer stops
    with that mean 6.0 from the closed form and Q equal to 1e-9, and the closed form's mean is
    not determined by Q in floating point. Over seed shifts 0-99, L-BFGS and Rprop from random
    starts, the worst errors were 3.2e-7 (means), 6.2e-7 (covariances, relative) and 3.6e-8
    (weights).
    """
    mixture = gaussian_mixture(300, MIXTURE_2D, seed=1)
    data = mixture.X
    noise = torch.randn(300, 3, generator=torch.Generator().manual_seed(seed), dtype=F64)
    log_resp = torch.log_softmax(4 * F.one_hot(mixture.y.long(), 3).to(F64) + noise, dim=1)
    p = _random_params(3, 2, ct, seed=seed + 7)
    closed = m_step(data, log_resp, covariance_type=ct, reg_covar=1e-6)
    grad = gradient_m_step(data, log_resp, p, covariance_type=ct, reg_covar=1e-6, n_steps=200,
                           optimizer=optimizer)

    def q(params: GMMParams) -> float:
        return expected_complete_loglik(data, params.weights, params.means,
                                        params.precisions_cholesky, log_resp,
                                        covariance_type=ct).item()

    assert abs(q(grad) - q(closed)) < 1e-9 * abs(q(closed))
    torch.testing.assert_close(grad.means, closed.means, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grad.covariances, closed.covariances, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad.weights, closed.weights, rtol=1e-6, atol=1e-8)


def test_gradient_m_step_with_adam_improves_q(data: torch.Tensor, seed: int) -> None:
    p = _random_params(3, 2, "full", seed=seed + 8)
    _, log_resp = e_step(data, p.weights, p.means, p.precisions_cholesky, "full")
    q0 = expected_complete_loglik(data, p.weights, p.means, p.precisions_cholesky, log_resp)
    new = gradient_m_step(data, log_resp, p, n_steps=50, optimizer="adam", reg_covar=0.0)
    q1 = expected_complete_loglik(data, new.weights, new.means, new.precisions_cholesky,
                                  log_resp)
    assert q1 > q0


def test_gradient_m_step_bad_arguments(data: torch.Tensor) -> None:
    p = _random_params(3, 2, "full")
    for kwargs, error, match in [
        ({"optimizer": "newton"}, ValueError,
         "gradient_m_step: optimizer must be one of 'lbfgs', 'rprop', 'adam', 'sgd', got 'newton'"),
        ({"n_steps": 0}, ValueError, "gradient_m_step: n_steps must be an int >= 1, got 0"),
        ({"n_steps": 2.5}, TypeError, "gradient_m_step: n_steps must be an int >= 1, got 2.5"),
        ({"lr": -1.0}, ValueError, "gradient_m_step: lr must be None or a number > 0, got -1.0"),
        ({"lr": "fast"}, TypeError, "gradient_m_step: lr must be None or a number > 0"),
        ({"covariance_type": "banded"}, ValueError,
         "gradient_m_step: covariance_type must be one of 'full', 'tied', 'diag', 'spherical'"),
    ]:
        with pytest.raises(error, match=match):
            gradient_m_step(data, None, p, **kwargs)


def _cuts(tree: ast.AST) -> list[ast.Call]:
    names = {"stop_gradient", "as_constant", "require_block"}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in names]


def _passes_block(call: ast.Call) -> bool:
    kw = {k.arg: k.value for k in call.keywords}
    first = call.args[0] if call.func.id == "require_block" and call.args else None
    return any(isinstance(v, ast.Name) and v.id == "BLOCK" for v in (kw.get("name"), first))


def test_the_block_is_the_only_cut_in_the_package() -> None:
    """BLOCK is the one name passed to the core's cut; no hand-made cut anywhere in the package."""
    import toolkit.algorithms.em as em

    assert em.BLOCK == "em.responsibilities"
    sources = {p.name: p.read_text() for p in pathlib.Path(em.__file__).parent.glob("*.py")}
    for name, text in sources.items():
        for forbidden in (".detach(", "is_block_disabled", "set_grad_enabled"):
            assert forbidden not in text, (name, forbidden)
        assert all(_passes_block(call) for call in _cuts(ast.parse(text))), name
    assert "stop_gradient(resp, name=BLOCK)  # M-step treats r as constants" in sources["core.py"]
    assert len(_cuts(ast.parse(sources["core.py"]))) == 1
