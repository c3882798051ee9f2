"""The estimator's fast path: EM sufficient statistics as one feature matrix (float64)."""

from __future__ import annotations

import math

import torch

from toolkit.algorithms.em.core import _log_det_cholesky
from toolkit.algorithms.em.params import (
    GMMParams,
    _add_to_diagonal,
    _strict_upper,
    precisions_cholesky_from_covariances,
)

_LOG_2PI = math.log(2.0 * math.pi)


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

