"""Mixture parameters: the container, covariance/precision conversions, and the unconstrained
parametrization used by the gradient M-step.

Shapes follow scikit-learn (see the package docstring); ``precisions_cholesky`` ``U`` is upper
triangular with ``U Uᵀ = Σ⁻¹``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from toolkit._utils.array_validation import check_tensor
from toolkit._utils.param_validation import Options, check, show_value

__all__ = [
    "COVARIANCE_TYPES",
    "CovarianceOverflowError",
    "GMMParams",
    "IllDefinedCovarianceError",
    "check_mixture",
    "cholesky_of_precisions",
    "from_unconstrained",
    "one_model",
    "precisions_cholesky_from_covariances",
    "to_unconstrained",
]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")

_PD_ADVICE = ("Fitting the mixture model failed because some components have ill-defined "
              "empirical covariance (for instance caused by singleton or collapsed samples). "
              "Try to decrease the number of components, increase reg_covar, or scale the "
              "input data.")


class IllDefinedCovarianceError(ValueError):
    """A covariance that is not positive definite (scikit-learn's "ill-defined empirical
    covariance"), which the estimator answers in terms of its ``X``."""


class CovarianceOverflowError(ValueError):
    """The empirical covariances are not finite: the data's squares overflow the dtype (the
    estimator says so in terms of its ``X``, as scikit-learn's "array must not contain infs or
    NaNs" does in its own)."""


class GMMParams(NamedTuple):
    """Mixture parameters in scikit-learn's shapes (see the module docstring)."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    precisions_cholesky: torch.Tensor


def precisions_cholesky_from_covariances(covariances: torch.Tensor, covariance_type: str
                                         ) -> torch.Tensor:
    """``U`` (upper triangular) with ``U Uᵀ = Σ⁻¹``, batched over components.

    ``Σ = L Lᵀ`` (Cholesky) and ``U = L⁻ᵀ`` by one batched triangular solve. ``covariances``:
    a floating tensor of shape (k, d, d) for ``"full"``, (d, d) for ``"tied"``, (k, d) for
    ``"diag"`` and (k,) for ``"spherical"``; one that is not positive definite (or not finite)
    is a ``ValueError`` naming the function, with scikit-learn's advice.
    """
    where = "precisions_cholesky_from_covariances"
    check(where, "covariance_type", covariance_type, [Options(*COVARIANCE_TYPES)])
    check_tensor(where, "covariances", covariances)
    if covariances.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{where}: covariances must be float32 or float64 (torch.linalg has no "
                        f"Cholesky factorization in {covariances.dtype}), got "
                        f"{covariances.dtype}; pass covariances.double()")
    ndim = {"full": 3, "tied": 2, "diag": 2, "spherical": 1}[covariance_type]
    square = covariance_type in ("full", "tied")
    if covariances.ndim != ndim or (square and covariances.shape[-1] != covariances.shape[-2]):
        form = {"full": "(k, d, d)", "tied": "(d, d)", "diag": "(k, d)", "spherical": "(k,)"}
        raise ValueError(f"{where}: covariances must have shape {form[covariance_type]} for "
                         f"covariance_type={covariance_type!r}, got {tuple(covariances.shape)}")
    try:
        return cholesky_of_precisions(covariances, covariance_type)
    except ValueError as err:
        raise ValueError(f"{where}: covariances must be positive definite and finite: {err}"
                         ) from err


def cholesky_of_precisions(covariances: torch.Tensor, covariance_type: str) -> torch.Tensor:
    """:func:`precisions_cholesky_from_covariances` without the argument checks, for the
    package's own callers (the M-steps and starts, whose covariances are of their making).

    A covariance that is not positive definite raises ``ValueError`` with scikit-learn's
    advice; one that is not finite (the data's squares overflowed) raises
    :class:`CovarianceOverflowError`.
    """
    if not bool(torch.isfinite(covariances).all()):
        raise CovarianceOverflowError(
            f"Fitting the mixture model failed because the empirical covariances are not finite: "
            f"the squared deviations of the data overflow {covariances.dtype}; scale the input "
            f"data (e.g. sklearn.preprocessing.MaxAbsScaler)")
    if covariance_type in ("full", "tied"):
        L, info = torch.linalg.cholesky_ex(covariances)
        if (info != 0).any():
            msg = _PD_ADVICE
            if covariances.dtype == torch.float32:
                msg += (" The numerical accuracy can also be improved by passing float64 data "
                        "instead of float32.")
            raise IllDefinedCovarianceError(msg)
        eye = torch.eye(covariances.shape[-1], dtype=covariances.dtype,
                        device=covariances.device).expand_as(covariances)
        return torch.linalg.solve_triangular(L, eye, upper=False).mT.contiguous()
    if (covariances <= 0).any():
        raise IllDefinedCovarianceError(_PD_ADVICE)
    return torch.rsqrt(covariances)


def check_mixture(where: str, weights: Any, means: Any, precisions_cholesky: Any,
                  covariance_type: Any, *, arg: str | None = None) -> tuple[int, int]:
    """Mixture parameters of one model: floating tensors on one device, weights (k,), means
    (k, d) and the precisions' factor in ``covariance_type``'s shape; returns ``(k, d)``.

    Errors name ``where`` and each argument (``params.weights`` … when ``arg`` is given).
    """
    check(where, "covariance_type", covariance_type, [Options(*COVARIANCE_TYPES)])
    name = (lambda n: f"{arg}.{n}") if arg else (lambda n: n)
    check_tensor(where, name("weights"), weights, ndim=1, allow_meta=True)
    check_tensor(where, name("means"), means, ndim=2, like=weights)
    check_tensor(where, name("precisions_cholesky"), precisions_cholesky, like=weights)
    k, d = means.shape
    shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}
    if weights.shape != (k,) or precisions_cholesky.shape != shape[covariance_type]:
        raise ValueError(f"{where}: {name('weights')}, {name('means')} and "
                         f"{name('precisions_cholesky')} must have shapes ({k},), ({k}, {d}) "
                         f"and {shape[covariance_type]} for covariance_type="
                         f"{covariance_type!r}, got {tuple(weights.shape)}, {tuple(means.shape)}"
                         f" and {tuple(precisions_cholesky.shape)}")
    return k, d


def one_model(params: GMMParams, dtype: torch.dtype, covariance_type: str) -> GMMParams:
    """``params`` in ``dtype`` as one mixture: the covariances (which define the model) rounded
    once, and the precisions' Cholesky factor computed in float64 from those rounded
    covariances, then rounded. Rounding each float64 result on its own would store a factor
    of the unrounded covariances: a second model, up to ~6e-8·κ away on ill-conditioned ones.

    >>> import torch
    >>> cov = torch.tensor([[[1.0, 0.999999], [0.999999, 1.0]]], dtype=torch.float64)
    >>> p = GMMParams(torch.ones(1, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64),
    ...               cov, precisions_cholesky_from_covariances(cov, "full"))
    >>> q = one_model(p, torch.float32, "full")
    >>> exact = precisions_cholesky_from_covariances(q.covariances.double(), "full")
    >>> bool(((q.precisions_cholesky.double() - exact).abs() <= 1e-7 * exact.abs().max()).all())
    True
    """
    if dtype == params.covariances.dtype == params.precisions_cholesky.dtype:
        return params
    covariances = params.covariances.to(dtype)
    factor = cholesky_of_precisions(covariances.to(torch.float64), covariance_type)
    return GMMParams(params.weights.to(dtype), params.means.to(dtype), covariances,
                     factor.to(dtype))


def precisions_cholesky_from_precisions(precisions: torch.Tensor, covariance_type: str
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


def covariances_from_precisions_cholesky(prec_chol: torch.Tensor, covariance_type: str
                                         ) -> torch.Tensor:
    """``Σ = (U Uᵀ)⁻¹ = U⁻ᵀ U⁻¹``."""
    if covariance_type in ("full", "tied"):
        eye = torch.eye(prec_chol.shape[-1], dtype=prec_chol.dtype,
                        device=prec_chol.device).expand_as(prec_chol)
        U_inv = torch.linalg.solve_triangular(prec_chol, eye, upper=True)
        return U_inv.mT @ U_inv
    return 1.0 / prec_chol.square()


def add_to_diagonal(cov: torch.Tensor, value: float) -> torch.Tensor:
    """``cov + value·I`` (batched over leading dimensions): the ``reg_covar`` of an M-step."""
    return cov + value * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)


def strict_upper(like: torch.Tensor) -> torch.Tensor:
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
    where = "to_unconstrained"
    if not isinstance(params, (tuple, list)) or len(params) not in (3, 4):
        raise TypeError(f"{where}: params must be a GMMParams or a sequence (weights, means, "
                        f"[covariances,] precisions_cholesky) of tensors, got "
                        f"{show_value(params)}")
    weights, means, prec_chol = params[0], params[1], params[-1]
    check_mixture(where, weights, means, prec_chol, covariance_type, arg="params")
    with torch.no_grad():
        logits = torch.log(weights).clone()
        mu = means.clone()
        if covariance_type in ("full", "tied"):
            diag = torch.diagonal(prec_chol, dim1=-2, dim2=-1)
            raw = prec_chol * strict_upper(prec_chol) + torch.diag_embed(torch.log(diag))
        else:
            raw = torch.log(prec_chol).clone()
    return [t.contiguous().requires_grad_(True) for t in (logits, mu, raw)]


def from_unconstrained(theta: Sequence[torch.Tensor], covariance_type: str = "full"
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`to_unconstrained`: ``(weights, means, precisions_cholesky)``."""
    where = "from_unconstrained"
    check(where, "covariance_type", covariance_type, [Options(*COVARIANCE_TYPES)])
    if not isinstance(theta, (tuple, list)) or len(theta) != 3:
        raise TypeError(f"{where}: theta must be the sequence [logits, means, raw] of tensors "
                        f"that to_unconstrained returns, got {show_value(theta)}")
    logits, means, raw = theta
    for name, t in (("theta[0]", logits), ("theta[1]", means), ("theta[2]", raw)):
        check_tensor(where, name, t, like=None if name == "theta[0]" else logits)
    k = logits.shape[0] if logits.ndim == 1 else -1
    shape = {"full": (k, means.shape[-1], means.shape[-1]), "tied": (means.shape[-1],) * 2,
             "diag": (k, means.shape[-1]), "spherical": (k,)}[covariance_type]
    if logits.ndim != 1 or means.ndim != 2 or means.shape[0] != k or raw.shape != shape:
        raise ValueError(f"{where}: theta must hold logits (k,), means (k, d) and the raw "
                         f"factor {shape} for covariance_type={covariance_type!r}, got "
                         f"{tuple(logits.shape)}, {tuple(means.shape)}, {tuple(raw.shape)}")
    weights = torch.softmax(logits, dim=0)
    if covariance_type in ("full", "tied"):
        diag = torch.diagonal(raw, dim1=-2, dim2=-1)
        prec_chol = raw * strict_upper(raw) + torch.diag_embed(torch.exp(diag))
    else:
        prec_chol = torch.exp(raw)
    return weights, means, prec_chol

