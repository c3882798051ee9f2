"""The scikit-learn estimator :class:`GaussianMixture`."""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.validation import validate_data

from toolkit._utils.array_validation import as_tensor, resolve_device
from toolkit._utils.caller import user_stacklevel
from toolkit._utils.memory import allocation_errors, reports_allocation_failures
from toolkit._utils.param_validation import (
    Bool,
    Generator,
    Instance,
    Integer,
    Options,
    Real,
    check,
    check_params,
    is_int,
)
from toolkit.algorithms.em.chunks import chunked_threads
from toolkit.algorithms.em.core import BLOCK, e_step, gradient_m_step, m_step, weighted_log_prob
from toolkit.algorithms.em.fast import EMPath
from toolkit.algorithms.em.initialization import (
    INIT_PARAMS,
    initial_parameters,
    parameters_from_responsibilities,
)
from toolkit.algorithms.em.inputs import (
    check_inits,
    check_sample_weight,
    check_X,
    numpy_random_state,
    resolve_dtype,
    to_output,
)
from toolkit.algorithms.em.params import (
    COVARIANCE_TYPES,
    CovarianceOverflowError,
    GMMParams,
    IllDefinedCovarianceError,
    one_model,
)
from toolkit.core.stop_gradient import require_block

__all__ = ["GaussianMixture"]


M_STEPS = ("closed_form", "gradient")

_CONSTRAINTS = {
    "n_components": [Integer(1)],
    "covariance_type": [Options(*COVARIANCE_TYPES)],
    "tol": [Real(0)],
    "reg_covar": [Real(0)],
    "max_iter": [Integer(0)],
    "n_init": [Integer(1)],
    "init_params": [Options(*INIT_PARAMS)],
    "random_state": [None, Integer(0, 2**32 - 1),
                     Instance(np.random.RandomState, np.random.Generator,
                              name="a numpy RandomState or Generator"), Generator],
    "warm_start": [Bool],
    "verbose": [Integer(0), Bool],
    "verbose_interval": [Integer(1)],
    "m_step": [Options(*M_STEPS)],
    "dtype": [None, Options("float32", "float64", torch.float32, torch.float64)],
}

#: The parameters that size the memory a call needs (named when an allocation fails).
_SIZES = ("n_components", "covariance_type")


def _warn_undefined_rows(where: str, log_values: torch.Tensor, X: torch.Tensor, *,
                         labels: bool = False) -> None:
    """A ``RuntimeWarning`` when rows of ``log_values`` (n_samples, n_components) are NaN, or
    ``-inf`` in every component: those rows have no defined responsibilities (and ``argmax``
    picks an arbitrary component for them)."""
    if log_values.numel() == 0:
        return
    bad = log_values.isnan().any(1) | (log_values == -math.inf).all(1)
    count = int(bad.sum())
    if not count:
        return
    first = int(bad.nonzero()[0, 0])
    top = float(X[first].abs().max())
    what = "labels are arbitrary" if labels else "probabilities are NaN"
    warnings.warn(f"{where}: {count} of {len(bad)} rows of X have no defined responsibilities "
                  f"(their {what}): their log-densities are -inf or NaN under every component "
                  f"(e.g. row {first}, with values up to {top:.3g}: squared distances to the "
                  f"means overflow {X.dtype}); scale X as the data the model was fitted on",
                  RuntimeWarning, stacklevel=user_stacklevel())


class _Progress:
    """scikit-learn's verbose messages (``verbose`` 1: iterations, 2: times and changes)."""

    def __init__(self, verbose: int, interval: int) -> None:
        self.verbose, self.interval = int(verbose), interval
        self.t_init = self.t_iter = time.time()

    def begin(self, init: int) -> None:
        if self.verbose >= 1:
            print(f"Initialization {init}")
            self.t_init = self.t_iter = time.time()

    def iteration(self, n_iter: int, change: float) -> None:
        if self.verbose >= 1 and n_iter % self.interval == 0:
            now = time.time()
            print(f"  Iteration {n_iter}" if self.verbose == 1 else
                  f"  Iteration {n_iter}\t time lapse {now - self.t_iter:.5f}s\t "
                  f"ll change {change:.5f}")
            self.t_iter = now

    def end(self, lower_bound: float, converged: bool) -> None:
        msg = "converged" if converged else "did not converge"
        if self.verbose == 1:
            print(f"Initialization {msg}.")
        elif self.verbose >= 2:
            print(f"Initialization {msg}. time lapse {time.time() - self.t_init:.5f}s\t "
                  f"lower bound {lower_bound:.5f}.")


class GaussianMixture(DensityMixin, BaseEstimator):
    """Gaussian mixture fitted by EM: scikit-learn's estimator, in torch, around one block.

    The parameters, their defaults, the initializations, the stopping rule and the fitted
    attributes are scikit-learn's (:class:`sklearn.mixture.GaussianMixture`): with the same
    ``random_state`` both draw the same start and follow the same EM trajectory (to about
    1e-13). One iteration is one E-step and one M-step; the lower bound of an iteration is the
    (weighted) mean log-likelihood from its E-step, and the fit stops when it changes by less
    than ``tol``. The computation runs in torch on ``device`` in ``dtype``, vectorized over
    components; :func:`sklearn.base.clone`, pipelines and grid searches work as usual.

    Type in, type out: numpy arrays, array-likes and pandas frames give numpy results, torch
    tensors give tensors on the input's device. The fitted attributes follow the data given to
    ``fit``: numpy arrays after numpy / array-like / pandas data, tensors on that tensor's
    device after a tensor (``sample`` returns the same kind).

    Args:
        n_components: number of mixture components.
        covariance_type: ``"full" | "tied" | "diag" | "spherical"``.
        tol: convergence threshold on the change of the lower bound.
        reg_covar: added to the diagonal of every covariance (keeps them positive definite).
        max_iter: EM iterations per initialization (0: keep the initial parameters).
        n_init: number of initializations; the best lower bound wins.
        init_params: ``"kmeans"`` (labels of :class:`sklearn.cluster.KMeans`),
            ``"k-means++"`` (one-hot rows at k-means++ seeds), ``"random"`` (uniform random
            responsibilities) or ``"random_from_data"`` (``k`` distinct data points). As in
            scikit-learn the initial parameters are one M-step from these responsibilities
            (see :func:`~toolkit.algorithms.em.initialization.initial_responsibilities`).
            The one-point seeds of ``"k-means++"`` and ``"random_from_data"`` start from
            covariances ``reg_covar · I``; there scikit-learn's expanded squares lose digits
            and its tied estimate assumes rows summing to one, so fits from those starts can
            part from scikit-learn's (ours keep the exact scatter).
        weights_init, means_init, precisions_init: initial parameters in scikit-learn's shapes
            (precisions: full (k, d, d), tied (d, d), diag (k, d), spherical (k,)). When all
            three are given the initialization is fully determined by them.
        random_state: ``None``, an int seed or a numpy ``RandomState`` (scikit-learn's
            meanings); a numpy ``Generator`` or a ``torch.Generator`` seeds a ``RandomState``.
        warm_start: if fitted already, continue from the current parameters (``n_init`` ignored).
        verbose, verbose_interval: scikit-learn's progress messages (1: iterations, 2: also
            times and lower-bound changes), every ``verbose_interval`` iterations.
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
        device: where to compute (``"cpu"``, ``"cuda"``, ``None``/``"auto"``: CUDA if
            available); the results still go back to the input's kind and device.
        dtype: ``None`` (float32 data stay float32, anything else becomes float64, as in
            scikit-learn), ``"float32"``/``"float64"`` or the torch dtypes. float32 keeps the
            data, the results and the fit's data-sized work in float32 where that is exact
            enough; for every covariance type, condition numbers up to 1e7 and data up to 1e3
            from the origin, ``score_samples`` stays within 1e-4 nats (plus float32's rounding
            of the result, 6e-8·|log p|) and ``lower_bound_`` within 1e-5·max(1, |bound|)
            of scikit-learn's float64 on the same parameters. How: evaluation in centred,
            Cholesky-whitened coordinates computed in float64 (:func:`e_step`); the fit's
            iterations in float32 only on 2**14 samples or more and while the cancellation
            of its moment matrices, estimated from the parameters, stays below 2e-4, else in
            float64 (:mod:`toolkit.algorithms.em.fast`). The float32 attributes describe one
            mixture: ``covariances_`` (with ``weights_`` and ``means_``) defines the model,
            rounded once from the float64 fit; ``precisions_cholesky_`` (what the evaluation
            uses) and ``precisions_`` are computed in float64 from those stored covariances,
            then rounded, so the stored factor is the Cholesky factor of the stored
            covariances' inverse to float32's rounding.

    Attributes:
        weights_ (k,), means_ (k, d), covariances_, precisions_, precisions_cholesky_:
            the fitted parameters (shapes: see :mod:`toolkit.algorithms.em`).
        converged_, n_iter_, lower_bound_, lower_bounds_: as in scikit-learn.
        n_features_in_, feature_names_in_ (after a pandas frame with string column names).

    >>> from sklearn.datasets import load_iris
    >>> gm = GaussianMixture(3, random_state=0).fit(load_iris().data)
    >>> round(gm.lower_bound_, 3), type(gm.means_).__name__, gm.means_.shape
    (-1.201, 'ndarray', (3, 4))

    References: scikit-learn's ``GaussianMixture``,
    https://scikit-learn.org/stable/modules/generated/sklearn.mixture.GaussianMixture.html
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "full",
                 tol: float = 1e-3, reg_covar: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, init_params: str = "kmeans", weights_init: Any = None,
                 means_init: Any = None, precisions_init: Any = None,
                 random_state: Any = None, warm_start: bool = False, verbose: int = 0,
                 verbose_interval: int = 10, m_step: str = "closed_form",
                 device: torch.device | str | None = "cpu",
                 dtype: str | torch.dtype | None = None) -> None:
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval
        self.m_step = m_step
        self.device = device
        self.dtype = dtype

    # ---- fitting ---------------------------------------------------------------------------

    def _m_step(self, X: torch.Tensor, log_resp: torch.Tensor, w: torch.Tensor | None,
                params: GMMParams) -> GMMParams:
        if self.m_step == "closed_form":
            return m_step(X, log_resp, covariance_type=self.covariance_type,
                          reg_covar=self.reg_covar, sample_weight=w)
        # r recomputed from the parameters being optimized, through the block (see the class doc)
        return gradient_m_step(X, None, params, covariance_type=self.covariance_type,
                               reg_covar=self.reg_covar, sample_weight=w, optimizer="rprop")

    @reports_allocation_failures("GaussianMixture.fit", *_SIZES)
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> GaussianMixture:
        """Fit by EM (``n_init`` starts, keep the best lower bound); returns ``self``.

        Args:
            X: (n_samples, n_features) array-like, pandas frame or tensor; finite values.
            y: ignored (scikit-learn's convention).
            sample_weight: optional (n_samples,) non-negative weights (a toolkit extension).
                Integer weights are that many copies of the row, the drawn start included:
                the start (``init_params``) is drawn for the rows repeated in place (``np.repeat``
                order; see ``initialization.initial_responsibilities`` for the bound on the
                copies), and every EM step (E-step, M-step, lower bound,
                convergence test) weighs the rows, so the same ``random_state`` fits the
                weighted rows as it fits the repeated ones. The draws follow the rows' order,
                as scikit-learn's do: weighted rows in another order may start, and then
                converge, differently, so scikit-learn's
                ``check_sample_weight_equivalence_on_dense_data`` (which shuffles them) holds
                when the start is given or ``n_components=1``.
        """
        where = "GaussianMixture.fit"
        check_params("GaussianMixture", self.get_params(deep=False), _CONSTRAINTS)
        device = resolve_device(self.device, where="GaussianMixture")
        # the closed-form fit: one intra-op thread for the checks and everything between the
        # passes over the data; the passes run on all threads (toolkit.algorithms.em.chunks)
        with (chunked_threads(torch.device(device)) if self.m_step == "closed_form"
              else contextlib.nullcontext()):
            return self._fit(where, X, sample_weight, device)

    def _fit(self, where: str, X: Any, sample_weight: Any, device: torch.device | str
             ) -> GaussianMixture:
        """:meth:`fit` after the parameter checks."""
        Xt = check_X(where, X, device=device, dtype=resolve_dtype(self.dtype, X), min_samples=2)
        if (self.warm_start and hasattr(self, "converged_")
                and Xt.shape[1] != self.n_features_in_):  # continuing needs the same features
            raise ValueError(f"{where}: X has {Xt.shape[1]} features, but GaussianMixture is "
                             f"expecting {self.n_features_in_} features as input: warm_start="
                             f"True continues the previous fit (n_features_in_="
                             f"{self.n_features_in_}); set warm_start=False to fit afresh")
        validate_data(self, X, reset=True, skip_check_array=True)  # n_features_in_, names
        n, d = Xt.shape
        if n < self.n_components:
            raise ValueError(f"{where}: X must have n_samples >= n_components, got "
                             f"n_samples={n} < n_components={self.n_components}")
        w = check_sample_weight(where, sample_weight, n, self.n_components, like=Xt)
        inits = check_inits(where, self.weights_init, self.means_init, self.precisions_init,
                            n_components=self.n_components, n_features=d,
                            covariance_type=self.covariance_type, device=device,
                            dtype=Xt.dtype)
        rs = numpy_random_state(self.random_state, where=where)
        if self.m_step == "closed_form" and self.max_iter > 0:
            require_block(BLOCK, where=where, why="the closed-form M-step is the maximizer of Q "
                          "with the responsibilities held constant; use m_step='gradient' to fit "
                          "without the block")
        try:
            best, self.n_iter_, self.lower_bound_, self.lower_bounds_, self.converged_ = \
                self._fit_em(Xt, w, rs, inits)
        except CovarianceOverflowError as err:  # the data's fault: say so in terms of X
            top = float(Xt.abs().max())
            raise ValueError(f"{where}: X overflows {Xt.dtype}: its values reach {top:.3g} in "
                             f"absolute value, and the covariances of such values (sums of "
                             f"squared deviations) are not finite; scale X first, e.g. with "
                             f"sklearn.preprocessing.MaxAbsScaler (a StandardScaler squares "
                             f"the values too, and overflows with them)") from err
        except IllDefinedCovarianceError as err:  # scikit-learn's advice, said of X
            advice = str(err).rpartition("Fitting the mixture model failed")
            raise ValueError(f"{where}: the covariances fitted to X are not positive definite. "
                             f"{advice[1]}{advice[2]}") from err
        self._set_fitted(best, like=X)
        return self

    def _fit_em(self, X: torch.Tensor, w: torch.Tensor | None, rs: np.random.RandomState,
                inits: tuple[Any, Any, Any]
                ) -> tuple[GMMParams, int, float, list[float], bool]:
        """The EM loop over ``n_init`` starts: best parameters, n_iter, bounds, converged."""
        do_init = not (self.warm_start and hasattr(self, "converged_"))
        n_init = self.n_init if do_init else 1
        ones = torch.ones(X.shape[0], dtype=torch.float64, device=X.device)
        w_all = ones if w is None else w.to(torch.float64)  # the bounds are summed in float64
        w_total = w_all.sum()
        # parameters in float64 (converted to the data's dtype when the fit ends); each
        # iteration on the fastest path exact enough for it (see toolkit.algorithms.em.fast)
        fast = (EMPath(X, w_all, self.covariance_type, self.reg_covar)
                if self.m_step == "closed_form" else None)
        progress = _Progress(self.verbose, self.verbose_interval)
        best: GMMParams | None = None
        best_bound, best_bounds, best_n_iter, best_converged = -math.inf, [], 0, False
        for init in range(n_init):
            progress.begin(init)
            params = (initial_parameters(
                X, self.n_components, self.init_params, self.covariance_type, self.reg_covar,
                w, rs, *inits) if do_init else self._fitted_params(dtype=X.dtype))
            if fast is not None:
                params = fast.to_compute(params)
            lower_bound = -math.inf if do_init else self.lower_bound_
            bounds: list[float] = []
            converged = False
            n_iter = 0
            for n_iter in range(1, self.max_iter + 1):
                prev = lower_bound
                if fast is not None:
                    log_prob_norm, params = fast.step(params)
                else:
                    log_prob_norm, log_resp = e_step(X, params.weights, params.means,
                                                     params.precisions_cholesky,
                                                     self.covariance_type)
                    params = self._m_step(X, log_resp, w, params)
                lower_bound = (torch.dot(w_all, log_prob_norm.to(w_all.dtype)) / w_total).item()
                bounds.append(lower_bound)
                progress.iteration(n_iter, lower_bound - prev)
                if abs(lower_bound - prev) < self.tol:
                    converged = True
                    break
            if self.max_iter > 0:
                progress.end(lower_bound, converged)
            if lower_bound > best_bound or best_bound == -math.inf:
                best, best_bound, best_bounds = params, lower_bound, bounds
                best_n_iter, best_converged = n_iter, converged
        if not best_converged and self.max_iter > 0:  # scikit-learn's words, then ours
            warnings.warn(f"GaussianMixture.fit: Best performing initialization did not "
                          f"converge. Try different init parameters, or increase max_iter, tol, "
                          f"or check for degenerate data. (It stopped after max_iter="
                          f"{self.max_iter} iterations with tol={self.tol}; n_init > 1 tries "
                          f"other starts.)", ConvergenceWarning, stacklevel=3)
        assert best is not None  # n_init >= 1
        best = one_model(best, X.dtype, self.covariance_type)
        return best, best_n_iter, best_bound, best_bounds, best_converged

    def fit_predict(self, X: Any, y: Any = None, sample_weight: Any = None
                    ) -> np.ndarray | torch.Tensor:
        """Fit, then return the most probable component of each sample."""
        return self.fit(X, sample_weight=sample_weight).predict(X)

    # ---- scikit-learn's private hooks, for code written against its GaussianMixture -------

    def _initialize(self, X: Any, resp: Any) -> None:
        """Set the parameters from responsibilities ``resp`` (n_samples, n_components) by one
        M-step, the ``*_init`` parameters taking precedence (scikit-learn's ``_initialize``;
        the number of components is ``resp``'s)."""
        where = "GaussianMixture._initialize"
        device = resolve_device(self.device, where="GaussianMixture")
        Xt = check_X(where, X, device=device, dtype=resolve_dtype(self.dtype, X))
        r = as_tensor(resp, where=where, arg="resp", dtype=Xt.dtype, device=device, ndim=2,
                      finite=True)
        inits = check_inits(where, self.weights_init, self.means_init, self.precisions_init,
                            n_components=r.shape[1], n_features=Xt.shape[1],
                            covariance_type=self.covariance_type, device=device, dtype=Xt.dtype)
        self._set_fitted(parameters_from_responsibilities(
            Xt, r, self.covariance_type, self.reg_covar, None, *inits), like=X)

    def _set_parameters(self, params: Any) -> None:
        """Set ``(weights, means, covariances, precisions_cholesky)`` and the precisions they
        imply (scikit-learn's ``_set_parameters``)."""
        tensors = GMMParams(*(torch.as_tensor(p) for p in params))
        self._set_fitted(tensors, like=params[1])

    def _set_fitted(self, params: GMMParams, *, like: Any) -> None:
        U = params.precisions_cholesky.to(torch.float64)  # the precisions from the stored
        precisions = (U @ U.mT if self.covariance_type in ("full", "tied") else U.square()
                      ).to(params.precisions_cholesky.dtype)  # factor, rounded once
        self.weights_, self.means_, self.covariances_, self.precisions_cholesky_, \
            self.precisions_ = (to_output(t, like) for t in (*params, precisions))

    def _fitted_params(self, where: str = "fit", dtype: torch.dtype | None = None
                       ) -> GMMParams:
        """The fitted attributes as tensors on ``device`` (zero-copy for numpy on the CPU)."""
        if not hasattr(self, "means_"):  # scikit-learn's words, after the method's name
            raise NotFittedError(f"GaussianMixture.{where}: This GaussianMixture instance is not "
                                 f"fitted yet. Call 'fit' with appropriate arguments before using "
                                 f"this estimator.")
        device = resolve_device(self.device, where="GaussianMixture")
        return GMMParams(*(torch.as_tensor(a, device=device, dtype=dtype) for a in (
            self.weights_, self.means_, self.covariances_, self.precisions_cholesky_)))

    # ---- using a fitted model --------------------------------------------------------------

    def _prepare(self, where: str, X: Any) -> tuple[torch.Tensor, GMMParams]:
        params = self._fitted_params(where)
        Xt = check_X(f"GaussianMixture.{where}", X, device=params.means.device,
                     dtype=params.means.dtype, n_features=self.n_features_in_)
        validate_data(self, X, reset=False, skip_check_array=True)  # feature names
        return Xt, params

    def _e_step(self, where: str, X: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        Xt, p = self._prepare(where, X)
        return (*e_step(Xt, p.weights, p.means, p.precisions_cholesky, self.covariance_type),
                Xt)

    @reports_allocation_failures("GaussianMixture.score_samples", *_SIZES)
    def score_samples(self, X: Any) -> np.ndarray | torch.Tensor:
        """Log-likelihood ``log p(x_n)`` of each sample, shape (n_samples,)."""
        return to_output(self._e_step("score_samples", X)[0], X)

    @reports_allocation_failures("GaussianMixture.score", *_SIZES)
    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Mean (weighted) log-likelihood per sample."""
        log_prob_norm, _, Xt = self._e_step("score", X)
        w = check_sample_weight("GaussianMixture.score", sample_weight, Xt.shape[0], 1, like=Xt)
        if w is None:
            return log_prob_norm.mean().item()
        return ((w * log_prob_norm).sum() / w.sum()).item()

    @reports_allocation_failures("GaussianMixture.predict_proba", *_SIZES)
    def predict_proba(self, X: Any) -> np.ndarray | torch.Tensor:
        """Responsibilities ``p(z = k | x_n)``, shape (n_samples, n_components).

        A row whose log-density is ``-inf`` or NaN under every component (values so far from
        the fitted means that their squares overflow) has no defined responsibilities: it
        comes back as NaN, with a ``RuntimeWarning`` that counts such rows.
        """
        _, log_resp, Xt = self._e_step("predict_proba", X)
        _warn_undefined_rows("GaussianMixture.predict_proba", log_resp, Xt)
        return to_output(log_resp.exp(), X)

    @reports_allocation_failures("GaussianMixture.predict", *_SIZES)
    def predict(self, X: Any) -> np.ndarray | torch.Tensor:
        """Most probable component of each sample, shape (n_samples,)."""
        Xt, p = self._prepare("predict", X)
        log_prob = weighted_log_prob(Xt, p.weights, p.means, p.precisions_cholesky,
                                     self.covariance_type)
        _warn_undefined_rows("GaussianMixture.predict", log_prob, Xt, labels=True)
        return to_output(log_prob.argmax(1), X)

    def sample(self, n_samples: int = 1) -> tuple[Any, Any]:
        """Draw ``n_samples`` points; returns ``(X, y)`` grouped by component.

        scikit-learn's sampler with its random numbers: counts per component from a
        multinomial, then each component's points, drawn from ``random_state`` (an int seed
        gives the same draws each call, and scikit-learn's draws for the same parameters).
        The results are numpy arrays or tensors, like the fitted attributes.
        """
        self._fitted_params("sample")
        if is_int(n_samples) and n_samples < 1:  # scikit-learn's words, then ours
            raise ValueError(f"GaussianMixture.sample: Invalid value for 'n_samples': the "
                             f"sampling requires at least one sample, got {n_samples}")
        check("GaussianMixture.sample", "n_samples", n_samples, [Integer(1)])
        rng = numpy_random_state(self.random_state, where="GaussianMixture.sample")
        weights, means, covs = (np.asarray(torch.as_tensor(a).cpu(), dtype=np.float64)
                                for a in (self.weights_, self.means_, self.covariances_))
        ct = self.covariance_type
        with allocation_errors("GaussianMixture.sample",
                               f"n_samples={n_samples} of {means.shape[1]} features"):
            counts = rng.multinomial(n_samples, weights)
            if ct in ("full", "tied"):
                parts = [rng.multivariate_normal(mean, covs[j] if ct == "full" else covs, int(c))
                         for j, (mean, c) in enumerate(zip(means, counts))]
            else:
                parts = [mean + rng.standard_normal(size=(int(c), means.shape[1])) * np.sqrt(cov)
                         for mean, cov, c in zip(means, covs, counts)]
            X = torch.as_tensor(np.vstack(parts))
        y = torch.cat([torch.full((int(c),), j, dtype=torch.int64)
                       for j, c in enumerate(counts)])
        like = self.means_
        if isinstance(like, torch.Tensor):
            return X.to(like.device, like.dtype), y.to(like.device)
        return X.numpy().astype(like.dtype, copy=False), y.numpy()

    def _n_parameters(self) -> int:
        k, d = self.means_.shape
        cov_params = {"full": k * d * (d + 1) / 2, "diag": k * d, "tied": d * (d + 1) / 2,
                      "spherical": k}[self.covariance_type]
        return int(cov_params + k * d + k - 1)

    @reports_allocation_failures("GaussianMixture.bic", *_SIZES)
    def bic(self, X: Any) -> float:
        """Bayesian information criterion ``−2 n score + p log n`` (lower is better)."""
        log_prob_norm = self._e_step("bic", X)[0]
        n = len(log_prob_norm)
        return -2 * log_prob_norm.mean().item() * n + self._n_parameters() * math.log(n)

    @reports_allocation_failures("GaussianMixture.aic", *_SIZES)
    def aic(self, X: Any) -> float:
        """Akaike information criterion ``−2 n score + 2 p`` (lower is better)."""
        log_prob_norm = self._e_step("aic", X)[0]
        return -2 * log_prob_norm.sum().item() + 2 * self._n_parameters()
