"""The one training loop of the Bernoulli RBM: SGD on :func:`cd_loss` with CD-k or PCD-k.

Every update draws negative samples through :func:`~toolkit.algorithms.rbm.core.negative_samples`
(so the block decides whether the chain is part of the gradient), takes the gradient of
:func:`~toolkit.algorithms.rbm.core.cd_loss` by autograd (without computing the loss's value,
which the update never needs: a surrogate with the same gradient, see ``core.cd_loss_grads``)
and applies SGD with momentum and L2 weight decay on the weights (Hinton's guide, section 9–10):

    u ← momentum · u − learning_rate · (∇θ cd_loss + weight_decay · W),   θ ← θ + u.

Below float64 the addition ``θ + u`` is compensated (Kahan): what its rounding loses is carried
into the next update, so a float32 fit stays as close to the float64 fit as scikit-learn's does.

:class:`~toolkit.algorithms.rbm.estimator.BernoulliRBM` trains with :func:`train_cd`, and so do
the experiments: a ``callback`` sees every update (epoch, batch, parameters, data, negative
samples, loss and gradient) before it is applied.

References:
    G. E. Hinton (2010), "A practical guide to training restricted Boltzmann machines",
    UTML TR 2010-003. https://www.cs.toronto.edu/~hinton/absps/guideTR.pdf
    N. J. Higham (2002), "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM,
    §4.3 (compensated summation). https://doi.org/10.1137/1.9780898718027
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from toolkit._utils.array_validation import all_finite
from toolkit._utils.param_validation import (
    Callable_,
    Generator,
    Integer,
    Options,
    Real,
    check_params,
)
from toolkit._utils.threads import one_intra_op_thread
from toolkit.algorithms.divergence import Divergence, check_finite, warn_divergence
from toolkit.algorithms.rbm.core import (
    CHAINS,
    RBMParams,
    bernoulli,
    cd_loss_grads,
    cd_sum_weights,
    check_layer,
    check_rbm_params,
    negative_chain,
    next_hidden,
    weighted_cd_loss,
)
from toolkit.algorithms.rbm.flat import FlatParams
from toolkit.algorithms.rbm.inputs import batches, check_range

__all__ = ["CDStep", "TrainState", "train_cd"]


class CDStep(NamedTuple):
    """What a ``callback`` of :func:`train_cd` receives at every update, before it is applied.

    ``epoch``: passes over the data completed with this state before this one; ``batch``: index
    of the mini-batch in the epoch; ``params``: the parameters (leaf tensors, not yet updated;
    do not modify them); ``v_data`` (batch, n_visible); ``v_model`` (n_chains, n_visible): the
    negative samples (with a graph only inside ``disable_blocks(BLOCK)`` with a mean-field
    chain); ``grads``: the gradient of ``cd_loss`` (:class:`RBMParams`, before weight decay
    and momentum); ``loss``: the value of ``cd_loss``, computed (with its graph) only when read:
    the update itself never needs it (see ``cd_loss_grads``). Read it during the callback: the
    parameters change in place once the callback returns.
    """

    epoch: int
    batch: int
    params: RBMParams
    v_data: torch.Tensor
    v_model: torch.Tensor
    grads: RBMParams

    @property
    def loss(self) -> torch.Tensor:
        """``cd_loss(params, v_data, v_model)`` at this update (computed on each access)."""
        return weighted_cd_loss(self.params, self.v_data, self.v_model)


@dataclass
class TrainState:
    """What :func:`train_cd` carries from one update to the next (pass it back to continue).

    ``velocity``: the momentum buffers (like the parameters); ``persistent_chain``: the PCD
    chains' hidden states (n_chains, n_hidden), as scikit-learn's ``h_samples_`` (binary
    samples; probabilities for a mean-field chain), ``None`` for CD; ``n_updates``: updates applied;
    ``n_epochs``: passes over the data completed; ``stopped``: a callback stopped training;
    ``divergence``: where training stopped because a gradient or a parameter became non-finite
    (:class:`~toolkit.algorithms.divergence.Divergence`), ``None`` while everything is finite;
    ``compensation``: below float64, what rounding left out of the parameters so far (Kahan's
    compensated summation), the entries of all parameters in one vector; ``None`` in float64.
    """

    velocity: list[torch.Tensor]
    persistent_chain: torch.Tensor | None = None
    n_updates: int = 0
    n_epochs: int = 0
    stopped: bool = False
    divergence: Divergence | None = None
    compensation: torch.Tensor | None = field(default=None, repr=False)
    _flat: FlatParams | None = field(default=None, repr=False)
    _cd_weights: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class TrainSettings:
    """The checked arguments of one training run (:func:`train_loop`), ``where`` naming the
    caller in messages (``"train_cd"``, ``"BernoulliRBM"``)."""

    method: str
    k: int
    mean_field: bool
    learning_rate: float
    momentum: float
    weight_decay: float
    where: str


Callback = Callable[[CDStep], Any]

_CONSTRAINTS: dict[str, list[Any]] = {
    "method": [Options("cd", "pcd")],
    "k": [Integer(1)],
    "chain": [Options(*CHAINS)],
    "learning_rate": [Real(0, closed="neither")],
    "batch_size": [Integer(1)],
    "epochs": [Integer(0)],
    "momentum": [Real(0, 1, closed="left")],
    "weight_decay": [Real(0)],
    "n_chains": [None, Integer(1)],
    "shuffle": [Options(True, False)],
    "generator": [None, Generator],
    "callback": [None, Callable_],
}


def initial_state(params: RBMParams, method: str, n_chains: int, mean_field: bool,
                  generator: torch.Generator | None) -> TrainState:
    """Zero velocity; for PCD, ``n_chains`` chains of hidden states. A sampled chain starts at
    ``h = 0``, as in scikit-learn (the first negative samples are drawn from
    ``p(v|h=0) = σ(b)``); a mean-field chain is deterministic, so chains started alike would
    stay alike: they start at uniform random binary states."""
    velocity = [torch.zeros_like(p, requires_grad=False) for p in params]
    chain = None
    if method == "pcd":
        W = params.weights
        chain = W.new_zeros((n_chains, W.shape[0]), requires_grad=False)
        if mean_field:
            chain = bernoulli(chain.fill_(0.5), generator)
    return TrainState(velocity, chain)


def _update(params: RBMParams, v_data: torch.Tensor, state: TrainState,
            settings: TrainSettings, generator: torch.Generator | None,
            callback: Callback | None, batch: int) -> bool:
    """One update on the mini-batch ``v_data``; True when the callback asks to stop or when a
    gradient (checked before it is applied) or a parameter (after) is not finite."""
    chain = state.persistent_chain
    if chain is None:  # CD-k: the chain starts at the data
        v_model = negative_chain(params, v_data, settings.k, settings.mean_field, generator,
                                 settings.where)
    else:  # PCD-k: it continues from the persistent hidden states
        v_model = negative_chain(params, chain, settings.k, settings.mean_field, generator,
                                 settings.where, from_hidden=True)
    n_data = v_data.shape[0]
    key = (n_data, v_model.shape[0])
    weights = state._cd_weights.get(key)
    if weights is None:  # one vector per pair of batch sizes, not one per update
        weights = state._cd_weights[key] = cd_sum_weights(*key, v_data)
    # sums: n_data times the gradient of cd_loss, the data's and the chains' statistics
    # cancelled exactly (±1 row weights), scaled by 1/n_data once, in the step below
    sums, prob = cd_loss_grads(params, v_data, v_model, weights)
    if callback is not None and callback(CDStep(state.n_epochs, batch, params, v_data, v_model,
                                                RBMParams(*(g / n_data for g in sums)))):
        return True
    # The SGD step, as in torch.optim: parameters, velocity and chain states are plain values.
    # It is computed out of place and checked before anything is written: one cheap check of
    # the new parameters covers a non-finite gradient (never applied) and a finite step that
    # overflows a parameter (applied, as it happened, and recorded). All parameters at once,
    # as one flat vector: a handful of operations per update whatever their number.
    with torch.no_grad():
        flat = state._flat
        W = params.weights
        if flat is None or not flat.fits(W):
            flat = state._flat = FlatParams(params)
        lr, n_weights = settings.learning_rate, W.numel()
        # theta: the parameters' entries; the vector of the previous update's new parameters
        # when nothing could have written them since (same loop, no callback)
        theta = flat.theta if flat.holds and callback is None else flat.gather(params,
                                                                                flat.theta)
        step = flat.gather(sums, flat.step)
        # −lr·(∇ + wd·W) = (−lr/n_data)·sums − lr·wd·W: one scaling of the difference of the
        # statistics, as scikit-learn's lr/n · (statistics of the data − of the chains)
        alpha, decay = -lr / n_data, -lr * settings.weight_decay
        velocity = None
        if settings.momentum:
            velocity = flat.gather(state.velocity, flat.velocity)
            velocity.mul_(settings.momentum).add_(step, alpha=alpha)
            if decay:
                velocity[:n_weights].add_(theta[:n_weights], alpha=decay)
            step, alpha, decay = velocity, 1.0, 0.0
        carry = state.compensation
        if carry is None and theta.dtype != torch.float64:
            carry = state.compensation = theta.new_zeros(theta.shape)
        if carry is not None:  # compensated: what earlier roundings left out joins the step
            step = torch.add(carry, step, alpha=alpha, out=carry)
            if decay:
                step[:n_weights].add_(theta[:n_weights], alpha=decay)
            alpha, decay = 1.0, 0.0
        new = torch.add(theta, step, alpha=alpha, out=flat.new)
        if decay:
            new[:n_weights].add_(theta[:n_weights], alpha=decay)
        bad = _first_non_finite(_PARAMETER_NAMES, flat.new_params, new)
        if bad is not None:
            bad_gradient = check_finite(zip(_GRADIENT_NAMES, sums))
            if bad_gradient is not None:  # nothing non-finite is ever applied
                return _diverged(state, settings, bad_gradient, applied=False)
        if chain is not None:
            # The next update continues the chains from here (Tieleman 2008): hidden states
            # drawn from p(h | v_model) with the parameters that produced v_model (as
            # scikit-learn does); a value: its graph, if any, belonged to this update. The
            # gradient already computed p(h | v_model): no second product, no second sigmoid.
            next_hidden(params, v_model, settings.mean_field, generator, chain,
                        prob=prob[v_data.shape[0]:])
        if carry is not None:
            # Kahan's compensated summation (Higham 2002, §4.3) below float64: what rounding
            # θ + step left out, step − (new − θ) (new − θ is exact while |step| <= |θ|), is
            # carried into the next step instead of being lost, at every one of thousands of
            # updates; scripts/rbm_float32_error.py measures what it saves.
            carry.sub_(torch.sub(new, theta, out=theta))
        if velocity is not None:
            torch._foreach_copy_(state.velocity, flat.velocity_views)
        flat.apply(params)
    state.n_updates += 1
    if bad is not None:  # a finite step overflowed a parameter
        return _diverged(state, settings, bad, applied=True)
    return False


_PARAMETER_NAMES = ("weights", "visible biases", "hidden biases")
_GRADIENT_NAMES = tuple(f"gradient of the {name}" for name in _PARAMETER_NAMES)


def _first_non_finite(names: tuple[str, ...], tensors: Sequence[torch.Tensor],
                      flat: torch.Tensor | None = None) -> str | None:
    """The name of the first tensor holding an inf or a nan, ``None`` if all are finite.

    ``flat``: the entries of all ``tensors`` in one vector, when the caller has it. Cheap in the
    common case: one sum and one host read (no graph: the caller runs it under ``no_grad``).
    A finite sum implies finite entries (inf and nan are absorbing under addition: inf + x is
    inf or nan, nan + x is nan); only a non-finite sum, which finite entries can also give by
    overflowing it, runs the exact entry-by-entry check
    (:func:`~toolkit.algorithms.divergence.check_finite`). An ``isfinite`` of every entry of the gradients
    and of the parameters took 15–21% of a PCD-1 update on digits (256 hidden, batch 64, in a
    profile); the sum takes a few percent (benchmarks/bench_rbm.py measures it).
    """
    total = flat.sum() if flat is not None else sum(t.sum() for t in tensors)
    if math.isfinite(float(total)):
        return None
    return check_finite(zip(names, tensors))


def _diverged(state: TrainState, settings: TrainSettings, quantity: str, *, applied: bool
              ) -> bool:
    """Record and announce the first non-finite value; True (training stops)."""
    step = state.n_updates - 1 if applied else state.n_updates
    state.divergence = Divergence(settings.where, quantity, step, state.n_epochs, applied)
    warn_divergence(state.divergence)
    return True


def train_loop(params: RBMParams, X: torch.Tensor, *, epochs: int, batch_size: int,
               shuffle: bool, settings: TrainSettings, n_chains: int | None,
               state: TrainState | None, generator: torch.Generator | None,
               callback: Callback | None) -> TrainState:
    """The loop of :func:`train_cd`, without the argument checks."""
    if state is not None and state.divergence is not None:
        warn_divergence(state.divergence)  # no update on non-finite parameters
        return state
    finfo = torch.finfo(params.weights.dtype)
    for name in ("learning_rate", "weight_decay"):
        if getattr(settings, name) > finfo.max:
            raise ValueError(f"{settings.where}: {name}={getattr(settings, name):g} does not fit "
                             f"the parameters' {params.weights.dtype} (at most {finfo.max:g})")
    if state is None:
        state = initial_state(params, settings.method, n_chains or batch_size,
                              settings.mean_field, generator)
    if state._flat is not None:
        state._flat.holds = False  # the parameters may have been written since the last loop
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(True)
    n = X.shape[0]
    rows = min(batch_size, n) + (state.persistent_chain.shape[0] if state.persistent_chain
                                 is not None else min(batch_size, n))
    try:
        # training needs the graph of the loss, whatever the caller's mode
        with torch.enable_grad(), threads_for(params.weights.numel(), rows,
                                              params.weights.device):
            for _ in range(epochs):
                order = torch.randperm(n, generator=generator, device=X.device) if shuffle \
                    else None
                for batch, v_data in enumerate(batches(X, batch_size, order)):
                    if _update(params, v_data, state, settings, generator, callback, batch):
                        state.stopped = state.divergence is None
                        return state
                state.n_epochs += 1
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)
    return state


#: Below this many multiply-adds in the update's largest matrix product (n_hidden × n_visible ×
#: rows of data and chains), training runs on one intra-op thread (see :func:`threads_for`).
ONE_THREAD_WORK = 2**24


def threads_for(n_weights: int, rows: int, device: torch.device | str
                ) -> contextlib.AbstractContextManager[None]:
    """One intra-op thread on the CPU while an update's products are small; else no change.

    An update is some twenty operations on (rows × n_hidden) matrices: below
    :data:`ONE_THREAD_WORK` multiply-adds per product, splitting them over threads saves less
    than waking the threads costs, and on a machine whose cores are busy a parallel region can
    wait a whole scheduling slice for its second thread (measured on digits, 256 hidden, batch
    64: several times slower than one thread under load; benchmarks/bench_rbm.py). The setting
    is restored when training returns. scikit-learn limits its BLAS to one thread inside
    ``KMeans``'s iterations for the same reason.
    """
    if torch.device(device).type != "cpu" or n_weights * rows >= ONE_THREAD_WORK:
        return contextlib.nullcontext()
    return one_intra_op_thread()


def train_cd(
    params: RBMParams,
    X: torch.Tensor,
    *,
    method: str = "cd",
    k: int = 1,
    chain: str = "sampled",
    learning_rate: float = 0.1,
    batch_size: int = 10,
    epochs: int = 1,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    n_chains: int | None = None,
    shuffle: bool = True,
    generator: torch.Generator | None = None,
    state: TrainState | None = None,
    callback: Callback | None = None,
) -> TrainState:
    """Train ``params`` in place by SGD on :func:`cd_loss` (CD-k or PCD-k); return the state.

    Each epoch visits the rows of ``X`` (n_samples, n_visible), finite values in [0, 1] (values
    outside are computed as given, with a warning: see ``rbm.inputs.check_range``), once in
    mini-batches of ``batch_size`` (in an order shuffled with ``generator`` unless
    ``shuffle=False``). Each update draws negative samples with ``k`` Gibbs steps of the given
    ``chain`` from the mini-batch (``method="cd"``) or from ``n_chains`` persistent chains
    (``method="pcd"``, default ``batch_size`` chains) through :func:`negative_samples`, takes
    the gradient of ``cd_loss`` and applies ``u ← momentum·u − learning_rate·(g + weight_decay·W)``,
    ``θ ← θ + u``. ``cd_loss`` averages over the batch, so ``learning_rate`` is per sample, as
    in scikit-learn. The persistent chains keep hidden states, as scikit-learn's
    ``BernoulliRBM`` does: they start at ``h = 0`` (mean-field chains, which are deterministic,
    at random binary states); each update draws ``v ~ p(v|h)`` (and
    ``k − 1`` further steps) and keeps ``h ~ p(h|v_model)``, drawn with the parameters
    before the update (Tieleman 2008: the chains continue where they stopped).

    The block: with it (the default) the gradient is the CD update. Inside
    ``disable_blocks(BLOCK)``, ``chain="mean_field"`` trains through the chain (the gradient
    also flows back through its ``k`` steps), and ``chain="sampled"`` raises
    :class:`toolkit.BlockNotSwitchableError` (sampling passes no gradient).

    ``callback(step)`` is called at every update with a :class:`CDStep`, before the update is
    applied; if it returns a true value, training stops there (``state.stopped``). After every
    update the gradient (before it is applied) and the parameters (after) are checked: on the
    first value that is not finite training stops, ``state.divergence`` says where, and a
    :class:`~toolkit.algorithms.divergence.DivergenceWarning` is issued once; a state that diverged is not
    trained further (one sum over all parameters at every update; the exact check runs only when
    the sum is not finite). Small problems train on one intra-op thread (:data:`ONE_THREAD_WORK`; the
    setting is restored when training returns). ``state``
    continues a previous run (velocity, persistent chains, counters). The parameters must be
    leaf tensors (e.g. from :func:`init_params`); their ``requires_grad`` flags are restored.

    >>> from toolkit.algorithms.rbm import init_params
    >>> X = torch.tensor([[0., 0., 1., 1.], [1., 1., 0., 0.]] * 4)
    >>> p = init_params(4, 2, generator=torch.Generator().manual_seed(0))
    >>> state = train_cd(p, X, batch_size=4, epochs=3, generator=torch.Generator().manual_seed(0))
    >>> state.n_updates, state.n_epochs
    (6, 3)
    """
    where = "train_cd"
    check_params(where, {"method": method, "k": k, "chain": chain,
                         "learning_rate": learning_rate, "batch_size": batch_size,
                         "epochs": epochs, "momentum": momentum, "weight_decay": weight_decay,
                         "n_chains": n_chains, "shuffle": shuffle, "generator": generator,
                         "callback": callback}, _CONSTRAINTS)
    params = check_rbm_params(params, where)
    for name, p in zip(RBMParams._fields, params):
        if not p.is_leaf or not p.is_floating_point():
            raise ValueError(f"{where}: params.{name} must be a floating leaf tensor (trained "
                             f"in place), got a {'non-leaf' if not p.is_leaf else p.dtype} tensor")
    bad = check_finite(zip(RBMParams._fields, params))
    if bad is not None:
        raise ValueError(f"{where}: params.{bad} must be finite, got inf or nan (a state that "
                         f"diverged cannot be trained further: start again from init_params)")
    check_layer(X, params.weights.shape[1], where, "X")
    if X.device != params.weights.device:
        raise ValueError(f"{where}: X is on {X.device} but the parameters are on "
                         f"{params.weights.device}")
    if X.shape[0] == 0:
        raise ValueError(f"{where}: X must have at least one sample, got 0 (shape "
                         f"{tuple(X.shape)})")
    if not all_finite(X):
        raise ValueError(f"{where}: X contains NaN or infinity; remove or impute those values")
    check_range(where, X)
    if state is not None and not isinstance(state, TrainState):
        raise TypeError(f"{where}: state must be a TrainState or None, got {type(state).__name__}")
    if state is not None and (state.persistent_chain is None) != (method == "cd"):
        raise ValueError(f"{where}: state was made for method="
                         f"{'cd' if state.persistent_chain is None else 'pcd'!r}, got {method!r}")
    settings = TrainSettings(method, k, chain == "mean_field", float(learning_rate),
                             float(momentum), float(weight_decay), where)
    return train_loop(params, X.to(params.weights.dtype), epochs=epochs, batch_size=batch_size,
                      shuffle=shuffle, settings=settings, n_chains=n_chains, state=state,
                      generator=generator, callback=callback)
