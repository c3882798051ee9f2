"""EM for Gaussian mixtures: closed-form and autograd M-steps around one named block.

The expected complete-data log-likelihood (per sample, with sample weights ``w_n``)

.. math::

    Q(\\theta \\mid \\theta_t) = \\frac{1}{\\sum_n w_n} \\sum_n w_n \\sum_k r_{nk}
        \\,[\\log \\pi_k + \\log \\mathcal N(x_n; \\mu_k, \\Sigma_k)],
    \\qquad r_{nk} = p(z_n = k \\mid x_n; \\theta_t),

is maximized by the M-step with the responsibilities ``r`` held constant. That is the block
``stop_gradient(resp, name="em.responsibilities")`` in :func:`expected_complete_loglik`: with it,
``∇_θ Q`` at ``θ = θ_t`` equals the gradient of the log-likelihood (Fisher's identity); without
it ``r = r(θ)`` is differentiated too and the objective becomes ``LL(θ) − H(r(θ))``, which rewards
hard assignments and has different maximizers.

Layout: plain functions (:func:`e_step`, :func:`m_step`, :func:`expected_complete_loglik`,
:func:`gradient_m_step`, :func:`log_likelihood`), the parameter container :class:`GMMParams`, and
a scikit-learn-style estimator :class:`GaussianMixture` with sample weights, ``device``/``dtype``
and the same iteration semantics as :class:`sklearn.mixture.GaussianMixture`.

Shapes follow scikit-learn (``k`` components, ``d`` features) for each ``covariance_type``:

=============  ====================  ====================================
type           covariances           precisions_cholesky
=============  ====================  ====================================
``full``       (k, d, d)             (k, d, d), upper triangular
``tied``       (d, d)                (d, d), upper triangular
``diag``       (k, d)                (k, d)
``spherical``  (k,)                  (k,)
=============  ====================  ====================================

``precisions_cholesky`` ``U`` satisfies ``U Uᵀ = Σ⁻¹`` (scikit-learn's convention), so
``log N(x; μ, Σ) = −d/2 log 2π + Σ_i log U_ii − ½ ‖Uᵀ(x − μ)‖²``.

References:
    Dempster, Laird & Rubin (1977), "Maximum likelihood from incomplete data via the EM
    algorithm", https://doi.org/10.1111/j.2517-6161.1977.tb01600.x ;
    Neal & Hinton (1998), "A view of the EM algorithm that justifies incremental, sparse, and
    other variants", https://doi.org/10.1007/978-94-011-5014-9_12 ;
    scikit-learn's ``sklearn/mixture/_gaussian_mixture.py`` (shapes, conventions, messages).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from toolkit.core.stop_gradient import stop_gradient

__all__ = [
    "COVARIANCE_TYPES",
    "GMMParams",
    "GaussianMixture",
    "e_step",
    "expected_complete_loglik",
    "from_unconstrained",
    "gradient_m_step",
    "log_likelihood",
    "m_step",
    "precisions_cholesky_from_covariances",
    "to_unconstrained",
]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
INITS = ("kmeans++", "kmeans", "random", "random_from_data")
M_STEPS = ("closed_form", "gradient")
OPTIMIZERS = ("lbfgs", "adam", "sgd")
_LOG_2PI = math.log(2.0 * math.pi)

_PD_ADVICE = ("Fitting the mixture model failed because some components have ill-defined "
              "empirical covariance (for instance caused by singleton or collapsed samples). "
              "Try to decrease the number of components, increase reg_covar, or scale the "
              "input data.")


class GMMParams(NamedTuple):
    """Mixture parameters in scikit-learn's shapes (see the module docstring)."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    precisions_cholesky: torch.Tensor


# --------------------------------------------------------------------------------------------
# validation helpers


def _check_covariance_type(where: str, covariance_type: object) -> str:
    if covariance_type not in COVARIANCE_TYPES:
        raise ValueError(f"{where}: covariance_type must be one of {COVARIANCE_TYPES}, "
                         f"got {covariance_type!r}")
    return covariance_type  # type: ignore[return-value]


def _as_tensor(where: str, arg: str, x: Any, *, device: torch.device | str | None = None,
               dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{where}: {arg} must be a numpy array or a tensor, "
                            f"got {type(x).__name__}") from exc
    if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32,
                                                 torch.int64, torch.uint8, torch.bool)):
        raise TypeError(f"{where}: {arg} must hold real numbers, got dtype {t.dtype}")
    return t.to(device=device if device is not None else t.device,
                dtype=dtype if dtype is not None else
                (t.dtype if t.is_floating_point() else torch.float64))


def _check_X(where: str, X: Any, *, device: Any = None, dtype: torch.dtype | None = None,
             n_features: int | None = None) -> torch.Tensor:
    X = _as_tensor(where, "X", X, device=device, dtype=dtype)
    if X.ndim != 2:
        raise ValueError(f"{where}: X must be 2-D (n_samples, n_features), got shape "
                         f"{tuple(X.shape)}; reshape a single feature with X.reshape(-1, 1)")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{where}: X must have at least one sample and one feature, "
                         f"got shape {tuple(X.shape)}")
    if not torch.isfinite(X).all():
        raise ValueError(f"{where}: X contains NaN or Inf; remove or impute those values")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{where}: X has {X.shape[1]} features, but the mixture was fitted "
                         f"with {n_features}")
    return X


def _check_sample_weight(where: str, sample_weight: Any, n_samples: int, *,
                         like: torch.Tensor) -> torch.Tensor:
    if sample_weight is None:
        return torch.ones(n_samples, dtype=like.dtype, device=like.device)
    w = _as_tensor(where, "sample_weight", sample_weight, device=like.device, dtype=like.dtype)
    if w.shape != (n_samples,):
        raise ValueError(f"{where}: sample_weight must have shape ({n_samples},), "
                         f"got {tuple(w.shape)}")
    if not torch.isfinite(w).all():
        raise ValueError(f"{where}: sample_weight contains NaN or Inf")
    if (w < 0).any():
        raise ValueError(f"{where}: sample_weight must be >= 0, got min "
                         f"{w.min().item():.6g}")
    if not w.sum() > 0:
        raise ValueError(f"{where}: sample_weight must have a positive sum, got all zeros")
    return w


# --------------------------------------------------------------------------------------------
# log-densities and the E-step


def _log_det_cholesky(prec_chol: torch.Tensor, covariance_type: str, n_features: int
                      ) -> torch.Tensor:
    """``Σ_i log U_ii`` = ``½ log det Σ⁻¹``; shape (k,) or () for tied."""
    if covariance_type in ("full", "tied"):
        return torch.log(torch.diagonal(prec_chol, dim1=-2, dim2=-1)).sum(-1)
    if covariance_type == "diag":
        return torch.log(prec_chol).sum(-1)
    return n_features * torch.log(prec_chol)


def _log_gaussian_prob(X: torch.Tensor, means: torch.Tensor, prec_chol: torch.Tensor,
                       covariance_type: str) -> torch.Tensor:
    """``log N(x_n; μ_k, Σ_k)`` for all n, k as an (n, k) tensor, vectorized over components.

    full: ``Uᵀ(x − μ)`` for every component is one matmul ``X @ [U_1 … U_k]`` (n, k·d) minus
    ``μ_k U_k``; nothing of shape (n, k, d, d) is formed.
    """
    n, d = X.shape
    k = means.shape[0]
    if covariance_type in ("full", "tied"):
        # shift both by a constant near the data (a translation leaves the densities unchanged)
        # so that x U − μ U does not cancel digits when the data sit far from the origin
        with torch.no_grad():
            center = means.mean(0)
        X, means = X - center, means - center
    if covariance_type == "full":
        # (d, k*d): column block j holds U_j, so (X @ W)[n, j*d:(j+1)*d] = x_n U_j
        W = prec_chol.permute(1, 0, 2).reshape(d, k * d)
        b = torch.einsum("kd,kde->ke", means, prec_chol)  # μ_k U_k, (k, d)
        y = (X @ W).view(n, k, d) - b
        maha = y.square().sum(-1)
    elif covariance_type == "tied":
        y = (X @ prec_chol)[:, None, :] - (means @ prec_chol)[None, :, :]
        maha = y.square().sum(-1)
    elif covariance_type == "diag":
        # centered differences rather than the expanded square: no cancellation in float32
        maha = ((X[:, None, :] - means[None, :, :]) * prec_chol[None, :, :]).square().sum(-1)
    else:
        maha = (X[:, None, :] - means[None, :, :]).square().sum(-1) * prec_chol.square()
    log_det = _log_det_cholesky(prec_chol, covariance_type, d)
    return -0.5 * (d * _LOG_2PI + maha) + log_det


def _log_joint(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
               prec_chol: torch.Tensor, covariance_type: str) -> torch.Tensor:
    """``log π_k + log N(x_n; μ_k, Σ_k)``, shape (n, k)."""
    return _log_gaussian_prob(X, means, prec_chol, covariance_type) + torch.log(weights)


def e_step(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
           precisions_cholesky: torch.Tensor, covariance_type: str = "full"
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """E-step in log space: per-sample log-likelihood and log-responsibilities.

    .. math::

        \\log p(x_n) = \\operatorname{logsumexp}_k [\\log \\pi_k + \\log \\mathcal N(x_n;
        \\mu_k, \\Sigma_k)], \\qquad \\log r_{nk} = \\log \\pi_k + \\log \\mathcal N(\\cdot)
        - \\log p(x_n).

    Args:
        X: (n_samples, n_features).
        weights, means, precisions_cholesky: mixture parameters (shapes: module docstring).
        covariance_type: ``"full" | "tied" | "diag" | "spherical"``.

    Returns:
        ``(log_prob_norm, log_resp)`` with shapes (n_samples,) and (n_samples, n_components).
        Unlike scikit-learn's ``_e_step`` the first is per sample, so sample weights can be
        applied; its (weighted) mean is the lower bound.

    >>> X = torch.tensor([[0.0], [1.0]])
    >>> lp, lr = e_step(X, torch.tensor([1.0]), torch.zeros(1, 1), torch.ones(1, 1), "diag")
    >>> round(lp[0].item(), 6), lr.exp().tolist()
    (-0.918939, [[1.0], [1.0]])
    """
    log_joint = _log_joint(X, weights, means, precisions_cholesky, covariance_type)
    log_prob_norm = torch.logsumexp(log_joint, dim=1)
    return log_prob_norm, log_joint - log_prob_norm[:, None]


def log_likelihood(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
                   precisions_cholesky: torch.Tensor, covariance_type: str = "full",
                   sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """(Weighted) mean log-likelihood ``Σ_n w_n log p(x_n) / Σ_n w_n``; differentiable."""
    log_prob_norm = torch.logsumexp(
        _log_joint(X, weights, means, precisions_cholesky, covariance_type), dim=1)
    if sample_weight is None:
        return log_prob_norm.mean()
    return (sample_weight * log_prob_norm).sum() / sample_weight.sum()


# --------------------------------------------------------------------------------------------
# the closed-form M-step


def precisions_cholesky_from_covariances(covariances: torch.Tensor, covariance_type: str
                                         ) -> torch.Tensor:
    """``U`` (upper triangular) with ``U Uᵀ = Σ⁻¹``, batched over components.

    ``Σ = L Lᵀ`` (Cholesky) and ``U = L⁻ᵀ`` by one batched triangular solve. A covariance that is
    not positive definite raises ``ValueError`` with scikit-learn's advice.
    """
    if covariance_type in ("full", "tied"):
        L, info = torch.linalg.cholesky_ex(covariances)
        if (info != 0).any():
            msg = _PD_ADVICE
            if covariances.dtype == torch.float32:
                msg += (" The numerical accuracy can also be improved by passing float64 data "
                        "instead of float32.")
            raise ValueError(msg)
        eye = torch.eye(covariances.shape[-1], dtype=covariances.dtype,
                        device=covariances.device).expand_as(covariances)
        return torch.linalg.solve_triangular(L, eye, upper=False).mT.contiguous()
    if (covariances <= 0).any():
        raise ValueError(_PD_ADVICE)
    return torch.rsqrt(covariances)


def _precisions_cholesky_from_precisions(precisions: torch.Tensor, covariance_type: str
                                         ) -> torch.Tensor:
    """Upper-triangular ``U`` with ``U Uᵀ = P`` via the flipped Cholesky (sklearn #26415)."""
    if covariance_type in ("full", "tied"):
        flipped = precisions.flip(-2, -1)
        L, info = torch.linalg.cholesky_ex(flipped)
        if (info != 0).any():
            raise ValueError(f"GaussianMixture.fit: precisions_init must be symmetric positive "
                             f"definite for covariance_type={covariance_type!r}")
        return L.flip(-2, -1).contiguous()
    return torch.sqrt(precisions)


def _covariances_from_precisions_cholesky(prec_chol: torch.Tensor, covariance_type: str
                                          ) -> torch.Tensor:
    """``Σ = (U Uᵀ)⁻¹ = U⁻ᵀ U⁻¹``."""
    if covariance_type in ("full", "tied"):
        eye = torch.eye(prec_chol.shape[-1], dtype=prec_chol.dtype,
                        device=prec_chol.device).expand_as(prec_chol)
        U_inv = torch.linalg.solve_triangular(prec_chol, eye, upper=True)
        return U_inv.mT @ U_inv
    return 1.0 / prec_chol.square()


def _add_to_diagonal(cov: torch.Tensor, value: float) -> torch.Tensor:
    return cov + value * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)


def m_step(X: torch.Tensor, log_resp: torch.Tensor, *, covariance_type: str = "full",
           reg_covar: float = 1e-6, sample_weight: torch.Tensor | None = None) -> GMMParams:
    """Closed-form M-step: weighted counts, means and covariances, vectorized over components.

    With ``ρ_nk = w_n r_nk`` and ``N_k = Σ_n ρ_nk + 10 ε`` (scikit-learn's guard so that an
    emptied component gives finite numbers, not NaN):

    .. math::

        \\pi_k = N_k / \\textstyle\\sum_j N_j, \\quad
        \\mu_k = \\textstyle\\sum_n ρ_{nk} x_n / N_k, \\quad
        \\Sigma_k = \\textstyle\\sum_n ρ_{nk} (x_n - \\mu_k)(x_n - \\mu_k)^\\top / N_k
        + \\text{reg\\_covar}\\, I.

    ``tied`` pools the scatter of all components over ``Σ_k N_k``; ``diag`` keeps the diagonal;
    ``spherical`` averages it over features. All ``k`` covariances come from one batched matmul
    ``(k, d, n) @ (k, n, d)``.

    Args:
        X: (n_samples, n_features).
        log_resp: (n_samples, n_components) log-responsibilities (from :func:`e_step`).
        covariance_type, reg_covar: as in :class:`GaussianMixture`.
        sample_weight: (n_samples,) non-negative weights; ``None`` means all ones.

    Returns:
        :class:`GMMParams` with ``precisions_cholesky`` computed from the covariances.
    """
    resp = log_resp.exp()
    if sample_weight is not None:
        resp = resp * sample_weight[:, None]
    eps = torch.finfo(resp.dtype).eps
    nk = resp.sum(0) + 10 * eps  # (k,)
    means = (resp.T @ X) / nk[:, None]  # (k, d)
    if covariance_type in ("full", "tied"):
        diff = X[None, :, :] - means[:, None, :]  # (k, n, d)
        scatter = (diff * resp.T[:, :, None]).mT @ diff  # (k, d, d), one bmm
        if covariance_type == "full":
            cov = _add_to_diagonal(scatter / nk[:, None, None], reg_covar)
        else:
            cov = _add_to_diagonal(scatter.sum(0) / nk.sum(), reg_covar)
    else:
        diff2 = (X[None, :, :] - means[:, None, :]).square()  # (k, n, d)
        cov = torch.einsum("nk,knd->kd", resp, diff2) / nk[:, None] + reg_covar
        if covariance_type == "spherical":
            cov = cov.mean(1)
    weights = nk / nk.sum()
    return GMMParams(weights, means, cov, precisions_cholesky_from_covariances(cov, covariance_type))


# --------------------------------------------------------------------------------------------
# Q and the gradient M-step


def expected_complete_loglik(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
                             precisions_cholesky: torch.Tensor,
                             log_resp: torch.Tensor | None = None, *,
                             covariance_type: str = "full",
                             sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """``Q = Σ_n w_n Σ_k r_nk [log π_k + log N(x_n; μ_k, Σ_k)] / Σ_n w_n`` (the M-step objective).

    ``log_resp=None`` computes ``r = r(θ)`` from the same parameters ``θ`` the objective is
    evaluated at, so there is a gradient path through ``r``; the named block
    ``"em.responsibilities"`` cuts it. With the block, ``∇_θ Q = ∇_θ LL`` at that ``θ``
    (Fisher's identity); inside ``disable_blocks("em.*")`` the objective is
    ``LL(θ) − H(r(θ))`` (H: the weighted mean entropy of the responsibilities). Passing
    ``log_resp`` from an earlier E-step (at ``θ_t``) gives the classical ``Q(θ | θ_t)``.

    Args:
        X: (n_samples, n_features).
        weights, means, precisions_cholesky: parameters (possibly requiring grad).
        log_resp: optional (n_samples, n_components) fixed log-responsibilities.
        covariance_type: ``"full" | "tied" | "diag" | "spherical"``.
        sample_weight: optional (n_samples,).

    Returns:
        A scalar tensor.

    >>> X = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    >>> w = torch.tensor([0.5, 0.5], dtype=torch.float64)
    >>> m = torch.tensor([[0.0], [2.0]], dtype=torch.float64, requires_grad=True)
    >>> U = torch.ones(2, 1, dtype=torch.float64)
    >>> q = expected_complete_loglik(X, w, m, U, covariance_type="diag")
    >>> ll = log_likelihood(X, w, m, U, "diag")
    >>> bool(torch.allclose(torch.autograd.grad(q, m)[0], torch.autograd.grad(ll, m)[0]))
    True
    """
    log_joint = _log_joint(X, weights, means, precisions_cholesky, covariance_type)
    if log_resp is None:
        log_resp = log_joint - torch.logsumexp(log_joint, dim=1, keepdim=True)
    resp = log_resp.exp()
    resp = stop_gradient(resp, name="em.responsibilities")  # M-step treats r as constants
    # r log p with r = 0 contributes 0 (also where log π = -inf)
    per_sample = torch.where(resp > 0, resp * log_joint, torch.zeros_like(log_joint)).sum(1)
    if sample_weight is None:
        return per_sample.mean()
    return (sample_weight * per_sample).sum() / sample_weight.sum()


def _strict_upper(like: torch.Tensor) -> torch.Tensor:
    """0/1 mask of the strict upper triangle (a product, cheaper than ``triu`` on tiny batches)."""
    d = like.shape[-1]
    idx = torch.arange(d, device=like.device)
    return (idx[:, None] < idx[None, :]).to(like.dtype)


def to_unconstrained(params: GMMParams | Sequence[torch.Tensor], covariance_type: str = "full"
                     ) -> list[torch.Tensor]:
    """Map ``(weights, means, …, precisions_cholesky)`` to unconstrained leaves requiring grad.

    ``[logits (k,), means (k, d), raw]`` where ``weights = softmax(logits)`` and ``raw`` holds
    the precision Cholesky factor with its diagonal replaced by its log (full/tied: strict upper
    triangle + log-diagonal; diag/spherical: ``log U``). Any real values are valid parameters.
    """
    weights, means, prec_chol = params[0], params[1], params[-1]
    with torch.no_grad():
        logits = torch.log(weights).clone()
        mu = means.clone()
        if covariance_type in ("full", "tied"):
            diag = torch.diagonal(prec_chol, dim1=-2, dim2=-1)
            raw = prec_chol * _strict_upper(prec_chol) + torch.diag_embed(torch.log(diag))
        else:
            raw = torch.log(prec_chol).clone()
    return [t.contiguous().requires_grad_(True) for t in (logits, mu, raw)]


def from_unconstrained(theta: Sequence[torch.Tensor], covariance_type: str = "full"
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`to_unconstrained`: ``(weights, means, precisions_cholesky)``."""
    logits, means, raw = theta
    weights = torch.softmax(logits, dim=0)
    if covariance_type in ("full", "tied"):
        diag = torch.diagonal(raw, dim1=-2, dim2=-1)
        prec_chol = raw * _strict_upper(raw) + torch.diag_embed(torch.exp(diag))
    else:
        prec_chol = torch.exp(raw)
    return weights, means, prec_chol


def gradient_m_step(X: torch.Tensor, log_resp: torch.Tensor | None,
                    params: GMMParams | Sequence[torch.Tensor], *,
                    covariance_type: str = "full", reg_covar: float = 1e-6,
                    sample_weight: torch.Tensor | None = None, n_steps: int = 100,
                    optimizer: str = "lbfgs", lr: float | None = None) -> GMMParams:
    """M-step by autograd: maximize :func:`expected_complete_loglik` with a torch optimizer.

    Starts from ``params`` in the unconstrained parametrization of :func:`to_unconstrained`
    (logits, means, log-diagonal Cholesky factors of the precisions) and takes ``n_steps``
    optimizer steps on ``−Q`` (for ``"lbfgs"``: up to ``n_steps`` iterations with a strong-Wolfe
    line search). ``reg_covar`` is then added to the covariances' diagonal, so that at the
    optimum the result equals :func:`m_step`'s (whose closed form is ``argmax Q + reg_covar I``).

    ``log_resp`` given: the classical M-step, ``r`` fixed at the E-step's values.
    ``log_resp=None``: ``r`` is recomputed from the parameters being optimized at every inner
    step. With the block ``"em.responsibilities"`` each step then follows ``∇ LL`` (Fisher's
    identity, a generalized EM); inside ``disable_blocks("em.*")`` it follows
    ``∇ (LL − H(r))`` and drifts toward hard assignments.

    Args:
        X: (n_samples, n_features).
        log_resp: (n_samples, n_components) or ``None`` (see above).
        params: starting point, :class:`GMMParams` or ``(weights, means, …, precisions_cholesky)``.
        covariance_type, reg_covar, sample_weight: as in :func:`m_step`.
        n_steps: number of optimizer steps (>= 1).
        optimizer: ``"lbfgs" | "adam" | "sgd"``.
        lr: learning rate; default 1.0 for lbfgs, 0.05 for adam, 0.1 for sgd.

    Returns:
        :class:`GMMParams` (no autograd history).
    """
    _check_covariance_type("gradient_m_step", covariance_type)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"gradient_m_step: optimizer must be one of {OPTIMIZERS}, "
                         f"got {optimizer!r}")
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"gradient_m_step: n_steps must be a positive int, got {n_steps!r}")
    if lr is None:
        lr = {"lbfgs": 1.0, "adam": 0.05, "sgd": 0.1}[optimizer]
    if not lr > 0:
        raise ValueError(f"gradient_m_step: lr must be > 0, got {lr!r}")
    theta = to_unconstrained(params, covariance_type)

    def objective() -> torch.Tensor:
        w, mu, U = from_unconstrained(theta, covariance_type)
        return -expected_complete_loglik(X, w, mu, U, log_resp, covariance_type=covariance_type,
                                         sample_weight=sample_weight)

    with torch.enable_grad():
        if optimizer == "lbfgs":
            opt = torch.optim.LBFGS(theta, lr=lr, max_iter=n_steps, tolerance_grad=1e-12,
                                    tolerance_change=1e-15, history_size=20,
                                    line_search_fn="strong_wolfe")

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = objective()
                loss.backward()
                return loss

            opt.step(closure)
        else:
            opt = (torch.optim.Adam(theta, lr=lr) if optimizer == "adam"
                   else torch.optim.SGD(theta, lr=lr))
            for _ in range(n_steps):
                opt.zero_grad()
                objective().backward()
                opt.step()
    with torch.no_grad():
        weights, means, prec_chol = from_unconstrained(theta, covariance_type)
        cov = _covariances_from_precisions_cholesky(prec_chol, covariance_type)
        if covariance_type in ("full", "tied"):
            cov = _add_to_diagonal(cov, reg_covar)
        else:
            cov = cov + reg_covar
        return GMMParams(weights.clone(), means.clone(), cov,
                         precisions_cholesky_from_covariances(cov, covariance_type))


# --------------------------------------------------------------------------------------------
# the estimator's fast path: sufficient statistics as one feature matrix


class _MomentEM:
    """E- and M-steps as two matrix products over precomputed features of the data.

    With ``x' = x − c`` (``c`` the weighted mean of the data) and the features
    ``φ(x') = [x'_i x'_j (i ≤ j), x'_i]`` (full/tied; diag/spherical keep only ``x'_i²``), every
    quadratic form is linear in ``φ``: ``log π_k + log N(x; μ_k, Σ_k) = φ(x')·a_k + b_k``, and
    the M-step's weighted moments are ``Rᵀ Φ`` with ``R = w ⊙ r``. One iteration is then two
    GEMMs of size (n × q) × (q × k) plus a logsumexp over (n, k): nothing of shape (n, k, d)
    is formed. Centering on ``c`` keeps the cancellation in ``E[x xᵀ] − μ μᵀ`` small; the
    estimator uses this path for float64 (for float32 it uses :func:`e_step`/:func:`m_step`).
    """

    def __init__(self, X: torch.Tensor, sample_weight: torch.Tensor, covariance_type: str,
                 reg_covar: float) -> None:
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.w = sample_weight
        d = X.shape[1]
        self.d = d
        self.center = (sample_weight @ X) / sample_weight.sum()
        Xc = X - self.center
        if covariance_type in ("full", "tied"):
            self.iu = torch.triu_indices(d, d, device=X.device)
            quad = Xc[:, self.iu[0]] * Xc[:, self.iu[1]]
            # a_k's quadratic part: P_ii for i = j, 2 P_ij for i < j
            self.mult = torch.where(self.iu[0] == self.iu[1], 1.0, 2.0).to(X.dtype)
        else:
            quad = Xc.square()
        self.n_quad = quad.shape[1]
        ones = torch.ones(X.shape[0], 1, dtype=X.dtype, device=X.device)
        self.Phi = torch.cat([quad, Xc, ones], dim=1)  # (n, q + 1); the 1 carries the bias
        # weights folded into the features once: R^T Φ_w = (w ⊙ r)^T Φ, last column N_k
        uniform = bool((sample_weight == sample_weight[0]).all())
        self.Phi_w = self.Phi if uniform else self.Phi * sample_weight[:, None]
        self.w_scale = sample_weight[0] if uniform else None

    def log_joint(self, params: GMMParams) -> torch.Tensor:
        ct, d = self.covariance_type, self.d
        weights, means, U = params.weights, params.means, params.precisions_cholesky
        mu = means - self.center  # (k, d)
        if ct in ("full", "tied"):
            P = U @ U.mT  # (k, d, d) or (d, d)
            P = P.expand(mu.shape[0], d, d) if ct == "tied" else P
            a_quad = P[:, self.iu[0], self.iu[1]] * self.mult  # (k, n_quad)
            Pmu = (P @ mu[:, :, None])[:, :, 0]
        elif ct == "diag":
            a_quad = U.square()  # (k, d)
            Pmu = a_quad * mu
        else:
            a_quad = U.square()[:, None].expand(-1, d)
            Pmu = a_quad * mu
        # log π_k + log N = −½ [φ_quad·a_quad − 2 x'·P μ' + μ'ᵀPμ' + d log 2π] + log det U
        bias = (-0.5 * (d * _LOG_2PI + (mu * Pmu).sum(1)) + _log_det_cholesky(U, ct, d)
                + torch.log(weights))
        A = torch.cat([-0.5 * a_quad, Pmu, bias[:, None]], dim=1)  # (k, q + 1)
        return self.Phi @ A.T

    def e_step(self, params: GMMParams) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(x_n), r)``: a logsumexp that keeps its ``exp`` as the responsibilities."""
        z = self.log_joint(params)
        shift = z.amax(1, keepdim=True)
        resp = z.sub_(shift).exp_()  # in place: one (n, k) buffer
        total = resp.sum(1, keepdim=True)
        resp.div_(total)
        return (total.log_().add_(shift))[:, 0], resp

    def m_step(self, resp: torch.Tensor) -> GMMParams:
        ct, d = self.covariance_type, self.d
        S = resp.T @ self.Phi_w  # (k, q + 1)
        if self.w_scale is not None:
            S = S * self.w_scale
        nk = S[:, -1] + 10 * torch.finfo(S.dtype).eps
        M = S[:, :-1] / nk[:, None]  # weighted means of φ per component
        mu = M[:, self.n_quad:]  # component means in centered coordinates
        k = mu.shape[0]
        if ct in ("full", "tied"):
            second = torch.zeros(k, d, d, dtype=M.dtype, device=M.device)
            second[:, self.iu[0], self.iu[1]] = M[:, : self.n_quad]
            second = second + (second * _strict_upper(second)).mT
            scatter = second - mu[:, :, None] * mu[:, None, :]
            if ct == "full":
                cov = _add_to_diagonal(scatter, self.reg_covar)
            else:
                cov = _add_to_diagonal((nk[:, None, None] * scatter).sum(0) / nk.sum(),
                                       self.reg_covar)
        else:
            cov = M[:, : self.n_quad] - mu.square() + self.reg_covar
            if ct == "spherical":
                cov = cov.mean(1)
        return GMMParams(nk / nk.sum(), mu + self.center, cov,
                         precisions_cholesky_from_covariances(cov, ct))


# --------------------------------------------------------------------------------------------
# initialization


def _kmeans_plusplus(X: torch.Tensor, n_clusters: int, weights: torch.Tensor,
                     generator: torch.Generator) -> torch.Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; ``2 + ⌊log k⌋`` local trials,
    as in scikit-learn's ``kmeans_plusplus``), weighted by ``weights``. Returns indices (k,)."""
    n_trials = 2 + int(math.log(n_clusters))
    sq_norms = X.square().sum(1)

    def sqdist(idx: torch.Tensor) -> torch.Tensor:  # (len(idx), n)
        return (sq_norms[idx][:, None] - 2.0 * X[idx] @ X.T + sq_norms[None, :]).clamp_min(0)

    cpu_w = weights.to("cpu", torch.float64)
    first = torch.multinomial(cpu_w, 1, generator=generator).to(X.device)
    indices = [first]
    closest = sqdist(first)[0]
    for _ in range(1, n_clusters):
        probs = (weights * closest).to("cpu", torch.float64)
        if not probs.sum() > 0:  # all points coincide with centers: pick by weight
            probs = cpu_w
        cand = torch.multinomial(probs, n_trials, replacement=True, generator=generator)
        cand = cand.to(X.device)
        d2 = torch.minimum(closest[None, :], sqdist(cand))
        best = torch.argmin((d2 * weights).sum(1))
        closest = d2[best]
        indices.append(cand[best : best + 1])
    return torch.cat(indices)


# --------------------------------------------------------------------------------------------
# the estimator


def _resolve_generator(random_state: Any) -> torch.Generator:
    if isinstance(random_state, torch.Generator):
        return random_state
    g = torch.Generator()
    if random_state is None:
        g.seed()
    elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        g.manual_seed(int(random_state))
    else:
        raise TypeError(f"GaussianMixture: random_state must be None, an int or a "
                        f"torch.Generator, got {type(random_state).__name__}")
    return g


class GaussianMixture:
    """Gaussian mixture fitted by EM, with scikit-learn's interface and numbers.

    One iteration is one E-step followed by one M-step; the lower bound of an iteration is the
    (weighted) mean log-likelihood from its E-step, and the fit stops when it changes by less
    than ``tol`` (so ``max_iter=30, tol=0`` runs exactly 30 iterations, as in scikit-learn).
    Everything is vectorized over components; data may be numpy arrays or tensors and the
    computation runs on ``device`` in ``dtype``. Fitted attributes are tensors on ``device``.

    Args:
        n_components: number of mixture components.
        covariance_type: ``"full" | "tied" | "diag" | "spherical"``.
        init: ``"kmeans++"`` (greedy k-means++ seeding, torch), ``"kmeans"`` (labels of
            :class:`sklearn.cluster.KMeans`), ``"random"`` (uniform random responsibilities) or
            ``"random_from_data"`` (``k`` distinct data points). As in scikit-learn the
            initial parameters are one M-step from the resulting responsibilities.
        n_init: number of initializations; the best lower bound wins.
        max_iter: EM iterations per initialization (0: keep the initial parameters).
        tol: convergence threshold on the change of the lower bound.
        reg_covar: added to the diagonal of every covariance (keeps them positive definite).
        weights_init, means_init, precisions_init: initial parameters in scikit-learn's shapes
            (precisions: full (k, d, d), tied (d, d), diag (k, d), spherical (k,)). When all
            three are given the initialization is fully determined by them.
        m_step: ``"closed_form"`` or ``"gradient"`` (:func:`gradient_m_step`, L-BFGS).
        warm_start: if fitted already, continue from the current parameters (``n_init`` ignored).
        device, dtype: where and in which precision to compute.
        random_state: ``None``, an int seed or a ``torch.Generator``.

    Attributes:
        weights_, means_, covariances_, precisions_cholesky_, precisions_: fitted parameters.
        converged_, n_iter_, lower_bound_, lower_bounds_: as in scikit-learn.

    >>> import torch
    >>> from toolkit.data import gaussian_mixture
    >>> X, _ = gaussian_mixture(500, seed=0)
    >>> gm = GaussianMixture(3, random_state=0).fit(X)
    >>> gm.converged_, gm.means_.shape
    (True, torch.Size([3, 2]))

    References: scikit-learn's ``GaussianMixture``,
    https://scikit-learn.org/stable/modules/generated/sklearn.mixture.GaussianMixture.html
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "full",
                 init: str = "kmeans++", n_init: int = 1, max_iter: int = 100,
                 tol: float = 1e-3, reg_covar: float = 1e-6, weights_init: Any = None,
                 means_init: Any = None, precisions_init: Any = None,
                 m_step: str = "closed_form", warm_start: bool = False,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64,
                 random_state: int | torch.Generator | None = None) -> None:
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.m_step = m_step
        self.warm_start = warm_start
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    def __repr__(self) -> str:
        return (f"GaussianMixture(n_components={self.n_components}, "
                f"covariance_type={self.covariance_type!r}, m_step={self.m_step!r})")

    # ---- validation ------------------------------------------------------------------------

    def _check_parameters(self) -> None:
        w = "GaussianMixture"

        def positive_int(name: str, value: Any, minimum: int) -> None:
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{w}: {name} must be an int >= {minimum}, got {value!r}")

        positive_int("n_components", self.n_components, 1)
        positive_int("n_init", self.n_init, 1)
        positive_int("max_iter", self.max_iter, 0)
        _check_covariance_type(w, self.covariance_type)
        if self.init not in INITS:
            raise ValueError(f"{w}: init must be one of {INITS}, got {self.init!r}")
        if self.m_step not in M_STEPS:
            raise ValueError(f"{w}: m_step must be one of {M_STEPS}, got {self.m_step!r}")
        for name in ("tol", "reg_covar"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
                raise ValueError(f"{w}: {name} must be a float >= 0, got {value!r}")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise TypeError(f"{w}: dtype must be a floating torch.dtype, got {self.dtype!r}")

    def _checked_inits(self, n_features: int) -> tuple[Any, Any, Any]:
        where = "GaussianMixture.fit"
        k, d, ct = self.n_components, n_features, self.covariance_type
        kw = {"device": self.device, "dtype": self.dtype}
        weights = means = precisions = None
        if self.weights_init is not None:
            weights = _as_tensor(where, "weights_init", self.weights_init, **kw)
            if weights.shape != (k,):
                raise ValueError(f"{where}: weights_init must have shape ({k},), "
                                 f"got {tuple(weights.shape)}")
            if (weights < 0).any() or (weights > 1).any():
                raise ValueError(f"{where}: weights_init must be in [0, 1], got "
                                 f"{weights.tolist()}")
            atol = 1e-6 if self.dtype == torch.float32 else 1e-8
            if abs(weights.sum().item() - 1.0) > atol:
                raise ValueError(f"{where}: weights_init must sum to 1, got "
                                 f"{weights.sum().item():.10g}")
        if self.means_init is not None:
            means = _as_tensor(where, "means_init", self.means_init, **kw)
            if means.shape != (k, d):
                raise ValueError(f"{where}: means_init must have shape ({k}, {d}), "
                                 f"got {tuple(means.shape)}")
        if self.precisions_init is not None:
            precisions = _as_tensor(where, "precisions_init", self.precisions_init, **kw)
            shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
            if precisions.shape != shape:
                raise ValueError(f"{where}: precisions_init must have shape {shape} for "
                                 f"covariance_type={ct!r}, got {tuple(precisions.shape)}")
            if ct in ("full", "tied"):
                if not torch.allclose(precisions, precisions.mT):
                    raise ValueError(f"{where}: precisions_init must be symmetric")
            elif (precisions <= 0).any():
                raise ValueError(f"{where}: precisions_init must be > 0")
        return weights, means, precisions

    # ---- fitting ---------------------------------------------------------------------------

    def _initial_resp(self, X: torch.Tensor, w: torch.Tensor, g: torch.Generator
                      ) -> torch.Tensor:
        n, k = X.shape[0], self.n_components
        resp = torch.zeros(n, k, dtype=X.dtype, device=X.device)
        if self.init == "kmeans":
            from sklearn.cluster import KMeans

            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g).item())
            labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(
                X.cpu().numpy(), sample_weight=w.cpu().numpy()).labels_
            resp[torch.arange(n), torch.as_tensor(labels, device=X.device)] = 1.0
        elif self.init == "random":
            resp = torch.rand(n, k, generator=g, dtype=torch.float64).to(X)
            resp /= resp.sum(1, keepdim=True)
        elif self.init == "random_from_data":
            idx = torch.randperm(n, generator=g)[:k].to(X.device)
            resp[idx, torch.arange(k, device=X.device)] = 1.0
        else:
            idx = _kmeans_plusplus(X, k, w, g)
            resp[idx, torch.arange(k, device=X.device)] = 1.0
        return resp

    def _initialize(self, X: torch.Tensor, w: torch.Tensor, g: torch.Generator,
                    inits: tuple[Any, Any, Any]) -> GMMParams:
        weights_init, means_init, precisions_init = inits
        ct = self.covariance_type
        weights = means = cov = None
        if weights_init is None or means_init is None or precisions_init is None:
            resp = self._initial_resp(X, w, g)
            log_resp = torch.log(resp)
            p = m_step(X, log_resp, covariance_type=ct, reg_covar=self.reg_covar,
                       sample_weight=w)
            # as in scikit-learn, the initial weights are N_k / n (not renormalized)
            nk = (resp * w[:, None]).sum(0) + 10 * torch.finfo(X.dtype).eps
            weights, means, cov = nk / w.sum(), p.means, p.covariances
        if weights_init is not None:
            weights = weights_init
        if means_init is not None:
            means = means_init
        if precisions_init is None:
            prec_chol = precisions_cholesky_from_covariances(cov, ct)
        else:
            prec_chol = _precisions_cholesky_from_precisions(precisions_init, ct)
            cov = _covariances_from_precisions_cholesky(prec_chol, ct)
        return GMMParams(weights, means, cov, prec_chol)

    def _m_step(self, X: torch.Tensor, log_resp: torch.Tensor, w: torch.Tensor,
                params: GMMParams) -> GMMParams:
        if self.m_step == "closed_form":
            return m_step(X, log_resp, covariance_type=self.covariance_type,
                          reg_covar=self.reg_covar, sample_weight=w)
        return gradient_m_step(X, log_resp, params, covariance_type=self.covariance_type,
                               reg_covar=self.reg_covar, sample_weight=w)

    def fit(self, X: Any, sample_weight: Any = None) -> GaussianMixture:
        """Fit by EM (``n_init`` starts, keep the best lower bound); returns ``self``.

        Args:
            X: (n_samples, n_features) array or tensor; finite values.
            sample_weight: optional (n_samples,) non-negative weights; an integer weight acts
                exactly like repeating the row that many times.
        """
        self._check_parameters()
        where = "GaussianMixture.fit"
        X = _check_X(where, X, device=self.device, dtype=self.dtype)
        n, d = X.shape
        if n < self.n_components:
            raise ValueError(f"{where}: X must have n_samples >= n_components, got "
                             f"n_samples={n} < n_components={self.n_components}")
        if n < 2:
            raise ValueError(f"{where}: X must have at least 2 samples, got {n}")
        w = _check_sample_weight(where, sample_weight, n, like=X)
        inits = self._checked_inits(d)
        g = _resolve_generator(self.random_state)

        do_init = not (self.warm_start and hasattr(self, "converged_"))
        n_init = self.n_init if do_init else 1
        w_total = w.sum()
        fast = (_MomentEM(X, w, self.covariance_type, self.reg_covar)
                if self.m_step == "closed_form" and X.dtype == torch.float64 else None)
        best: GMMParams | None = None
        max_lower_bound = -math.inf
        best_bounds: list[float] = []
        best_n_iter = 0
        self.converged_ = False
        for _ in range(n_init):
            params = (self._initialize(X, w, g, inits) if do_init else self._get_params())
            lower_bound = -math.inf if do_init else self.lower_bound_
            bounds: list[float] = []
            converged = False
            n_iter = 0
            for it in range(1, self.max_iter + 1):
                n_iter = it
                prev = lower_bound
                if fast is not None:
                    log_prob_norm, resp = fast.e_step(params)
                    params = fast.m_step(resp)
                else:
                    log_prob_norm, log_resp = e_step(X, params.weights, params.means,
                                                     params.precisions_cholesky,
                                                     self.covariance_type)
                    params = self._m_step(X, log_resp, w, params)
                lower_bound = ((w * log_prob_norm).sum() / w_total).item()
                bounds.append(lower_bound)
                if abs(lower_bound - prev) < self.tol:
                    converged = True
                    break
            if lower_bound > max_lower_bound or max_lower_bound == -math.inf:
                max_lower_bound = lower_bound
                best, best_bounds, best_n_iter = params, bounds, n_iter
                self.converged_ = converged
        if not self.converged_ and self.max_iter > 0:
            warnings.warn(f"GaussianMixture: the best initialization did not converge within "
                          f"max_iter={self.max_iter} iterations (tol={self.tol}). Increase "
                          f"max_iter or tol, try another init or n_init > 1, or check for "
                          f"degenerate data.", ConvergenceWarning, stacklevel=2)
        assert best is not None
        self._set_params(best)
        self.n_iter_ = best_n_iter
        self.lower_bound_ = max_lower_bound
        self.lower_bounds_ = best_bounds
        self.n_features_in_ = d
        return self

    def fit_predict(self, X: Any, sample_weight: Any = None) -> torch.Tensor:
        """Fit, then return the most probable component of each sample."""
        return self.fit(X, sample_weight=sample_weight).predict(X)

    def _get_params(self) -> GMMParams:
        return GMMParams(self.weights_, self.means_, self.covariances_, self.precisions_cholesky_)

    def _set_params(self, params: GMMParams) -> None:
        self.weights_, self.means_, self.covariances_, self.precisions_cholesky_ = params
        U = self.precisions_cholesky_
        self.precisions_ = U @ U.mT if self.covariance_type in ("full", "tied") else U.square()

    # ---- using a fitted model --------------------------------------------------------------

    def _check_fitted(self, where: str) -> None:
        if not hasattr(self, "means_"):
            raise RuntimeError(f"GaussianMixture.{where}: this instance is not fitted yet; "
                               f"call fit(X) first")

    def _prepare(self, where: str, X: Any) -> torch.Tensor:
        self._check_fitted(where)
        return _check_X(f"GaussianMixture.{where}", X, device=self.means_.device,
                        dtype=self.means_.dtype, n_features=self.means_.shape[1])

    def score_samples(self, X: Any) -> torch.Tensor:
        """Log-likelihood ``log p(x_n)`` of each sample, shape (n_samples,)."""
        X = self._prepare("score_samples", X)
        return e_step(X, self.weights_, self.means_, self.precisions_cholesky_,
                      self.covariance_type)[0]

    def score(self, X: Any, sample_weight: Any = None) -> float:
        """Mean (weighted) log-likelihood per sample."""
        X = self._prepare("score", X)
        w = _check_sample_weight("GaussianMixture.score", sample_weight, X.shape[0], like=X)
        lp = e_step(X, self.weights_, self.means_, self.precisions_cholesky_,
                    self.covariance_type)[0]
        return ((w * lp).sum() / w.sum()).item()

    def predict_proba(self, X: Any) -> torch.Tensor:
        """Responsibilities ``p(z = k | x_n)``, shape (n_samples, n_components)."""
        X = self._prepare("predict_proba", X)
        return e_step(X, self.weights_, self.means_, self.precisions_cholesky_,
                      self.covariance_type)[1].exp()

    def predict(self, X: Any) -> torch.Tensor:
        """Most probable component of each sample, shape (n_samples,)."""
        X = self._prepare("predict", X)
        return _log_joint(X, self.weights_, self.means_, self.precisions_cholesky_,
                          self.covariance_type).argmax(1)

    def sample(self, n_samples: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``n_samples`` points; returns ``(X, y)`` sorted by component, as scikit-learn.

        Uses a fresh generator from ``random_state`` (an int seed gives the same draws).
        """
        self._check_fitted("sample")
        if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
            raise ValueError(f"GaussianMixture.sample: n_samples must be an int >= 1, "
                             f"got {n_samples!r}")
        g = (torch.Generator().manual_seed(torch.seed()) if self.random_state is None
             else _resolve_generator(self.random_state))
        dev, dt = self.means_.device, self.means_.dtype
        d = self.means_.shape[1]
        y = torch.multinomial(self.weights_.to("cpu", torch.float64), n_samples,
                              replacement=True, generator=g).sort().values
        z = torch.randn(n_samples, d, generator=g, dtype=torch.float64).to(dev, dt)
        y = y.to(dev)
        cov = self.covariances_
        if self.covariance_type == "full":
            X = self.means_[y] + (torch.linalg.cholesky(cov)[y] @ z[:, :, None])[:, :, 0]
        elif self.covariance_type == "tied":
            X = self.means_[y] + z @ torch.linalg.cholesky(cov).T
        elif self.covariance_type == "diag":
            X = self.means_[y] + z * cov[y].sqrt()
        else:
            X = self.means_[y] + z * cov[y].sqrt()[:, None]
        return X, y

    def _n_parameters(self) -> int:
        k, d = self.means_.shape
        cov_params = {"full": k * d * (d + 1) / 2, "diag": k * d, "tied": d * (d + 1) / 2,
                      "spherical": k}[self.covariance_type]
        return int(cov_params + k * d + k - 1)

    def bic(self, X: Any) -> float:
        """Bayesian information criterion ``−2 n score + p log n`` (lower is better)."""
        n = self._prepare("bic", X).shape[0]
        return -2 * self.score(X) * n + self._n_parameters() * math.log(n)

    def aic(self, X: Any) -> float:
        """Akaike information criterion ``−2 n score + 2 p`` (lower is better)."""
        n = self._prepare("aic", X).shape[0]
        return -2 * self.score(X) * n + 2 * self._n_parameters()
