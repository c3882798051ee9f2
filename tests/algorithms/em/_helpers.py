"""Shared helpers of the EM tests: random parameters and explicit initial values."""

from __future__ import annotations

import numpy as np
import torch

from toolkit.algorithms.em import GMMParams, precisions_cholesky_from_covariances

F64 = torch.float64


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


def _grads(fn, theta: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(fn(), theta)])
