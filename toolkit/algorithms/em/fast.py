"""The estimator's EM iterations: moment matrices where they are exact enough, centred otherwise.

:class:`MomentEM` runs one iteration as two skinny GEMMs over precomputed features of the data
(quadratic forms expanded around the data's mean) and a logsumexp over (n, k), in the data's
dtype; everything of the size of the parameters runs in float64. It is fast, but an expanded
quadratic form cancels: its terms are about ``G`` times larger than the result, with

.. math::

    G = \\max_k \\frac{\\lVert \\mu_k - c \\rVert^2 + \\operatorname{tr} \\Sigma_k}
        {\\lambda_{\\min}(\\Sigma_k)}

(``c`` the data's mean; diag: the sum over features of ``(μ_ki − c_i)²/σ²_ki + 1``), so the
E-step's log-densities are off by ``~u·G`` nats and the M-step's ``E[xxᵀ] − μμᵀ`` loses a
relative ``~u·G`` of the smallest eigenvalue (``u``: the dtype's unit roundoff). Measured
against the same iterations in float64 (n = 1e5, d = k = 8, float32 moments): bench_em's
mixture, ``u·G`` = 1.1e-4, gave log-densities within 2.4e-4 nats, lower bounds within 3.3e-8
(relative) and covariances within 4.1e-5 in whitened coordinates; a draw of issue 28's recipe,
``u·G`` = 3.7e-2, gave 1.2e-2 nats, 1.8e-6 and 2.4e-3 (before the lower bound's correction
below and float64 chunk sums: 2.2e-5 and 8.2e-3).

:class:`EMPath` therefore checks ``u·G <= MOMENT_TOL`` (2e-4 for float32 data, 1e-7 for
float64) for the parameters before and after every iteration and runs the iteration with the
first path that passes: the moments in float32 (float32 data of at least
``MIN_SAMPLES_FLOAT32`` samples), the moments in float64 (``u`` = 1.1e-16: ``G`` up to
~1e12 for float32 data, ~1e9 for float64), or the centred, Cholesky-whitened iterations of
:mod:`~toolkit.algorithms.em.centred` in float64 (no cancellation to speak of, about 3x slower
than the moments). A covariance that a moment path cannot make positive definite also moves
the iteration to the next path, so the float32 fit fails only where the float64 centred one
does. Once a run needs a slower path it stays there (parameters rarely become better
conditioned).
"""

from __future__ import annotations

import math

import torch

from toolkit.algorithms.em.centred import CentredEM
from toolkit.algorithms.em.chunks import map_chunks
from toolkit.algorithms.em.core import log_det_cholesky
from toolkit.algorithms.em.params import (
    GMMParams,
    add_to_diagonal,
    cholesky_of_precisions,
    strict_upper,
)

_LOG_2PI = math.log(2.0 * math.pi)

#: The largest ``u·G`` at which :class:`MomentEM` may run an iteration in a dtype of unit
#: roundoff ``u``, by the dtype of the data (and of the results): float32 results keep about
#: that much (their own rounding is ~1e-7), float64 results far less.
MOMENT_TOL = {torch.float32: 2e-4, torch.float64: 1e-7}
#: The float32 moments run only on at least this many (effective) samples: their per-point
#: errors (up to ~u·G) differ in sign and must average out in the lower bound (below
#: u·G/sqrt(n) <= 1.6e-6 here), and below it float64 costs little anyway.
MIN_SAMPLES_FLOAT32 = 2**14


class MomentEM:
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
        sample_weight = sample_weight.to(torch.float64)
        self.w = sample_weight
        n, d = X.shape
        self.d = d
        # the data transposed and centred, (d, n) in float64: one transposing copy
        XcT = torch.empty(d, n, dtype=torch.float64, device=X.device).copy_(X.T)
        self.center = (XcT @ sample_weight) / sample_weight.sum()
        XcT -= self.center[:, None]
        full = covariance_type in ("full", "tied")
        if full:
            self.iu = torch.triu_indices(d, d, device=X.device)
            # a_k's quadratic part: P_ii for i = j, 2 P_ij for i < j
            self.mult = torch.where(self.iu[0] == self.iu[1], 1.0, 2.0).to(torch.float64)
        self.n_quad = d * (d + 1) // 2 if full else d
        # Φ = [x'_i x'_j (i <= j, row-major) | x' | 1], stored transposed, (q + 1, n): each
        # feature is one contiguous row, written in one pass (products in float64, rounded once
        # to the data's dtype on the store). Against Φ stored (n, q + 1) (d = k = 8, n = 1e5,
        # float32): built in 7 ms instead of 28, and an iteration 0.7x as long. Row blocks of
        # Φ ran the two GEMMs at a speed that depended on the block (11,397 and 50,000 rows:
        # 1.4x slower than 8,192); column blocks of Φᵀ ran alike from 8,192 to 50,000 columns.
        self.PhiT = torch.empty(self.n_quad + d + 1, n, dtype=self.dtype, device=X.device)
        # columns per chunk of step(): the largest power of two within 4 MiB of Φ,
        # which stays in cache between the E-step product and the moment product (d = k = 8,
        # n = 1e5: 16,384 columns in float32, 8,192 in float64; 2,048-column chunks took 1.5x
        # as long, 32,768 no less)
        target = max(1024, (4 << 20) // (self.PhiT.shape[0] * self.PhiT.element_size()))
        self.chunk = 1 << (target.bit_length() - 1)

        def features(start: int, stop: int) -> None:
            x, phi = XcT[:, start:stop], self.PhiT[:, start:stop]
            if full:
                col = 0
                for i in range(d):
                    torch.mul(x[i], x[i:], out=phi[col:col + d - i])
                    col += d - i
            else:
                torch.mul(x, x, out=phi[:d])
            phi[self.n_quad:-1] = x
            phi[-1] = 1.0  # carries the bias

        map_chunks(features, n, self.chunk, X.device)
        # weights folded into the features once: R Φ_w = (w ⊙ r) Φ, last column N_k
        uniform = bool((sample_weight == sample_weight[0]).all())
        self.PhiT_w = self.PhiT if uniform else (self.PhiT.to(torch.float64)
                                                 * sample_weight).to(self.dtype)
        self.w_scale = sample_weight[0] if uniform else None

    @staticmethod
    def to_compute(params: GMMParams) -> GMMParams:
        """Parameters as the steps take and give them: float64."""
        return GMMParams(*(t.to(torch.float64) for t in params))

    def _coefficients(self, params: GMMParams) -> torch.Tensor:
        """``A`` (k, q + 1) with ``log π_k + log N(x; μ_k, Σ_k) = φ(x') · A_k``, float64."""
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
        bias = (-0.5 * (d * _LOG_2PI + (mu * Pmu).sum(1)) + log_det_cholesky(U, ct, d)
                + torch.log(weights))
        return torch.cat([-0.5 * a_quad, Pmu, bias[:, None]], dim=1)  # (k, q + 1)

    def e_step(self, params: GMMParams) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(x_n), r)``: a logsumexp that keeps its ``exp`` as the responsibilities.

        Both in the data's dtype; ``params`` in float64.
        """
        z = self._coefficients(params).to(self.dtype) @ self.PhiT  # (k, n) log-joint
        log_prob, resp = self._normalise(z)
        return log_prob, resp.T

    def _normalise(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The logsumexp over the k rows of the log-joint ``z`` (k, columns), and the
        responsibilities: its ``exp``, normalised, written over ``z`` (one buffer)."""
        shift = z.amax(0)
        resp = z.sub_(shift).clamp_min_(self.floor).exp_()
        total = resp.sum(0)
        resp.div_(total)
        return total.log_().add_(shift), resp

    def step(self, params: GMMParams) -> tuple[torch.Tensor, GMMParams]:
        """One EM iteration, ``(log p(x_n) at params, new params)``, in one pass over ``Φ``.

        The columns of ``Φᵀ`` are taken in chunks of up to 4 MiB: each chunk's log-joint (k,
        columns), its logsumexp (reduced over the k rows of a contiguous matrix) and its
        contribution ``R_c Φ_c`` to the moments are computed while the chunk is in cache, so an
        iteration reads ``Φ`` from memory once instead of twice; the chunks run on all cores
        with one hand-off per iteration (:func:`~toolkit.algorithms.em.chunks.map_chunks`), and
        their contributions are summed in chunk order, so the numbers do not depend on the
        number of threads. The numbers are those of
        :meth:`e_step` followed by :meth:`m_step` (up to the order of the sums), except that
        ``log p(x_n)`` comes in float64, all shifted by one number: the first-order effect of
        rounding ``A`` to the data's dtype on their weighted mean (the lower bound). That
        rounding moves every point's log-density in the same direction, by ``Σ_k r_nk
        φ_n·δA_k``, and its weighted mean ``Σ_k δA_k·S_k / Σ w`` comes free with the moments
        ``S``; the other rounding errors differ in sign from point to point and average out.
        """
        A64 = self._coefficients(params)
        A = A64.to(self.dtype)
        n = self.PhiT.shape[1]
        log_prob = torch.empty(n, dtype=self.dtype, device=A.device)

        def chunk(start: int, stop: int) -> torch.Tensor:
            log_prob[start:stop], resp = self._normalise(A @ self.PhiT[:, start:stop])
            return resp @ self.PhiT_w[:, start:stop].T  # (k, q + 1): the chunk's moments

        S = torch.zeros(A.shape, dtype=torch.float64, device=A.device)  # chunk sums in float64
        for part in map_chunks(chunk, n, self.chunk, A.device):  # in chunk order
            S += part
        log_prob = log_prob.to(torch.float64)
        if A.dtype != torch.float64:
            scale = 1.0 if self.w_scale is None else self.w_scale
            log_prob -= ((A.to(torch.float64) - A64) * S).sum() * scale / self.w.sum()
        return log_prob, self._from_moments(S)

    def m_step(self, resp: torch.Tensor) -> GMMParams:
        """New parameters from the responsibilities (n, k) of :meth:`e_step`."""
        return self._from_moments((self.PhiT_w @ resp).T.to(torch.float64))

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
            second = second + (second * strict_upper(second)).mT
            scatter = second - mu[:, :, None] * mu[:, None, :]
            if ct == "full":
                cov = add_to_diagonal(scatter, self.reg_covar)
            else:
                cov = add_to_diagonal((nk[:, None, None] * scatter).sum(0) / nk.sum(),
                                      self.reg_covar)
        else:
            cov = M[:, : self.n_quad] - mu.square() + self.reg_covar
            if ct == "spherical":
                cov = cov.mean(1)
        return GMMParams(nk / nk.sum(), mu + self.center, cov,
                         cholesky_of_precisions(cov, ct))


def cancellation_factor(params: GMMParams, center: torch.Tensor, covariance_type: str) -> float:
    """``G``: how much larger the moment path's terms are than its results (module docstring).

    full/tied: ``max_k (‖μ_k − c‖² + tr Σ_k) / λ_min(Σ_k)``; diag: ``max_k Σ_i ((μ_ki − c_i)²
    + σ²_ki) / σ²_ki``; spherical: ``max_k (‖μ_k − c‖² + d σ²_k) / σ²_k``. Computed in float64
    from ``params.covariances``; a covariance that is not positive definite gives ``inf``.
    """
    cov = params.covariances.to(torch.float64)
    mu2 = (params.means.to(torch.float64) - center).square()  # (k, d)
    if covariance_type in ("full", "tied"):
        lam_min = torch.linalg.eigvalsh(cov)[..., 0]
        g = (mu2.sum(1) + torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)) / lam_min
        g = torch.where(lam_min > 0, g, torch.inf)
    elif covariance_type == "diag":
        g = torch.where(cov > 0, (mu2 + cov) / cov, torch.inf).sum(1)
    else:
        g = torch.where(cov > 0, (mu2.sum(1) + mu2.shape[1] * cov) / cov, torch.inf)
    return float(g.max())


class EMPath:
    """EM iterations for the estimator, each on the first path exact enough for it.

    Paths, fastest first (see the module docstring): 0, the moments in float32 (float32 data
    of ``MIN_SAMPLES_FLOAT32`` samples or more); 1, the moments in float64; 2, the centred,
    whitened iterations of :class:`~toolkit.algorithms.em.centred.CentredEM`. Path
    ``p < 2`` runs an iteration only if ``u·G <= tol`` (``MOMENT_TOL`` of the data's dtype)
    holds for the parameters it starts from and for those it returns, and its covariances
    are positive definite; otherwise the iteration is redone on the next path, which the run
    then keeps. ``counts[p]`` is the number of iterations each path completed.

    Args:
        X: (n, d) data, float32 or float64.
        sample_weight: (n,) weights.
        covariance_type, reg_covar: as in :class:`~toolkit.algorithms.em.GaussianMixture`.
    """

    def __init__(self, X: torch.Tensor, sample_weight: torch.Tensor, covariance_type: str,
                 reg_covar: float) -> None:
        self.X, self.covariance_type, self.reg_covar = X, covariance_type, reg_covar
        self.w = sample_weight.to(torch.float64)
        self.tol = MOMENT_TOL[X.dtype]
        n_eff = float(self.w.sum() ** 2 / self.w.square().sum())  # Kish's effective size
        self.first = 0 if X.dtype == torch.float32 and n_eff >= MIN_SAMPLES_FLOAT32 else 1
        self.path = self.first
        self.counts = [0, 0, 0]
        self._moments: dict[torch.dtype, MomentEM] = {}
        self._centred: CentredEM | None = None
        self._last: tuple[GMMParams, float] | None = None  # the last result and its G
        self.center = (self.w @ X.to(torch.float64)) / self.w.sum()

    def to_compute(self, params: GMMParams) -> GMMParams:
        """A new run from ``params``: float64 parameters, and the fastest path again."""
        self.path = self.first
        return MomentEM.to_compute(params)

    def _engine(self, dtype: torch.dtype) -> MomentEM:
        if dtype not in self._moments:
            X = self.X if self.X.dtype == dtype else self.X.to(dtype)
            self._moments[dtype] = MomentEM(X, self.w, self.covariance_type, self.reg_covar)
        return self._moments[dtype]

    def _exact_enough(self, dtype: torch.dtype, params: GMMParams) -> bool:
        if self._last is not None and self._last[0] is params:
            g = self._last[1]  # checked when it was returned
        else:
            g = cancellation_factor(params, self.center, self.covariance_type)
            self._last = (params, g)
        return torch.finfo(dtype).eps / 2 * g <= self.tol

    def step(self, params: GMMParams) -> tuple[torch.Tensor, GMMParams]:
        """One EM iteration from float64 ``params``: ``(log p(x_n) at params, new params)``."""
        while self.path < 2:
            dtype = torch.float32 if self.path == 0 else torch.float64
            if self._exact_enough(dtype, params):
                try:
                    log_prob, new = self._engine(dtype).step(params)
                except ValueError:  # a covariance this path could not make positive definite
                    pass
                else:
                    if self._exact_enough(dtype, new):
                        self.counts[self.path] += 1
                        return log_prob, new
            self.path += 1
        if self._centred is None:
            self._centred = CentredEM(self.X, self.w, self.covariance_type, self.reg_covar)
        self.counts[2] += 1
        return self._centred.step(params)
