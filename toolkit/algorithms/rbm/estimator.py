"""The scikit-learn estimator :class:`BernoulliRBM`, trained by the toolkit's one CD/PCD loop.

References:
    G. E. Hinton (2010), "A practical guide to training restricted Boltzmann machines",
    UTML TR 2010-003. https://www.cs.toronto.edu/~hinton/absps/guideTR.pdf
    scikit-learn's ``BernoulliRBM``,
    https://scikit-learn.org/stable/modules/generated/sklearn.neural_network.BernoulliRBM.html
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import validate_data

from toolkit._utils.array_validation import (
    numpy_random_state,
    resolve_device,
    resolve_dtype,
    to_output,
)
from toolkit._utils.memory import allocation_errors, reports_allocation_failures
from toolkit._utils.param_validation import (
    Bool,
    Callable_,
    Generator,
    Instance,
    Integer,
    Options,
    Real,
    check,
    check_params,
)
from toolkit.algorithms.rbm.core import CHAINS, RBMParams, bernoulli, column_major, gibbs_steps
from toolkit.algorithms.rbm.inputs import SparseRows, check_data, map_rows
from toolkit.algorithms.rbm.likelihood import (
    MAX_EXACT_UNITS,
    ais_log_partition,
    exact_log_partition,
    pseudo_log_likelihood,
)
from toolkit.algorithms.rbm.training import (
    CDStep,
    TrainSettings,
    initial_state,
    threads_for,
    train_loop,
)

__all__ = ["BernoulliRBM"]

#: Valid parameters of :class:`BernoulliRBM` (checked by ``fit``; ``device`` by resolve_device).
_CONSTRAINTS: dict[str, list[Any]] = {
    "n_components": [Integer(1)],
    "learning_rate": [Real(0, closed="neither")],
    "batch_size": [Integer(1)],
    "n_iter": [Integer(0)],
    "verbose": [Integer(0), Bool],
    "random_state": [None, Integer(0, 2**32 - 1),
                     Instance(np.random.RandomState, np.random.Generator,
                              name="a numpy RandomState or Generator"), Generator],
    "method": [Options("cd", "pcd")],
    "k": [Integer(1)],
    "chain": [Options(*CHAINS)],
    "momentum": [Real(0, 1, closed="left")],
    "weight_decay": [Real(0)],
    "n_chains": [None, Integer(1)],
    "shuffle": [Bool],
    "init": [Options("normal", "uniform")],
    "init_scale": [None, Real(0, closed="neither")],
    "dtype": [None, Options("float32", "float64", torch.float32, torch.float64)],
    "callback": [None, Callable_],
}

_INIT_SCALE = {"normal": 0.01, "uniform": 0.1}


#: The arguments of :meth:`BernoulliRBM.log_partition` (``betas``: a count of temperatures, or
#: the temperatures themselves, checked by :func:`~toolkit.algorithms.rbm.ais_log_partition`).
_LOG_Z_ARGS = {
    "method": [Options("auto", "exact", "ais")],
    "n_runs": [Integer(2)],
    "betas": [Integer(3), Instance(torch.Tensor, np.ndarray, list, tuple,
                                   name="an increasing 1-D sequence from 0 to 1")],
}


class BernoulliRBM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Bernoulli restricted Boltzmann machine: scikit-learn's estimator, trained by autograd.

    Visible units ``v ∈ {0,1}^V``, hidden units ``h ∈ {0,1}^H`` (``H = n_components``),
    energy ``E(v, h) = −b·v − c·h − hᵀ W v`` with ``W = components_`` (H, V),
    ``b = intercept_visible_``, ``c = intercept_hidden_``; free energy
    ``F(v) = −b·v − Σ_j softplus(c_j + W_j·v)``. ``transform`` gives ``P(h=1|v) = σ(c + v Wᵀ)``.
    Data are values in [0, 1], read as the probabilities that the visible units are on (as in
    scikit-learn, e.g. ``load_digits().data / 16``). Values outside [0, 1] are computed as given,
    as scikit-learn's ``BernoulliRBM`` computes them (a scaler fitted on training folds maps a test
    fold slightly outside), with one :class:`~toolkit.algorithms.rbm.DataRangeWarning` per call
    saying what they mean for the model and how to scale.

    Training is :func:`~toolkit.algorithms.rbm.train_cd`'s loop: each update draws negative
    samples with ``k`` Gibbs steps behind the block ``BLOCK = "rbm.negative_samples"``, takes the
    gradient of ``cd_loss = mean F(v_data) − mean F(stop_gradient(v_model))`` by autograd and
    applies ``u ← momentum·u − learning_rate·(∇ + weight_decay·W)``, ``θ ← θ + u``.

    **The defaults are scikit-learn's algorithm**: PCD-1 (``method="pcd"``, ``k=1``,
    ``chain="sampled"``) with ``batch_size`` persistent chains that keep hidden states started
    at 0 (``h_samples_``), weights drawn as ``random_state.normal(0, 0.01, (H, V))`` (the same
    draw as scikit-learn's for the same seed), zero biases, plain SGD with a per-sample
    learning rate (no momentum, no weight decay) over mini-batches in the order given
    (``shuffle=False``). What differs: the sampling draws come from a ``torch.Generator`` (seeded
    from ``random_state``), as float32 uniforms whatever the dtype (so float32 and float64 data
    fit alike, to float32 precision, as in scikit-learn), and a short last mini-batch averages
    its data and its chains separately (scikit-learn divides both sums by the batch's size).
    Each update is the autograd gradient of ``cd_loss``, computed without the loss's value
    (``CDStep.loss`` computes it when read). Problems whose update multiplies fewer than
    ``training.ONE_THREAD_WORK`` numbers per product run ``fit`` and ``partial_fit`` on one
    intra-op thread (the setting is restored afterwards): threads cost more than they save there.

    Args:
        n_components, learning_rate, batch_size, n_iter, verbose, random_state: scikit-learn's
            (``n_iter``: passes over the data; ``verbose``: a line per pass with the mean
            pseudo-log-likelihood; ``random_state``: None, an int seed (every ``fit`` starts
            afresh), a numpy ``RandomState`` (advances from fit to fit), a numpy ``Generator``
            or a ``torch.Generator``).
        method: ``"pcd"`` (persistent chains, Tieleman 2008) or ``"cd"`` (chains restart at
            the mini-batch, Hinton 2002).
        k: Gibbs steps per update.
        chain: ``"sampled"`` (binary samples) or ``"mean_field"`` (probabilities
            ``v ← σ(b + σ(c + vWᵀ)W)``: deterministic and differentiable). Inside
            ``disable_blocks(BLOCK)`` a mean-field chain trains through the chain (the gradient
            also flows back through its steps); a sampled chain raises
            :class:`toolkit.BlockNotSwitchableError` (sampling passes no gradient, so the
            update would silently be the same).
        momentum, weight_decay: SGD momentum and L2 weight decay on ``W`` (Hinton's guide).
        n_chains: persistent chains for PCD (default ``batch_size``, as scikit-learn, or the
            number of samples when that is smaller: a batch larger than the data is the data).
        shuffle: visit the rows in a new random order every pass (default: in order).
        init, init_scale: weights ``N(0, 0.01²)`` (``"normal"``, scikit-learn) or
            ``U(−0.1, 0.1)`` (``"uniform"``, the Shark library); ``init_scale`` replaces 0.01/0.1.
        device: where to compute (``"cpu"``, ``"cuda"``, ``None``/``"auto"``: CUDA if available).
        dtype: ``None`` (float32 data stay float32, other data become float64, as in
            scikit-learn), ``"float32"``/``"float64"`` or the torch dtypes.
        callback: called with a :class:`~toolkit.algorithms.rbm.CDStep` at every update before
            it is applied; a true return value stops training.

    Attributes:
        components_ (H, V), intercept_hidden_ (H,), intercept_visible_ (V,): the parameters.
            ``components_`` is stored column by column (Fortran order, the layout the update's
            products are fastest with, see :func:`~toolkit.algorithms.rbm.core.column_major`);
            one assigned in another layout trains to the same values.
        h_samples_ (n_chains, H): the hidden states of the persistent chains (PCD only).
        n_features_in_, feature_names_in_ (after a pandas frame with string column names).
        n_iter_: passes over the data completed; n_updates_: updates applied.
        divergence_: ``None``, or where training stopped because a gradient or a parameter
            became non-finite (a :class:`~toolkit.algorithms.divergence.Divergence`; a
            :class:`~toolkit.algorithms.divergence.DivergenceWarning` says so once, and no further
            update is applied, by ``fit`` or ``partial_fit``, until the next ``fit``).

    Type in, type out: numpy arrays, array-likes, pandas frames and scipy.sparse matrices give
    numpy results; tensors give tensors on the input's device. The fitted attributes follow the
    data given to ``fit``. Sparse matrices (any scipy format) are read a mini-batch, or a chunk
    of rows, at a time, never densified whole, and give the numbers of the dense matrix.
    ``gibbs`` returns booleans, as scikit-learn's does.

    ``score_samples`` is deterministic: the pseudo-log-likelihood ``Σ_i log P(v_i | v_{−i})``
    summed over every visible unit (:func:`~toolkit.algorithms.rbm.pseudo_log_likelihood`),
    the quantity whose one-random-unit estimate scikit-learn returns; it is comparable across
    models of any size. ``log_likelihood`` gives the real ``log p(v)`` (exact, or by AIS).

    >>> from sklearn.datasets import load_digits
    >>> X = load_digits().data[:200] / 16
    >>> rbm = BernoulliRBM(n_components=16, n_iter=2, random_state=0).fit(X)
    >>> rbm.transform(X).shape, rbm.components_.shape, type(rbm.components_).__name__
    ((200, 16), (16, 64), 'ndarray')
    """

    def __init__(self, n_components: int = 256, *, learning_rate: float = 0.1,
                 batch_size: int = 10, n_iter: int = 10, verbose: int = 0,
                 random_state: Any = None, method: str = "pcd", k: int = 1,
                 chain: str = "sampled", momentum: float = 0.0, weight_decay: float = 0.0,
                 n_chains: int | None = None, shuffle: bool = False, init: str = "normal",
                 init_scale: float | None = None, device: torch.device | str | None = "cpu",
                 dtype: str | torch.dtype | None = None,
                 callback: Callable[[CDStep], Any] | None = None) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.verbose = verbose
        self.random_state = random_state
        self.method = method
        self.k = k
        self.chain = chain
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.n_chains = n_chains
        self.shuffle = shuffle
        self.init = init
        self.init_scale = init_scale
        self.device = device
        self.dtype = dtype
        self.callback = callback

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified a mini-batch or a chunk of rows at a time
        names = {"float32": "float32", torch.float32: "float32", "float64": "float64",
                 torch.float64: "float64"}
        fixed = names.get(self.dtype) if isinstance(self.dtype, (str, torch.dtype)) else None
        tags.transformer_tags.preserves_dtype = [fixed] if fixed else ["float64", "float32"]
        return tags

    # ---- fitting ---------------------------------------------------------------------------

    @reports_allocation_failures("BernoulliRBM.fit", "n_components")
    def fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """Initialize and train for ``n_iter`` passes over ``X`` (n_samples, n_features).

        ``X``: values in [0, 1] (others with a warning, see the class docstring); ``y`` is
        ignored. Returns ``self``.
        """
        where = "BernoulliRBM.fit"
        check_params("BernoulliRBM", self.get_params(deep=False), _CONSTRAINTS)
        with self._threads(X, self.batch_size):
            Xt = self._check_fit_data(where, X)
            # a batch larger than the data is the data (scikit-learn's one batch of all rows)
            self._initialize(Xt, numpy_random_state(self.random_state, where=where),
                             chains=min(self.batch_size, Xt.shape[0]))
            self.n_iter_ = self._run(Xt, epochs=self.n_iter,
                                     batch_size=min(self.batch_size, Xt.shape[0]),
                                     shuffle=self.shuffle, like=X, report=True)
        return self

    @reports_allocation_failures("BernoulliRBM.partial_fit", "n_components")
    def partial_fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """One update with all of ``X`` as the mini-batch (initializing on the first call), as
        scikit-learn's ``partial_fit``. Returns ``self``."""
        where = "BernoulliRBM.partial_fit"
        check_params("BernoulliRBM", self.get_params(deep=False), _CONSTRAINTS)
        shape = getattr(X, "shape", ())
        with self._threads(X, int(shape[0]) if len(shape) == 2 else None):
            if not hasattr(self, "components_"):
                Xt = self._check_fit_data(where, X)
                self._initialize(Xt, numpy_random_state(self.random_state, where=where))
            else:
                _, Xt = self._prepare("partial_fit", X)
            self._state.stopped = False
            self._run(Xt, epochs=1, batch_size=Xt.shape[0], shuffle=False, like=X, report=False)
        return self

    def _threads(self, X: Any, batch: int | None) -> contextlib.AbstractContextManager[None]:
        """Training's thread setting (``training.threads_for``) for the whole call, checks
        included, when the size of an update (mini-batches of ``batch`` rows and the chains) is
        known from ``X``'s shape and the (checked) parameters."""
        shape = getattr(X, "shape", ())
        if batch is None or len(shape) != 2:
            return contextlib.nullcontext()  # training sets it itself
        chains = ((self.n_chains or min(self.batch_size, int(shape[0])))
                  if self.method == "pcd" else batch)
        rows = min(batch, int(shape[0])) + chains
        device = resolve_device(self.device, where="BernoulliRBM")
        return threads_for(self.n_components * int(shape[1]), rows, device)

    def _check_fit_data(self, where: str, X: Any) -> torch.Tensor | SparseRows:
        """``X`` checked and converted (the parameters are checked by the caller)."""
        device = resolve_device(self.device, where="BernoulliRBM")
        Xt = check_data(where, X, device=device, dtype=resolve_dtype(self.dtype, X))
        validate_data(self, X, reset=True, skip_check_array=True)  # n_features_in_, names
        return Xt

    def _initialize(self, X: torch.Tensor | SparseRows, rs: np.random.RandomState, *,
                    chains: int | None = None) -> None:
        """scikit-learn's start (weights from ``rs``, zero biases) and a fresh training state
        with ``n_chains``, else ``chains``, else ``batch_size`` persistent chains (scikit-learn's
        ``partial_fit`` keeps ``batch_size`` whatever the data)."""
        n_features = X.shape[1]
        scale = self.init_scale if self.init_scale is not None else _INIT_SCALE[self.init]
        shape = (self.n_components, n_features)
        W = (rs.normal(0, scale, shape) if self.init == "normal"
             else rs.uniform(-scale, scale, shape))
        generator = torch.Generator(device=X.device).manual_seed(int(rs.randint(0, 2**31 - 1)))
        zeros = {"dtype": X.dtype, "device": X.device}
        # stored column by column: the layout the update's products are fastest with
        params = RBMParams(column_major(torch.as_tensor(W, dtype=X.dtype).to(X.device)),
                           torch.zeros(n_features, **zeros),
                           torch.zeros(self.n_components, **zeros))
        self._state = initial_state(params, self.method,
                                    self.n_chains or chains or self.batch_size,
                                    self.chain == "mean_field", generator)
        self._rng_state = generator.get_state()
        self._visible_sum = torch.zeros(n_features, dtype=torch.float64, device=X.device)
        self._n_seen = 0
        self._n_features_out = self.n_components
        self.n_iter_ = 0
        self._set_fitted(params, like=X)

    def _generator(self, device: torch.device) -> torch.Generator:
        return torch.Generator(device=device).set_state(self._rng_state)

    def _run(self, X: torch.Tensor | SparseRows, *, epochs: int, batch_size: int, shuffle: bool, like: Any,
             report: bool) -> int:
        """Train in place with the one loop, a pass at a time; the passes completed."""
        params = self._fitted_params("fit")
        generator = self._generator(X.device)
        if (self._state.persistent_chain is None) != (self.method == "cd"):  # method changed
            self._state = initial_state(params, self.method, self.n_chains or batch_size,
                                        self.chain == "mean_field", generator)
        settings = TrainSettings(self.method, self.k, self.chain == "mean_field",
                                 float(self.learning_rate), float(self.momentum),
                                 float(self.weight_decay), "BernoulliRBM")
        self._visible_sum += (X.sum(0, dtype=torch.float64) if isinstance(X, torch.Tensor)
                              else X.column_sums())
        self._n_seen += X.shape[0]
        done = 0
        chains = self._state.persistent_chain
        rows = min(batch_size, X.shape[0]) * (2 if chains is None else 1) + (
            0 if chains is None else chains.shape[0])
        try:
            with threads_for(params.weights.numel(), rows, params.weights.device):
                for epoch in range(1, epochs + 1):
                    begin = time.time()
                    train_loop(params, X, epochs=1, batch_size=batch_size, shuffle=shuffle,
                               settings=settings, n_chains=None, state=self._state,
                               generator=generator, callback=self.callback)
                    if self._state.stopped or self._state.divergence is not None:
                        break
                    done += 1
                    if report and self.verbose:
                        with torch.no_grad():
                            pll = float(map_rows(lambda v: pseudo_log_likelihood(params, v),
                                                 X).mean())
                        print(f"[BernoulliRBM] Iteration {epoch}, pseudo-likelihood = "
                              f"{pll:.2f}, time = {time.time() - begin:.2f}s")
        finally:
            self._rng_state = generator.get_state()
            self._set_fitted(params, like=like)
        return done

    def _set_fitted(self, params: RBMParams, *, like: Any) -> None:
        W, b, c = params
        self.components_, self.intercept_visible_, self.intercept_hidden_ = (
            to_output(t, like) for t in (W, b, c))
        chain = self._state.persistent_chain
        if chain is not None:
            self.h_samples_ = to_output(chain, like)
        elif hasattr(self, "h_samples_"):
            del self.h_samples_
        self.n_updates_ = self._state.n_updates
        self.divergence_ = self._state.divergence

    def _fitted_params(self, where: str) -> RBMParams:
        """The fitted attributes as tensors on ``device`` (zero-copy for numpy on the CPU)."""
        if not hasattr(self, "components_"):  # scikit-learn's words, after the method's name
            raise NotFittedError(f"BernoulliRBM.{where}: This BernoulliRBM instance is not "
                                 f"fitted yet. Call 'fit' with appropriate arguments before "
                                 f"using this estimator.")
        device = resolve_device(self.device, where="BernoulliRBM")

        def tensor(a: Any) -> torch.Tensor:
            if isinstance(a, np.ndarray) and not a.flags.writeable:  # e.g. a loaded memmap
                a = a.copy()
            return torch.as_tensor(a, device=device)

        return RBMParams(*(tensor(a) for a in (self.components_, self.intercept_visible_,
                                               self.intercept_hidden_)))

    # ---- using a fitted model --------------------------------------------------------------

    def _prepare(self, where: str, X: Any, *, binary: bool = False,
                 dtype: torch.dtype | None = None) -> tuple[RBMParams, torch.Tensor | SparseRows]:
        params = self._fitted_params(where)
        Xt = check_data(f"BernoulliRBM.{where}", X, device=params.weights.device,
                        dtype=dtype or params.weights.dtype, n_features=self.n_features_in_,
                        binary=binary)
        validate_data(self, X, reset=False, skip_check_array=True)  # feature names
        return params, Xt

    @reports_allocation_failures("BernoulliRBM.transform", "n_components")
    def transform(self, X: Any) -> np.ndarray | torch.Tensor:
        """Hidden probabilities ``P(h=1|v=X) = σ(c + X Wᵀ)``, shape (n_samples, n_components)."""
        (W, _, c), Xt = self._prepare("transform", X)
        with torch.no_grad():
            return to_output(map_rows(lambda v: torch.sigmoid(F.linear(v, W, c)), Xt), X)

    @reports_allocation_failures("BernoulliRBM.score_samples", "n_components")
    def score_samples(self, X: Any) -> np.ndarray | torch.Tensor:
        """Pseudo-log-likelihood ``Σ_i log P(v_i | v_{−i})`` of each sample (deterministic).

        Summed over every visible unit (see the class docstring); scikit-learn's
        ``score_samples`` is a one-random-unit estimate of the same sum. Shape (n_samples,).
        """
        params, Xt = self._prepare("score_samples", X)
        with torch.no_grad():
            return to_output(map_rows(lambda v: pseudo_log_likelihood(params, v), Xt), X)

    @reports_allocation_failures("BernoulliRBM.gibbs", "n_components")
    def gibbs(self, v: Any) -> np.ndarray | torch.Tensor:
        """One Gibbs step ``v → h → v`` with sampled states (scikit-learn's ``gibbs``): a
        boolean array (or tensor) of visible states, shape (n_samples, n_features)."""
        params, vt = self._prepare("gibbs", v)
        generator = self._generator(vt.device)
        with torch.no_grad():
            out = map_rows(lambda x: gibbs_steps(params, x, 1, False, generator) != 0, vt)
        self._rng_state = generator.get_state()
        return to_output(out, v)

    # ---- scikit-learn's private helpers, for code written against its BernoulliRBM --------

    def _mean_hiddens(self, v: Any) -> np.ndarray | torch.Tensor:
        """``P(h=1|v)`` as :meth:`transform`; a 1-D ``v`` is one sample (scikit-learn's name)."""
        one = getattr(v, "ndim", None) == 1
        h = self.transform(v.reshape(1, -1) if one else v)
        return h[0] if one else h

    def _sample_hiddens(self, v: Any, rng: Any) -> np.ndarray | torch.Tensor:
        """Boolean samples of ``h | v``, drawn with a generator seeded from ``rng`` (anything
        ``random_state`` accepts); a 1-D ``v`` is one sample (scikit-learn's name)."""
        p = self._mean_hiddens(v)
        rs = numpy_random_state(rng, where="BernoulliRBM._sample_hiddens")
        generator = torch.Generator().manual_seed(int(rs.randint(0, 2**31 - 1)))
        h = torch.as_tensor(p).cpu()
        return to_output(bernoulli(h, generator) != 0, p)

    def sample(self, n_samples: int = 1, *, n_steps: int = 1000) -> np.ndarray | torch.Tensor:
        """Binary samples (n_samples, n_features) after ``n_steps`` Gibbs steps from uniform
        random states; numpy arrays or tensors, like the fitted attributes."""
        params = self._fitted_params("sample")
        check("BernoulliRBM.sample", "n_samples", n_samples, [Integer(1)])
        check("BernoulliRBM.sample", "n_steps", n_steps, [Integer(1)])
        W = params.weights
        generator = self._generator(W.device)
        with (torch.no_grad(),
              allocation_errors("BernoulliRBM.sample", f"n_samples={n_samples} of "
                                f"{W.shape[1]} features")):
            v = bernoulli(W.new_full((n_samples, W.shape[1]), 0.5), generator)
            v = gibbs_steps(params, v, n_steps, False, generator)
        self._rng_state = generator.get_state()
        return to_output(v, self.components_)

    def log_partition(self, *, method: str = "auto", n_runs: int = 100,
                      betas: int | torch.Tensor = 14500) -> tuple[float, float]:
        """``(log Z, standard error)`` in float64, exact or by annealed importance sampling.

        ``method="auto"``: exact (:func:`~toolkit.algorithms.rbm.exact_log_partition`, error 0)
        when ``min(n_features, n_components) <= 20``, else AIS
        (:func:`~toolkit.algorithms.rbm.ais_log_partition` with ``n_runs`` runs, ``betas``
        temperatures and the base-rate model of the data seen in training).
        """
        where = "BernoulliRBM.log_partition"
        # every argument is checked, also those the exact method does not use
        check_params(where, {"method": method, "n_runs": n_runs, "betas": betas}, _LOG_Z_ARGS)
        params = RBMParams(*(t.to(torch.float64) for t in self._fitted_params("log_partition")))
        if method == "auto":
            method = "exact" if min(params.weights.shape) <= MAX_EXACT_UNITS else "ais"
        with torch.no_grad():
            if method == "exact":
                return float(exact_log_partition(params)), 0.0
            mean = (self._visible_sum + 1) / (self._n_seen + 2)  # smoothed data means
            generator = self._generator(params.weights.device)
            result = ais_log_partition(params, base_visible_bias=torch.logit(mean),
                                       n_runs=n_runs, betas=betas, generator=generator)
            self._rng_state = generator.get_state()
        return float(result.log_partition), float(result.stderr)

    def log_likelihood(self, X: Any, *, method: str = "auto", n_runs: int = 100,
                       betas: int | torch.Tensor = 14500,
                       log_partition: float | None = None) -> np.ndarray | torch.Tensor:
        """``log p(v) = −F(v) − log Z`` of each binary sample, in float64 (n_samples,).

        ``log Z`` from :meth:`log_partition` (``method``, ``n_runs``, ``betas``) unless given.
        """
        params, Xt = self._prepare("log_likelihood", X, binary=True, dtype=torch.float64)
        check("BernoulliRBM.log_likelihood", "log_partition", log_partition, [None, Real()])
        if log_partition is None:
            log_partition, _ = self.log_partition(method=method, n_runs=n_runs, betas=betas)
        W, b, c = (t.to(torch.float64) for t in params)
        with torch.no_grad():
            neg_free_energy = map_rows(lambda v: v @ b + F.softplus(F.linear(v, W, c)).sum(1), Xt)
            return to_output(neg_free_energy - log_partition, X)
