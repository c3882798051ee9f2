"""The scikit-learn-style estimator :class:`GaussianMixture`."""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from sklearn.exceptions import ConvergenceWarning

from toolkit._validation import (
    Bool,
    Integer,
    Options,
    Real,
    as_tensor,
    check,
    check_dtype,
    check_params,
    resolve_device,
    resolve_generator,
)
from toolkit.algorithms.em.core import BLOCK, _log_joint, e_step, gradient_m_step, m_step
from toolkit.algorithms.em.fast import _MomentEM
from toolkit.algorithms.em.initialization import initial_responsibilities
from toolkit.algorithms.em.params import (
    COVARIANCE_TYPES,
    GMMParams,
    _covariances_from_precisions_cholesky,
    _precisions_cholesky_from_precisions,
    precisions_cholesky_from_covariances,
)
from toolkit.core.stop_gradient import require_block

__all__ = ["GaussianMixture"]

INITS = ("kmeans++", "kmeans", "random", "random_from_data")
M_STEPS = ("closed_form", "gradient")


_CONSTRAINTS = {
    "n_components": [Integer(1)],
    "covariance_type": [Options(*COVARIANCE_TYPES)],
    "init": [Options(*INITS)],
    "n_init": [Integer(1)],
    "max_iter": [Integer(0)],
    "tol": [Real(0)],
    "reg_covar": [Real(0)],
    "m_step": [Options(*M_STEPS)],
    "warm_start": [Bool],
}


def _check_X(where: str, X: Any, *, device: torch.device, dtype: torch.dtype,
             n_features: int | None = None) -> torch.Tensor:
    """(n_samples, n_features) finite data as a tensor in ``dtype`` on ``device``."""
    X = as_tensor(X, where=where, arg="X", dtype=dtype, device=device, ndim=2, finite=True,
                  min_rows=1)
    if X.shape[1] == 0:
        raise ValueError(f"{where}: X must have at least one feature, got shape "
                         f"{tuple(X.shape)}")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{where}: X has {X.shape[1]} features, but the mixture was fitted "
                         f"with {n_features}")
    return X


def _check_sample_weight(where: str, sample_weight: Any, n_samples: int, *,
                         like: torch.Tensor) -> torch.Tensor:
    """Non-negative finite (n_samples,) weights with a positive sum; ``None``: all ones."""
    if sample_weight is None:
        return torch.ones(n_samples, dtype=like.dtype, device=like.device)
    w = as_tensor(sample_weight, where=where, arg="sample_weight", dtype=like.dtype,
                  device=like.device, finite=True)
    if w.shape != (n_samples,):
        raise ValueError(f"{where}: sample_weight must have shape ({n_samples},), "
                         f"got {tuple(w.shape)}")
    if (w < 0).any():
        raise ValueError(f"{where}: sample_weight must be >= 0, got min "
                         f"{w.min().item():.6g}")
    if not w.sum() > 0:
        raise ValueError(f"{where}: sample_weight must have a positive sum, got all zeros")
    return w


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
        m_step: ``"closed_form"`` (:func:`m_step`) or ``"gradient"``: each M-step is
            :func:`gradient_m_step` with ``log_resp=None`` (100 Rprop steps), i.e. the
            responsibilities are recomputed from the parameters being optimized at every inner
            step and pass the block ``BLOCK``. With the block active every inner step follows
            ``∇ LL`` (Fisher's identity): a generalized EM whose fixed points are EM's; from
            the same start it reaches the closed-form fit's optimum (or, from a poor start, a
            better one, since it climbs LL directly). Inside ``disable_blocks("em.*")`` every
            inner step follows ``∇ (LL − H(r))``: the fit ends elsewhere, with lower
            log-likelihood and harder (lower-entropy) responsibilities. The closed-form M-step
            *is* the blocked maximizer and has no unblocked form, so ``fit`` raises
            :class:`~toolkit.BlockNotSwitchableError` for it inside ``disable_blocks`` (with
            ``max_iter=0`` no M-step runs and nothing is raised).
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

    def _check_parameters(self) -> tuple[torch.device, torch.dtype]:
        """Check the constructor's arguments; returns the resolved ``(device, dtype)``."""
        where = "GaussianMixture"
        check_params(where, vars(self), _CONSTRAINTS)
        return (resolve_device(self.device, where=where),
                check_dtype(where, self.dtype))

    def _checked_inits(self, n_features: int, device: torch.device, dtype: torch.dtype
                       ) -> tuple[Any, Any, Any]:
        where = "GaussianMixture.fit"
        k, d, ct = self.n_components, n_features, self.covariance_type
        kw = {"where": where, "device": device, "dtype": dtype, "finite": True}
        weights = means = precisions = None
        if self.weights_init is not None:
            weights = as_tensor(self.weights_init, arg="weights_init", **kw)
            if weights.shape != (k,):
                raise ValueError(f"{where}: weights_init must have shape ({k},), "
                                 f"got {tuple(weights.shape)}")
            if (weights < 0).any() or (weights > 1).any():
                raise ValueError(f"{where}: weights_init must be in [0, 1], got "
                                 f"{weights.tolist()}")
            atol = 1e-6 if dtype == torch.float32 else 1e-8
            if abs(weights.sum().item() - 1.0) > atol:
                raise ValueError(f"{where}: weights_init must sum to 1, got "
                                 f"{weights.sum().item():.10g}")
        if self.means_init is not None:
            means = as_tensor(self.means_init, arg="means_init", **kw)
            if means.shape != (k, d):
                raise ValueError(f"{where}: means_init must have shape ({k}, {d}), "
                                 f"got {tuple(means.shape)}")
        if self.precisions_init is not None:
            precisions = as_tensor(self.precisions_init, arg="precisions_init", **kw)
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

    def _initialize(self, X: torch.Tensor, w: torch.Tensor, g: torch.Generator,
                    inits: tuple[Any, Any, Any]) -> GMMParams:
        weights_init, means_init, precisions_init = inits
        ct = self.covariance_type
        weights = means = cov = None
        if weights_init is None or means_init is None or precisions_init is None:
            resp = initial_responsibilities(X, self.n_components, self.init, w, g)
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
        # r recomputed from the parameters being optimized, through the block (see the class doc)
        return gradient_m_step(X, None, params, covariance_type=self.covariance_type,
                               reg_covar=self.reg_covar, sample_weight=w, optimizer="rprop")

    def fit(self, X: Any, sample_weight: Any = None) -> GaussianMixture:
        """Fit by EM (``n_init`` starts, keep the best lower bound); returns ``self``.

        Args:
            X: (n_samples, n_features) array or tensor; finite values.
            sample_weight: optional (n_samples,) non-negative weights; an integer weight acts
                exactly like repeating the row that many times.
        """
        device, dtype = self._check_parameters()
        where = "GaussianMixture.fit"
        X = _check_X(where, X, device=device, dtype=dtype)
        n, d = X.shape
        if n < self.n_components:
            raise ValueError(f"{where}: X must have n_samples >= n_components, got "
                             f"n_samples={n} < n_components={self.n_components}")
        if n < 2:
            raise ValueError(f"{where}: X must have at least 2 samples, got {n}")
        w = _check_sample_weight(where, sample_weight, n, like=X)
        inits = self._checked_inits(d, device, dtype)
        g = resolve_generator(self.random_state, where=where)

        do_init = not (self.warm_start and hasattr(self, "converged_"))
        n_init = self.n_init if do_init else 1
        w_total = w.sum()
        if self.m_step == "closed_form" and self.max_iter > 0:
            require_block(BLOCK, where=where, why="the closed-form M-step is the maximizer of Q "
                          "with the responsibilities held constant; use m_step='gradient' to fit "
                          "without the block")
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
        check("GaussianMixture.sample", "n_samples", n_samples, [Integer(1)])
        g = resolve_generator(self.random_state, where="GaussianMixture.sample")
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
