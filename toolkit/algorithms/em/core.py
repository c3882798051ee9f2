"""The functional core of EM: the block, the M-step objective, E-step, log-densities, M-steps.

``BLOCK`` is the one cut of the algorithm: in :func:`expected_complete_loglik` the
responsibilities pass ``stop_gradient(resp, name=BLOCK)``, so that the M-step treats them as
constants. Everything else here is plain, differentiable torch code vectorized over components.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from toolkit._utils.array_validation import check_tensor
from toolkit._utils.param_validation import Integer, Options, Real, check_params
from toolkit.algorithms.em.params import (
    COVARIANCE_TYPES,
    CovarianceOverflowError,
    GMMParams,
    IllDefinedCovarianceError,
    add_to_diagonal,
    check_mixture,
    cholesky_of_precisions,
    covariances_from_precisions_cholesky,
    from_unconstrained,
    to_unconstrained,
)
from toolkit.core.stop_gradient import stop_gradient

__all__ = [
    "BLOCK",
    "e_step",
    "expected_complete_loglik",
    "gradient_m_step",
    "log_likelihood",
    "m_step",
]

#: The block of EM: the responsibilities ``r = p(z | x; θ)`` are constants for the M-step. With
#: it, ``∇_θ Q = ∇_θ LL`` (Fisher's identity); without it ``Q = LL − H(r(θ))``.
BLOCK = "em.responsibilities"

OPTIMIZERS = ("lbfgs", "rprop", "adam", "sgd")
_M_STEP_CONSTRAINTS = {
    "covariance_type": [Options(*COVARIANCE_TYPES)],
    "reg_covar": [Real(0)],
}
_GRADIENT_M_STEP_CONSTRAINTS = {
    "covariance_type": [Options(*COVARIANCE_TYPES)],
    "optimizer": [Options(*OPTIMIZERS)],
    "n_steps": [Integer(1)],
    "lr": [None, Real(0, closed="neither")],
}
_LOG_2PI = math.log(2.0 * math.pi)


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
    _checked("expected_complete_loglik", X, weights, means, precisions_cholesky,
             covariance_type, log_resp=log_resp, sample_weight=sample_weight)
    log_joint = weighted_log_prob(X, weights, means, precisions_cholesky, covariance_type)
    if log_resp is None:
        log_resp = log_joint - torch.logsumexp(log_joint, dim=1, keepdim=True)
    resp = log_resp.exp()
    resp = stop_gradient(resp, name=BLOCK)  # M-step treats r as constants
    # r log p with r = 0 contributes 0 (also where log π = -inf)
    per_sample = torch.where(resp > 0, resp * log_joint, torch.zeros_like(log_joint)).sum(1)
    if sample_weight is None:
        return per_sample.mean().to(X.dtype)
    sample_weight = sample_weight.to(per_sample.dtype)
    return ((sample_weight * per_sample).sum() / sample_weight.sum()).to(X.dtype)




def _check_data(where: str, X: object, n_features: int | None, *, log_resp: object = None,
                n_components: int | None = None, sample_weight: object = None,
                device: torch.device | None = None) -> None:
    """X (n, d) and the optional log_resp (n, k) and sample_weight (n,): floating tensors on
    the parameters' ``device``; errors name ``where`` and the argument."""
    check_tensor(where, "X", X, ndim=2, allow_meta=device is not None and device.type == "meta")
    n = X.shape[0]
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{where}: X must have shape (n_samples, {n_features}) to match the "
                         f"means, got {tuple(X.shape)}")
    named = [("X", X, (n, X.shape[1]))]
    if log_resp is not None:
        check_tensor(where, "log_resp", log_resp, ndim=2)
        if n_components is not None and log_resp.shape != (n, n_components):
            raise ValueError(f"{where}: log_resp must have shape ({n}, {n_components}), got "
                             f"{tuple(log_resp.shape)}")
        if log_resp.shape[0] != n:
            raise ValueError(f"{where}: log_resp must have one row per row of X ({n}), got "
                             f"shape {tuple(log_resp.shape)}")
        named.append(("log_resp", log_resp, log_resp.shape))
    if sample_weight is not None:
        check_tensor(where, "sample_weight", sample_weight, ndim=1, floating=False)
        if sample_weight.shape != (n,):
            raise ValueError(f"{where}: sample_weight must have shape ({n},), got "
                             f"{tuple(sample_weight.shape)}")
        named.append(("sample_weight", sample_weight, (n,)))
    device = device if device is not None else X.device
    for name, t, _ in named:
        if t.device != device:
            raise ValueError(f"{where}: {name} is on {t.device}, but the "
                             f"{'parameters' if name == 'X' else 'data'} are on {device}")


def _checked(where: str, X: object, weights: object, means: object,
             precisions_cholesky: object, covariance_type: object, *, log_resp: object = None,
             sample_weight: object = None) -> None:
    """The arguments of a function of data and mixture parameters (see :func:`_check_data`)."""
    k, d = check_mixture(where, weights, means, precisions_cholesky, covariance_type)
    _check_data(where, X, d, log_resp=log_resp, n_components=k, sample_weight=sample_weight,
                device=weights.device)  # type: ignore[union-attr]


def _covariance_error(where: str, err: ValueError) -> ValueError:
    """An M-step's failed covariances, in terms of its arguments X and log_resp (an overflow
    keeps its class, which the estimator answers in terms of its own X)."""
    kind = type(err) if isinstance(err, (CovarianceOverflowError, IllDefinedCovarianceError)) \
        else ValueError
    return kind(f"{where}: the covariances that X and log_resp give are not positive definite "
                f"and finite: {err}")


# --------------------------------------------------------------------------------------------
# log-densities and the E-step


def log_det_cholesky(prec_chol: torch.Tensor, covariance_type: str, n_features: int
                     ) -> torch.Tensor:
    """``Σ_i log U_ii`` = ``½ log det Σ⁻¹``; shape (k,) or () for tied."""
    if covariance_type in ("full", "tied"):
        return torch.log(torch.diagonal(prec_chol, dim1=-2, dim2=-1)).sum(-1)
    if covariance_type == "diag":
        return torch.log(prec_chol).sum(-1)
    return n_features * torch.log(prec_chol)


def _compute_dtype(X: torch.Tensor) -> torch.dtype:
    """The arithmetic of the functions here: float64, for float32 data too (returned in X's dtype).

    A float32 quadratic form cannot meet 1e-4 nats once the covariance is ill-conditioned, in
    any formulation: the whitened coordinate along the smallest eigenvalue is a sum of terms
    ``sqrt(κ)`` times larger than itself, so float32 rounding leaves ``~u·sqrt(κ)`` of it
    (measured, d = 8, 2000 points: 1.5e-4 nats at κ = 1e5, 3.7e-4 at 1e6, 1.6e-3 at 1e7).
    The differences ``x − μ`` of float32 numbers are exact in float64, and the rest is exact to
    ~1e-16·sqrt(κ); the estimator's fit has its own fast path (:mod:`.fast`).
    """
    return torch.float64 if X.dtype in (torch.float32, torch.float16, torch.bfloat16) \
        else X.dtype


def _log_gaussian_prob(X: torch.Tensor, means: torch.Tensor, prec_chol: torch.Tensor,
                       covariance_type: str) -> torch.Tensor:
    """``log N(x_n; μ_k, Σ_k)`` for all n, k as an (n, k) tensor, in :func:`_compute_dtype`.

    Centred and whitened coordinates, as scikit-learn's ``_estimate_log_gaussian_prob`` for
    full/tied but without its expanded diag/spherical square: ``y = Uᵀ(x − μ_k)``, one
    component at a time (memory n × d), ``‖y‖²`` never expanded into
    ``xᵀPx − 2μᵀPx + μᵀPμ`` (whose float32 terms are ~``(‖x‖²/λ_min)`` and cancel).
    """
    dtype = _compute_dtype(X)
    X, means, prec_chol = X.to(dtype), means.to(dtype), prec_chol.to(dtype)
    d = X.shape[1]
    if covariance_type == "full":
        maha = torch.stack([((X - mu) @ U).square().sum(1) for mu, U in zip(means, prec_chol)],
                           dim=1)
    elif covariance_type == "tied":
        maha = torch.stack([((X - mu) @ prec_chol).square().sum(1) for mu in means], dim=1)
    elif covariance_type == "diag":
        maha = ((X[:, None, :] - means[None, :, :]) * prec_chol[None, :, :]).square().sum(-1)
    else:
        maha = (X[:, None, :] - means[None, :, :]).square().sum(-1) * prec_chol.square()
    log_det = log_det_cholesky(prec_chol, covariance_type, d)
    return -0.5 * (d * _LOG_2PI + maha) + log_det


def weighted_log_prob(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
                      prec_chol: torch.Tensor, covariance_type: str) -> torch.Tensor:
    """``log π_k + log N(x_n; μ_k, Σ_k)`` (the log joint of ``x_n`` and component ``k``;
    scikit-learn's ``_estimate_weighted_log_prob``), shape (n, k), in :func:`_compute_dtype`."""
    return (_log_gaussian_prob(X, means, prec_chol, covariance_type)
            + torch.log(weights.to(_compute_dtype(X))))


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
        applied; its (weighted) mean is the lower bound. Both in ``X``'s dtype.

    Numerics: centred, Cholesky-whitened coordinates ``‖Uᵀ(x − μ_k)‖²`` (never the expanded
    square), computed in float64 also for float32 inputs (see :func:`_compute_dtype` for why
    float32 arithmetic cannot do it) and rounded once. For float32 data and parameters, every
    covariance type, condition numbers up to 1e7 and data up to 1e3 from the origin,
    ``log_prob_norm`` is within 1e-4 nats of scikit-learn's float64 evaluation of the same
    parameters, plus the rounding of the result to float32 (``6e-8·|log p|``); tested with
    hypothesis in ``tests/algorithms/em/test_float32_numerics.py``.

    >>> X = torch.tensor([[0.0], [1.0]])
    >>> lp, lr = e_step(X, torch.tensor([1.0]), torch.zeros(1, 1), torch.ones(1, 1), "diag")
    >>> round(lp[0].item(), 4), lr.exp().tolist()  # −½ log 2π
    (-0.9189, [[1.0], [1.0]])
    """
    _checked("e_step", X, weights, means, precisions_cholesky, covariance_type)
    log_joint = weighted_log_prob(X, weights, means, precisions_cholesky, covariance_type)
    log_prob_norm = torch.logsumexp(log_joint, dim=1)
    return log_prob_norm.to(X.dtype), (log_joint - log_prob_norm[:, None]).to(X.dtype)


def log_likelihood(X: torch.Tensor, weights: torch.Tensor, means: torch.Tensor,
                   precisions_cholesky: torch.Tensor, covariance_type: str = "full",
                   sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """(Weighted) mean log-likelihood ``Σ_n w_n log p(x_n) / Σ_n w_n``; differentiable."""
    _checked("log_likelihood", X, weights, means, precisions_cholesky, covariance_type,
             sample_weight=sample_weight)
    log_prob_norm = torch.logsumexp(
        weighted_log_prob(X, weights, means, precisions_cholesky, covariance_type), dim=1)
    if sample_weight is None:
        return log_prob_norm.mean().to(X.dtype)
    sample_weight = sample_weight.to(log_prob_norm.dtype)
    return ((sample_weight * log_prob_norm).sum() / sample_weight.sum()).to(X.dtype)



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
        :class:`GMMParams` in ``X``'s dtype, ``precisions_cholesky`` from the covariances.

    Numerics: the scatter is formed around the new means (no ``E[xxᵀ] − μμᵀ``), and float32
    inputs are computed in float64 before the result is rounded once. In float32 every entry
    of a sum of products ``(x − μ)_i (x − μ)_j`` is off by ``~u·λ_max`` (u = 6e-8), which is
    a relative error ``u·κ`` in the smallest eigenvalue (0.6 at κ = 1e7), and means of data
    far from the origin are off by ``u·‖x‖``.
    """
    where = "m_step"
    check_params(where, {"covariance_type": covariance_type, "reg_covar": reg_covar},
                 _M_STEP_CONSTRAINTS)
    check_tensor(where, "log_resp", log_resp)  # required here
    _check_data(where, X, None, log_resp=log_resp, sample_weight=sample_weight)
    try:
        return closed_form_m_step(X, log_resp, covariance_type, reg_covar, sample_weight)
    except ValueError as err:  # scikit-learn's advice, said of this function's arguments
        raise _covariance_error(where, err) from err


def closed_form_m_step(X: torch.Tensor, log_resp: torch.Tensor, covariance_type: str,
                       reg_covar: float, sample_weight: torch.Tensor | None) -> GMMParams:
    """:func:`m_step` without its argument checks, for the package's own callers (the starts,
    whose responsibilities are of their making)."""
    out_dtype = X.dtype
    dtype = _compute_dtype(X)
    X, log_resp = X.to(dtype), log_resp.to(dtype)
    resp = log_resp.exp()
    if sample_weight is not None:
        resp = resp * sample_weight.to(dtype)[:, None]
    eps = torch.finfo(out_dtype).eps
    nk = resp.sum(0) + 10 * eps  # (k,)
    means = (resp.T @ X) / nk[:, None]  # (k, d)
    if covariance_type in ("full", "tied"):
        diff = X[None, :, :] - means[:, None, :]  # (k, n, d)
        scatter = (diff * resp.T[:, :, None]).mT @ diff  # (k, d, d), one bmm
        if covariance_type == "full":
            cov = add_to_diagonal(scatter / nk[:, None, None], reg_covar)
        else:
            cov = add_to_diagonal(scatter.sum(0) / nk.sum(), reg_covar)
    else:
        diff2 = (X[None, :, :] - means[:, None, :]).square()  # (k, n, d)
        cov = torch.einsum("nk,knd->kd", resp, diff2) / nk[:, None] + reg_covar
        if covariance_type == "spherical":
            cov = cov.mean(1)
    weights = nk / nk.sum()
    prec_chol = cholesky_of_precisions(cov, covariance_type)
    return GMMParams(*(t.to(out_dtype) for t in (weights, means, cov, prec_chol)))



def gradient_m_step(X: torch.Tensor, log_resp: torch.Tensor | None,
                    params: GMMParams | Sequence[torch.Tensor], *,
                    covariance_type: str = "full", reg_covar: float = 1e-6,
                    sample_weight: torch.Tensor | None = None, n_steps: int = 100,
                    optimizer: str = "lbfgs", lr: float | None = None) -> GMMParams:
    """M-step by autograd: maximize :func:`expected_complete_loglik` with a torch optimizer.

    Starts from ``params`` in the unconstrained parametrization of :func:`to_unconstrained`
    (logits, means, log-diagonal Cholesky factors of the precisions) and takes ``n_steps``
    optimizer steps on ``−Q``. ``reg_covar`` is then added to the covariances' diagonal, so that
    at the optimum the result equals :func:`m_step`'s (whose closed form is
    ``argmax Q + reg_covar I``).

    ``log_resp`` given: the classical M-step, ``r`` fixed at the E-step's values; ``"lbfgs"``
    runs up to ``n_steps`` iterations with a strong-Wolfe line search.

    ``log_resp=None``: ``r`` is recomputed from the parameters being optimized at every inner
    step and passes the block ``BLOCK``. With the block active each step follows ``∇ LL``
    (Fisher's identity): a generalized EM whose fixed points are EM's. Inside
    ``disable_blocks("em.*")`` each step follows ``∇ (LL − H(r))`` and drives the
    responsibilities toward hard assignments. Here the value of ``Q`` (always ``LL − H(r)``) is
    not the function whose gradient the blocked steps follow, so a line search on it would be
    misled: ``"lbfgs"`` then takes plain quasi-Newton steps of length ``lr`` (no line search).
    Those can overshoot from a degenerate start (covariances ``reg_covar · I`` after one-point
    seeds). ``"rprop"`` (Riedmiller & Braun 1993, https://doi.org/10.1109/ICNN.1993.298623)
    reads only the signs of the gradient and adapts one step size per parameter (here between
    1e-9 and 1), so it follows either field without function values and stays stable from such
    starts; :class:`GaussianMixture` uses it.

    Args:
        X: (n_samples, n_features).
        log_resp: (n_samples, n_components) or ``None`` (see above).
        params: starting point, :class:`GMMParams` or ``(weights, means, …, precisions_cholesky)``.
        covariance_type, reg_covar, sample_weight: as in :func:`m_step`.
        n_steps: number of optimizer steps (>= 1).
        optimizer: ``"lbfgs" | "rprop" | "adam" | "sgd"``.
        lr: learning rate (for rprop: the initial step size); default 1.0 for lbfgs, 0.01 for
            rprop, 0.05 for adam, 0.1 for sgd.

    Returns:
        :class:`GMMParams` (no autograd history).
    """
    check_params("gradient_m_step", {"covariance_type": covariance_type, "optimizer": optimizer,
                                      "n_steps": n_steps, "lr": lr}, _GRADIENT_M_STEP_CONSTRAINTS)
    if lr is None:
        lr = {"lbfgs": 1.0, "rprop": 0.01, "adam": 0.05, "sgd": 0.1}[optimizer]
    theta = to_unconstrained(params, covariance_type)
    _check_data("gradient_m_step", X, theta[1].shape[1], log_resp=log_resp,
                n_components=theta[0].shape[0], sample_weight=sample_weight,
                device=theta[0].device)

    def objective() -> torch.Tensor:
        w, mu, U = from_unconstrained(theta, covariance_type)
        return -expected_complete_loglik(X, w, mu, U, log_resp, covariance_type=covariance_type,
                                         sample_weight=sample_weight)

    with torch.enable_grad():
        if optimizer == "lbfgs":
            opt = torch.optim.LBFGS(theta, lr=lr, max_iter=n_steps, tolerance_grad=1e-12,
                                    tolerance_change=1e-15, history_size=20,
                                    line_search_fn=None if log_resp is None else "strong_wolfe")

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = objective()
                loss.backward()
                return loss

            opt.step(closure)
        else:
            if optimizer == "rprop":
                opt = torch.optim.Rprop(theta, lr=lr, step_sizes=(1e-9, 1.0))
            elif optimizer == "adam":
                opt = torch.optim.Adam(theta, lr=lr)
            else:
                opt = torch.optim.SGD(theta, lr=lr)
            for _ in range(n_steps):
                opt.zero_grad()
                objective().backward()
                opt.step()
    with torch.no_grad():
        weights, means, prec_chol = from_unconstrained(theta, covariance_type)
        cov = covariances_from_precisions_cholesky(prec_chol, covariance_type)
        if covariance_type in ("full", "tied"):
            cov = add_to_diagonal(cov, reg_covar)
        else:
            cov = cov + reg_covar
        try:
            factor = cholesky_of_precisions(cov, covariance_type)
        except ValueError as err:
            raise _covariance_error("gradient_m_step", err) from err
        return GMMParams(weights.clone(), means.clone(), cov, factor)

