"""``BernoulliRBM``: a Bernoulli RBM estimator trained with CD-k or persistent CD.

References:
    G. E. Hinton (2010), "A practical guide to training restricted Boltzmann machines",
    UTML TR 2010-003. https://www.cs.toronto.edu/~hinton/absps/guideTR.pdf
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from toolkit._validation import (
    Bool,
    Callable_,
    Integer,
    Options,
    Real,
    as_tensor,
    check,
    check_dtype,
    check_params,
    is_int,
    resolve_device,
    resolve_generator,
)
from toolkit.algorithms.rbm.core import CHAINS, RBMParams, _bernoulli, gibbs_chain, init_params
from toolkit.algorithms.rbm.likelihood import (
    MAX_EXACT_UNITS,
    ais_log_partition,
    exact_log_partition,
    log_likelihood,
    pseudo_log_likelihood,
)
from toolkit.algorithms.rbm.training import CDStep, _initial_state, _Settings, _train

__all__ = ["BernoulliRBM"]

# --------------------------------------------------------------------------------------------
# the estimator


def _as_matrix(X: Any, where: str, *, dtype: torch.dtype, device: torch.device,
               binary: bool, n_features: int | None = None) -> torch.Tensor:
    """Validate ``X`` (array-like (n_samples, n_features)) and return it as a tensor."""
    t = as_tensor(X, where=where, arg="X", dtype=dtype, device=device, ndim=2, finite=True,
                  min_rows=1)
    if n_features is not None and t.shape[1] != n_features:
        raise ValueError(f"{where}: X has {t.shape[1]} features, but the model was fitted with "
                         f"{n_features} (n_visible)")
    if binary:
        if not bool(((t == 0) | (t == 1)).all()):
            raise ValueError(f"{where}: X must be binary (only 0 and 1) for a Bernoulli RBM, got "
                             f"values in [{float(t.min()):g}, {float(t.max()):g}]; threshold "
                             f"it (e.g. toolkit.data.binarized_digits)")
    elif not bool(((t >= 0) & (t <= 1)).all()):
        raise ValueError(f"{where}: X must have values in [0, 1], got values in "
                         f"[{float(t.min()):g}, {float(t.max()):g}]")
    return t


#: Valid hyperparameters of :class:`BernoulliRBM` (checked by ``fit``).
_CONSTRAINTS: dict[str, list[Any]] = {
    "n_hidden": [Integer(1)],
    "method": [Options("cd", "pcd")],
    "k": [Integer(1)],
    "chain": [Options(*CHAINS)],
    "learning_rate": [Real(0, closed="neither")],
    "batch_size": [Integer(1)],
    "epochs": [Integer(0)],
    "momentum": [Real(0, 1, closed="left")],
    "weight_decay": [Real(0)],
    "n_chains": [None, Integer(1)],
    "init": [Options("normal", "uniform")],
    "init_scale": [None, Real(0)],
    "verbose": [None, Bool, Integer(0)],
    "callback": [None, Callable_],
}


class BernoulliRBM:
    """Bernoulli RBM trained with CD-k or persistent CD (PCD-k), by autograd of :func:`cd_loss`.

    Training is :func:`train_cd`'s loop: each update draws negative samples with ``k`` Gibbs
    steps (from the mini-batch for ``method="cd"``, from ``n_chains`` persistent chains for
    ``method="pcd"``) through :func:`negative_samples`, takes the gradient of ``cd_loss``
    and applies SGD with momentum and L2 weight decay (on the weights only, as in Hinton's
    guide):

        u ← momentum · u − learning_rate · (∇θ cd_loss + weight_decay · W),   θ ← θ + u.

    ``cd_loss`` averages over the batch, so ``learning_rate`` is per-sample as in
    scikit-learn's ``BernoulliRBM`` (which divides its summed update by the batch size).

    The block ``BLOCK = "rbm.negative_samples"``: with it the update is the CD update. Inside
    ``disable_blocks(BLOCK)``, ``chain="mean_field"`` trains through the chain (the gradient
    also flows back through the ``k`` mean-field steps), and ``chain="sampled"`` raises
    :class:`toolkit.BlockNotSwitchableError`: sampling passes no gradient, so the result would
    silently be the same.

    Args:
        n_hidden: number of hidden units.
        method: ``"cd"`` (chains restart at the data) or ``"pcd"`` (persistent chains,
            Tieleman 2008; scikit-learn's ``BernoulliRBM`` does PCD-1).
        k: Gibbs steps per update (>= 1).
        chain: ``"sampled"`` (binary samples, the usual CD) or ``"mean_field"`` (probabilities,
            ``v ← σ(b + σ(c + vWᵀ)W)``: deterministic and differentiable).
        learning_rate, batch_size, epochs, momentum, weight_decay: SGD settings; each epoch
            visits the data once in an order shuffled with the model's generator.
        n_chains: number of persistent chains for PCD (default ``batch_size``).
        init: ``"normal"`` (N(0, 0.01²), scikit-learn) or ``"uniform"`` (U(−0.1, 0.1), Shark);
            ``init_scale`` overrides the 0.01 / 0.1.
        device: ``"cpu"`` (default), ``"cuda"``, a ``torch.device``, or ``None``/``"auto"``
            (CUDA when available, else CPU).
        dtype: floating dtype of the parameters (float32 by default).
        random_state: int seed (or None for a random one) of the ``torch.Generator`` used for
            initialisation, shuffling and sampling.
        verbose: progress bar over epochs in ``fit``; ``None`` shows it only on a terminal.
        callback: called with a :class:`CDStep` at every update, before it is applied (e.g. to
            log diagnostics); a true return value stops training.

    Fitted attributes: ``weights_`` (n_hidden, n_visible), same layout as scikit-learn's
    ``components_``; ``visible_bias_`` (n_visible,) and ``hidden_bias_`` (n_hidden,) (its
    ``intercept_visible_``/``intercept_hidden_``); ``persistent_chain_`` (n_chains, n_visible)
    for PCD; ``n_features_in_``; ``n_iter_`` (epochs run); ``n_updates_``. Methods return torch
    tensors on the model's device; inputs may be numpy arrays or tensors.

    >>> import numpy as np
    >>> X = np.array([[0, 0, 1, 1], [1, 1, 0, 0]] * 5, dtype=float)
    >>> rbm = BernoulliRBM(3, epochs=5, random_state=0).fit(X)
    >>> rbm.transform(X).shape, rbm.weights_.shape
    (torch.Size([10, 3]), torch.Size([3, 4]))
    """

    def __init__(
        self,
        n_hidden: int = 256,
        *,
        method: str = "cd",
        k: int = 1,
        chain: str = "sampled",
        learning_rate: float = 0.1,
        batch_size: int = 10,
        epochs: int = 10,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        n_chains: int | None = None,
        init: str = "normal",
        init_scale: float | None = None,
        device: torch.device | str | None = "cpu",
        dtype: torch.dtype = torch.float32,
        random_state: int | None = None,
        verbose: bool | None = None,
        callback: Callable[[CDStep], Any] | None = None,
    ) -> None:
        self.n_hidden = n_hidden
        self.method = method
        self.k = k
        self.chain = chain
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.epochs = epochs
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.n_chains = n_chains
        self.init = init
        self.init_scale = init_scale
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    def __repr__(self) -> str:
        return (f"BernoulliRBM(n_hidden={self.n_hidden}, method={self.method!r}, k={self.k}, "
                f"chain={self.chain!r}, "
                f"learning_rate={self.learning_rate}, batch_size={self.batch_size}, "
                f"epochs={self.epochs})")

    # -- checks ---------------------------------------------------------------------------

    def _check_hyperparameters(self) -> None:
        where = "BernoulliRBM"
        check_params(where, self.__dict__, _CONSTRAINTS)
        check_dtype(where, self.dtype)
        self._device = resolve_device(self.device, where=where)
        self._generator = resolve_generator(self.random_state, where=where, device=self._device)

    def _check_fitted(self, where: str) -> None:
        if not hasattr(self, "weights_"):
            raise RuntimeError(f"BernoulliRBM.{where}: this model is not fitted yet; "
                               f"call fit or partial_fit first")

    @property
    def _params(self) -> RBMParams:
        return RBMParams(self.weights_, self.visible_bias_, self.hidden_bias_)

    # -- training -------------------------------------------------------------------------

    def _initialize(self, X: torch.Tensor) -> None:
        device = self._device
        gen = self._generator
        init_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen,
                                                                   device=device)))
        params = init_params(X.shape[1], self.n_hidden, init=self.init, scale=self.init_scale,
                             generator=init_gen, dtype=self.dtype, device=device)
        self.weights_, self.visible_bias_, self.hidden_bias_ = (p.requires_grad_(False)
                                                                for p in params)
        self.n_features_in_ = X.shape[1]
        self.n_iter_ = 0
        self._visible_sum = torch.zeros(X.shape[1], dtype=torch.float64, device=device)
        self._n_seen = 0
        self._settings = _Settings(self.method, self.k, self.chain == "mean_field",
                                   float(self.learning_rate), float(self.momentum),
                                   float(self.weight_decay), "BernoulliRBM")
        self._state = _initial_state(self._params, self.method,
                                     self.n_chains or self.batch_size, gen)
        self._sync_state()

    def _sync_state(self) -> None:
        self.n_updates_ = self._state.n_updates
        if self._state.persistent_chain is not None:
            self.persistent_chain_ = self._state.persistent_chain

    def _run(self, X: torch.Tensor, *, epochs: int, batch_size: int, shuffle: bool,
             progress: bool) -> int:
        """Train with the one loop (:func:`train_cd`'s), one epoch at a time for the bar.

        Returns the number of epochs completed (fewer when the callback stopped training)."""
        from tqdm.auto import tqdm

        self._visible_sum += X.sum(0, dtype=torch.float64)
        self._n_seen += X.shape[0]
        disable = None if self.verbose is None else not self.verbose
        bar = tqdm(range(epochs), desc="BernoulliRBM", unit="epoch",
                   disable=disable if progress else True, leave=False)
        done = 0
        try:
            for _ in bar:
                _train(self._params, X, epochs=1, batch_size=batch_size, shuffle=shuffle,
                       settings=self._settings, n_chains=None, state=self._state,
                       generator=self._generator, callback=self.callback)
                if self._state.stopped:
                    break
                done += 1
        finally:
            bar.close()
            self._sync_state()
        return done

    def fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """Initialise and train for ``epochs`` passes over ``X`` (n_samples, n_visible), binary.

        ``y`` is ignored. Returns ``self``. Inside ``disable_blocks(BLOCK)`` a mean-field chain
        trains through the chain; a sampled chain raises ``BlockNotSwitchableError``.
        """
        self._check_hyperparameters()
        X = _as_matrix(X, "BernoulliRBM.fit", dtype=self.dtype, device=self._device, binary=True)
        self._initialize(X)
        self.n_iter_ = self._run(X, epochs=self.epochs, batch_size=self.batch_size, shuffle=True,
                                 progress=True)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """One update with ``X`` as the mini-batch (initialising on the first call), like
        scikit-learn's ``partial_fit``. Returns ``self``."""
        if not hasattr(self, "weights_"):
            self._check_hyperparameters()
            X = _as_matrix(X, "BernoulliRBM.partial_fit", dtype=self.dtype, device=self._device,
                           binary=True)
            self._initialize(X)
        else:
            X = _as_matrix(X, "BernoulliRBM.partial_fit", dtype=self.dtype, device=self._device,
                           binary=True, n_features=self.n_features_in_)
        self._state.stopped = False
        self._run(X, epochs=1, batch_size=X.shape[0], shuffle=False, progress=False)
        return self

    # -- inference ------------------------------------------------------------------------

    def transform(self, X: Any) -> torch.Tensor:
        """Hidden probabilities ``P(h=1|v=X)`` (n_samples, n_hidden); ``X`` values in [0, 1]."""
        self._check_fitted("transform")
        X = _as_matrix(X, "BernoulliRBM.transform", dtype=self.dtype, device=self._device,
                       binary=False, n_features=self.n_features_in_)
        with torch.no_grad():
            return torch.sigmoid(F.linear(X, self.weights_, self.hidden_bias_))

    def fit_transform(self, X: Any, y: Any = None) -> torch.Tensor:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X).transform(X)

    def sample(self, n_samples: int = 1, *, n_steps: int = 1000,
               v_init: Any = None) -> torch.Tensor:
        """Binary samples (n_samples, n_visible) after ``n_steps`` Gibbs steps.

        Chains start at ``v_init`` (binary, (n_samples, n_visible)) or at uniform random states.
        """
        self._check_fitted("sample")
        check("BernoulliRBM.sample", "n_steps", n_steps, [Integer(1)])
        if v_init is None:
            check("BernoulliRBM.sample", "n_samples", n_samples, [Integer(1)])
            half = torch.full((n_samples, self.n_features_in_), 0.5, dtype=self.dtype,
                              device=self._device)
            v = _bernoulli(half, self._generator)
        else:
            v = _as_matrix(v_init, "BernoulliRBM.sample", dtype=self.dtype, device=self._device,
                           binary=True, n_features=self.n_features_in_)
        with torch.no_grad():
            return gibbs_chain(self._params, v, n_steps, generator=self._generator)

    def score_samples(self, X: Any) -> torch.Tensor:
        """Pseudo-log-likelihood per sample (scikit-learn's formula, one random bit flipped).

        Random: with an int ``random_state`` the flipped units are drawn from a generator
        seeded with it on every call (same answer each call, as in scikit-learn), otherwise from
        the model's generator. See :func:`pseudo_log_likelihood`.
        """
        self._check_fitted("score_samples")
        X = _as_matrix(X, "BernoulliRBM.score_samples", dtype=self.dtype, device=self._device,
                       binary=True, n_features=self.n_features_in_)
        gen = (torch.Generator().manual_seed(int(self.random_state))
               if is_int(self.random_state) else None)
        with torch.no_grad():
            return pseudo_log_likelihood(self._params, X, generator=gen)

    def log_likelihood(self, X: Any, *, method: str = "auto", n_runs: int = 100,
                       betas: int | torch.Tensor = 14500) -> torch.Tensor:
        """``log p(v)`` per sample (float64), exact or by AIS.

        ``method="auto"``: exact (:func:`exact_log_partition`) when
        ``min(n_visible, n_hidden) <= 20``, else AIS (:func:`ais_log_partition` with the
        base-rate model of the training data, ``n_runs`` runs and ``betas`` temperatures). The
        log-partition used and, for AIS, its standard error are kept in ``log_partition_`` and
        ``log_partition_stderr_`` (0.0 when exact).
        """
        self._check_fitted("log_likelihood")
        check("BernoulliRBM.log_likelihood", "method", method, [Options("auto", "exact", "ais")])
        X = _as_matrix(X, "BernoulliRBM.log_likelihood", dtype=torch.float64,
                       device=self._device, binary=True, n_features=self.n_features_in_)
        params = RBMParams(*(p.to(torch.float64) for p in self._params))
        if method == "auto":
            method = "exact" if min(self.weights_.shape) <= MAX_EXACT_UNITS else "ais"
        with torch.no_grad():
            if method == "exact":
                log_z, stderr = exact_log_partition(params), torch.tensor(0.0)
            else:
                # Base-rate model of the training data (smoothed means, as in ais_log_partition).
                mean = (self._visible_sum + 1) / (self._n_seen + 2)
                result = ais_log_partition(params, base_visible_bias=torch.logit(mean),
                                           n_runs=n_runs, betas=betas, generator=self._generator)
                log_z, stderr = result.log_partition, result.stderr
            self.log_partition_ = float(log_z)
            self.log_partition_stderr_ = float(stderr)
            return log_likelihood(params, X, log_partition=log_z)
