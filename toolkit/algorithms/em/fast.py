"""The estimator's fast path: EM sufficient statistics as one feature matrix.

The data-sized work (two skinny GEMMs and a logsumexp over (n, k) per iteration) runs in the
data's dtype; everything of the size of the parameters (moments, covariances, Cholesky factors)
runs in float64. For float32 data this halves the memory traffic that bounds an iteration while
the parameters keep float64's accuracy.
"""

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
    is formed. Centering on ``c`` keeps the cancellation in ``E[x xᵀ] − μ μᵀ`` small.

    Precision: ``Φ`` is built in float64 and stored in the data's dtype (float32 or float64);
    the parameters passed to and returned by the steps are float64 (:meth:`to_compute` converts
    a start), and the moments ``Rᵀ Φ`` are converted to float64 before any subtraction.
    """

    def __init__(self, X: torch.Tensor, sample_weight: torch.Tensor, covariance_type: str,
                 reg_covar: float) -> None:
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.dtype = X.dtype  # of the data-sized arrays
        # exp of arguments below this would be subnormal: a slow path of the CPU (10x for
        # float32) for terms that add less than 1e-37 relative to the sum (which is >= 1)
        self.floor = math.log(torch.finfo(self.dtype).tiny) + 1.0
        X64 = X.to(torch.float64)
        sample_weight = sample_weight.to(torch.float64)
        self.w = sample_weight
        d = X.shape[1]
        self.d = d
        self.center = (sample_weight @ X64) / sample_weight.sum()
        Xc = X64 - self.center
        n = X.shape[0]
        full = covariance_type in ("full", "tied")
        if full:
            self.iu = torch.triu_indices(d, d, device=X.device)
            # a_k's quadratic part: P_ii for i = j, 2 P_ij for i < j
            self.mult = torch.where(self.iu[0] == self.iu[1], 1.0, 2.0).to(torch.float64)
        self.n_quad = d * (d + 1) // 2 if full else d
        # Φ = [x'_i x'_j (i <= j, row-major) | x' | 1], written column block by column block
        # into one buffer of the data's dtype (products in float64)
        self.Phi = torch.empty(n, self.n_quad + d + 1, dtype=self.dtype, device=X.device)
        if full:
            col = 0
            for i in range(d):
                self.Phi[:, col:col + d - i] = Xc[:, i:i + 1] * Xc[:, i:]
                col += d - i
        else:
            self.Phi[:, :d] = Xc.square()
        self.Phi[:, self.n_quad:-1] = Xc
        self.Phi[:, -1] = 1.0  # carries the bias
        # weights folded into the features once: R^T Φ_w = (w ⊙ r)^T Φ, last column N_k
        uniform = bool((sample_weight == sample_weight[0]).all())
        self.Phi_w = self.Phi if uniform else (self.Phi.to(torch.float64)
                                               * sample_weight[:, None]).to(self.dtype)
        self.w_scale = sample_weight[0] if uniform else None
        # rows per chunk of step(): about 2 MiB of Φ, which stays in cache between the E-step
        # product and the moment product
        self.chunk = max(1024, (2 << 20) // (self.Phi.shape[1] * self.Phi.element_size()))

    @staticmethod
    def to_compute(params: GMMParams) -> GMMParams:
        """Parameters as the steps take and give them: float64."""
        return GMMParams(*(t.to(torch.float64) for t in params))

    def log_joint(self, params: GMMParams) -> torch.Tensor:
        """``log π_k + log N(x_n; μ_k, Σ_k)`` as an (n, k) matrix in the data's dtype."""
        return self.Phi @ self._coefficients(params).T

    def _coefficients(self, params: GMMParams) -> torch.Tensor:
        """``A`` (k, q + 1) with ``log π_k + log N(x; μ_k, Σ_k) = φ(x') · A_k``, data dtype."""
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
        return A.to(self.dtype)

    def e_step(self, params: GMMParams) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(x_n), r)``: a logsumexp that keeps its ``exp`` as the responsibilities.

        Both in the data's dtype; ``params`` in float64.
        """
        z = self.log_joint(params)
        shift = z.amax(1, keepdim=True)
        resp = z.sub_(shift).clamp_min_(self.floor).exp_()  # in place: one (n, k) buffer
        total = resp.sum(1, keepdim=True)
        resp.div_(total)
        return (total.log_().add_(shift))[:, 0], resp

    def step(self, params: GMMParams) -> tuple[torch.Tensor, GMMParams]:
        """One EM iteration, ``(log p(x_n) at params, new params)``, in one pass over ``Φ``.

        The rows are taken in chunks of about 2 MiB of ``Φ``: each chunk's log-joint (k, rows), its
        logsumexp (reduced over the k rows of a contiguous matrix) and its contribution
        ``R_cᵀ Φ_c`` to the moments are computed while the chunk is in cache, so an iteration
        reads ``Φ`` from memory once instead of twice. The numbers are those of
        :meth:`e_step` followed by :meth:`m_step` (up to the order of the sums).
        """
        A = self._coefficients(params)
        n = self.Phi.shape[0]
        S = torch.zeros(A.shape, dtype=self.dtype, device=A.device)
        log_prob = torch.empty(n, dtype=self.dtype, device=A.device)
        for start in range(0, n, self.chunk):
            rows = slice(start, start + self.chunk)
            z = A @ self.Phi[rows].T  # (k, rows)
            shift = z.amax(0, keepdim=True)
            resp = z.sub_(shift).clamp_min_(self.floor).exp_()
            total = resp.sum(0, keepdim=True)
            resp.div_(total)
            torch.add(total.log_(), shift, out=log_prob[rows].unsqueeze(0))
            S.addmm_(resp, self.Phi_w[rows])
        return log_prob, self._from_moments(S.to(torch.float64))

    def m_step(self, resp: torch.Tensor) -> GMMParams:
        """New parameters from the responsibilities (n, k) of :meth:`e_step`."""
        return self._from_moments((resp.T @ self.Phi_w).to(torch.float64))

    def _from_moments(self, S: torch.Tensor) -> GMMParams:
        """Parameters (float64) from the moments ``S = Rᵀ Φ_w`` (k, q + 1), float64."""
        ct, d = self.covariance_type, self.d
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

