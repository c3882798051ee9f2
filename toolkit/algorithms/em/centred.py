"""The estimator's exact path: EM iterations in centred, whitened coordinates, in float64.

Where the moment matrices of :mod:`~toolkit.algorithms.em.fast` would cancel too much, an
iteration runs here. Each chunk of rows (a few MiB, so it stays in cache) is whitened by every
component's Cholesky factor, ``y = U_kᵀ(x − μ_k)`` for all k in one GEMM, in float64 whatever
the data's dtype; the squared norms give the log-densities and their logsumexp the
responsibilities; the same ``y`` then give each component's responsibility-weighted moments in
its own whitened coordinates, which are well scaled (near convergence they are the identity),
so nothing of the size ``‖x‖²`` or ``1/λ_min`` is ever subtracted:

.. math::

    \\bar y_k = \\frac{\\sum_n w_n r_{nk} y_{nk}}{N_k}, \\quad
    \\mu_k' = \\mu_k + U_k^{-\\top} \\bar y_k, \\quad
    \\Sigma_k' = U_k^{-\\top} \\Big(\\frac{\\sum_n w_n r_{nk} y_{nk} y_{nk}^\\top}{N_k}
        - \\bar y_k \\bar y_k^\\top\\Big) U_k^{-1} + \\text{reg\\_covar}\\, I.

The one GEMM computes ``U_kᵀ(x − c) − U_kᵀ(μ_k − c)`` with ``c`` the mean of the means: in
float64 its rounding, ``~1e-16·‖x − c‖·‖U_k‖``, stays below 1e-9 even for data 1e3 apart and
condition numbers of 1e7. The price is an (k·d) × rows matrix per chunk instead of the moment
path's k × rows: about 3x scikit-learn's speed instead of 10-20x.
"""

from __future__ import annotations

import math

import torch

from toolkit.algorithms.em.chunks import map_chunks
from toolkit.algorithms.em.params import (
    GMMParams,
    add_to_diagonal,
    cholesky_of_precisions,
)

_LOG_2PI = math.log(2.0 * math.pi)
_F64 = torch.float64


class CentredEM:
    """EM iterations in whitened coordinates (see the module docstring), float64 arithmetic.

    Args:
        X: (n, d) data of any float dtype (read in chunks, converted to float64 there).
        sample_weight: (n,) weights.
        covariance_type, reg_covar: as in :class:`~toolkit.algorithms.em.GaussianMixture`.
    """

    def __init__(self, X: torch.Tensor, sample_weight: torch.Tensor, covariance_type: str,
                 reg_covar: float) -> None:
        self.XT = X.T.contiguous()  # (d, n): a chunk of columns is contiguous per feature
        self.w = sample_weight.to(_F64)
        self.uniform = bool((self.w == self.w[0]).all())
        self.covariance_type, self.reg_covar = covariance_type, reg_covar
        d = X.shape[1]
        self.chunk = max(256, (4 << 20) // (8 * d * 8))  # ~4 MiB of y for k = 8

    def step(self, params: GMMParams) -> tuple[torch.Tensor, GMMParams]:
        """One EM iteration from float64 ``params``: ``(log p(x_n) at params, new params)``."""
        ct = self.covariance_type
        weights, means, U = (t.to(_F64) for t in (params.weights, params.means,
                                                   params.precisions_cholesky))
        k, d = means.shape
        c = means.mean(0)
        mu_c = means - c
        if ct in ("full", "tied"):
            Uk = U if ct == "full" else U.expand(k, d, d)
            WT = Uk.mT.reshape(k * d, d)  # row j*d+e holds column e of U_j: y = WT (x - c) - b
            b = torch.einsum("kde,kd->ke", Uk, mu_c).reshape(k * d, 1)
            log_det = torch.log(torch.diagonal(U, dim1=-2, dim2=-1)).sum(-1)
        else:
            scale = (U if ct == "diag" else U[:, None].expand(k, d))[:, :, None]  # (k, d, 1)
            log_det = torch.log(U).sum(-1) if ct == "diag" else d * torch.log(U)
        bias = (log_det + torch.log(weights) - 0.5 * d * _LOG_2PI).expand(k)[:, None]
        n = self.XT.shape[1]
        log_prob = torch.empty(n, dtype=_F64, device=means.device)

        def chunk(start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            xt = self.XT[:, start:stop].to(_F64) - c[:, None]  # (d, m)
            m = xt.shape[1]
            if ct in ("full", "tied"):
                y = torch.addmm(b, WT, xt, beta=-1).view(k, d, m)
            else:
                y = (xt[None] - mu_c[:, :, None]) * scale
            z = y.square().sum(1).mul_(-0.5).add_(bias)  # (k, m)
            shift = z.amax(0, keepdim=True)
            resp = z.sub_(shift).exp_()
            total = resp.sum(0, keepdim=True)
            resp.div_(total)
            torch.add(total.log_(), shift, out=log_prob[start:stop].unsqueeze(0))
            if not self.uniform:
                resp.mul_(self.w[start:stop])
            ry = y * resp[:, None, :]
            return (resp.sum(1), ry.sum(2),
                    torch.bmm(ry, y.mT) if ct in ("full", "tied") else (ry * y).sum(2))

        N = torch.zeros(k, dtype=_F64, device=means.device)
        s1 = torch.zeros(k, d, dtype=_F64, device=means.device)
        S2 = torch.zeros((k, d, d) if ct in ("full", "tied") else (k, d), dtype=_F64,
                         device=means.device)
        for dN, ds1, dS2 in map_chunks(chunk, n, self.chunk, means.device):  # in chunk order
            N += dN
            s1 += ds1
            S2 += dS2
        if self.uniform:
            N, s1, S2 = N * self.w[0], s1 * self.w[0], S2 * self.w[0]
        return log_prob, self._new_params(means, U, N, s1, S2)

    def _new_params(self, means: torch.Tensor, U: torch.Tensor, N: torch.Tensor,
                    s1: torch.Tensor, S2: torch.Tensor) -> GMMParams:
        """The M-step from the whitened moments (module docstring), all (k, d)-sized."""
        ct = self.covariance_type
        k, d = means.shape
        nk = N + 10 * torch.finfo(_F64).eps  # scikit-learn's guard for an emptied component
        ybar = s1 / nk[:, None]
        if ct in ("full", "tied"):
            Uk = U if ct == "full" else U.expand(k, d, d)
            eye = torch.eye(d, dtype=_F64, device=U.device).expand(k, d, d)
            L = torch.linalg.solve_triangular(Uk, eye, upper=True).mT  # U⁻ᵀ: x − μ = L y
            new_means = means + (L @ ybar[:, :, None])[:, :, 0]
            C = S2 / nk[:, None, None] - ybar[:, :, None] * ybar[:, None, :]
            if ct == "full":
                cov = add_to_diagonal(L @ C @ L.mT, self.reg_covar)
            else:
                pooled = (nk[:, None, None] * C).sum(0) / nk.sum()
                cov = add_to_diagonal(L[0] @ pooled @ L[0].mT, self.reg_covar)
        else:
            inv = 1.0 / (U if ct == "diag" else U[:, None].expand(k, d))  # σ per feature
            new_means = means + inv * ybar
            var = (S2 / nk[:, None] - ybar.square()) * inv.square()
            cov = (var if ct == "diag" else var.mean(1)) + self.reg_covar
        return GMMParams(nk / nk.sum(), new_means, cov,
                         cholesky_of_precisions(cov, ct))
