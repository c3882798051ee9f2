"""Adversarial training and robustness evaluation on top of the attacks.

:func:`adversarial_training` fits a classifier to adversarial examples (PGD-AT, Fast-FGSM with a
random start, FGSM, or none) and watches for catastrophic overfitting; :func:`evaluate_robustness`
scores a model clean and under attacks. The examples come from :func:`~.attacks.pgd`, so they
pass the package's block ``"adversarial.examples"``: call either function inside
``disable_blocks("adversarial.examples")`` to also backpropagate through the attack.

References:
    - A. Madry, A. Makelov, L. Schmidt, D. Tsipras, A. Vladu. Towards deep learning models
      resistant to adversarial attacks. ICLR 2018. https://arxiv.org/abs/1706.06083 (PGD-AT)
    - E. Wong, L. Rice, J. Z. Kolter. Fast is better than free: revisiting adversarial training.
      ICLR 2020. https://arxiv.org/abs/2001.03994 (FGSM with random start, α = 1.25ε,
      catastrophic overfitting)
    - I. Goodfellow, J. Shlens, C. Szegedy. Explaining and harnessing adversarial examples.
      ICLR 2015. https://arxiv.org/abs/1412.6572 (FGSM training)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

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
from toolkit.algorithms.adversarial.attacks import (
    NORMS,
    LossFn,
    Objective,
    eval_logits,
    pgd,
    predict,
    run_attack,
)
from toolkit.algorithms.adversarial.batches import (
    Batch,
    Batches,
    Bounds,
    Model,
    check_bounds,
    check_inputs,
    check_labels,
    check_logits,
    check_model,
)
from toolkit.algorithms.divergence import Divergence, UpdateCheck

__all__ = [
    "METHODS",
    "CatastrophicOverfittingWarning",
    "TrainingHistory",
    "adversarial_training",
    "evaluate_robustness",
]

#: Training procedures of :func:`adversarial_training`.
METHODS = ("standard", "pgd", "fgsm_rs", "fgsm")

Attack = Callable[[Model, torch.Tensor, torch.Tensor], torch.Tensor]
#: Training or evaluation data: a DataLoader, an iterable of (x, y) batches, a map-style
#: Dataset, or an (X, y) pair of tensors or arrays.
Data = Iterable[Any] | Dataset | Sequence[Any]

_TRAINING_ARGS = {
    "model": [Instance(nn.Module, name="an nn.Module (training sets its modes and steps its "
                                       "parameters)")],
    "optimizer": [Instance(torch.optim.Optimizer, name="a torch.optim.Optimizer over the "
                                                      "model's parameters")],
    "method": [Options(*METHODS)],
    "epochs": [Integer(1)],
    "eps": [Real(0, closed="neither")],
    "alpha": [None, Real(0, closed="neither")],
    "steps": [None, Integer(1)],
    "norm": [Options(*NORMS)],
    "batch_size": [Integer(1)],
    "loss_fn": [None, Callable_],
    "check_size": [Integer(1)],
    "check_steps": [Integer(1)],
    "co_drop": [Real(0, closed="neither")],
    "stop_on_overfitting": [Bool],
    "generator": [None, Generator],
    "callback": [None, Callable_],
}


class CatastrophicOverfittingWarning(RuntimeWarning):
    """PGD robust accuracy collapsed between two epochs of single-step adversarial training."""


def _check_set(where: str, check_data: Data, model: Model, bounds: Bounds, custom_loss: bool
               ) -> Batch:
    """``check_data`` of any kind as one validated pair on the model's device."""
    source = Batches(where, "check_data", check_data, model=model, batch_size=512)
    if source.pair is not None:
        X, y = source.pair
    else:
        parts = list(source)
        if not parts:
            raise ValueError(f"{where}: check_data must hold at least one example, got none")
        X, y = torch.cat([x for x, _ in parts]), torch.cat([t for _, t in parts])
    check_inputs(where, X, y, bounds, custom_loss)
    return X, y


def evaluate_robustness(model: Model, data: Data, attacks: Mapping[str, Attack], *,
                        batch_size: int = 512) -> dict[str, float]:
    """Clean accuracy and accuracy under each attack; ``"worst_case"``: right under all of them.

    Each attack is a callable ``attack(model, x, y) -> x_adv``, e.g.
    ``functools.partial(pgd, eps=0.1, alpha=0.01, steps=40)``. Predictions use eval mode
    (:func:`~.attacks.predict`). The attacks are called under ``torch.no_grad()``, so
    :func:`~.attacks.pgd` and :func:`~.attacks.fgsm` never keep a graph here (they switch
    gradients on for their input gradients themselves); other attacks must do the same.

    ``data`` is a ``DataLoader``, any iterable of ``(x, y)`` batches (one pass, so a generator
    works), a map-style ``Dataset`` or an ``(X, y)`` pair; the last two are cut into batches of
    ``batch_size`` in storage order. Batches move to the model's device. NaN or infinite inputs
    and labels outside ``[0, n_classes)`` are errors (see :mod:`~.batches`).

    >>> import functools, torch
    >>> from torch import nn
    >>> from toolkit.algorithms.adversarial import fgsm
    >>> net = nn.Linear(2, 2)
    >>> data = (torch.rand(8, 2), torch.randint(0, 2, (8,)))
    >>> acc = evaluate_robustness(net, data, {"fgsm": functools.partial(fgsm, eps=0.1)})
    >>> sorted(acc), acc["fgsm"] <= acc["clean"]
    (['clean', 'fgsm', 'worst_case'], True)
    """
    where = "evaluate_robustness"
    check_model(where, model)
    check(where, "batch_size", batch_size, [Integer(1)])
    check(where, "attacks", attacks, [Instance(Mapping, name="a dict name -> attack(model, x, y)")])
    for name in ("clean", "worst_case"):
        if name in attacks:
            raise ValueError(f"{where}: attack name {name!r} is reserved")
    batches = Batches(where, "data", data, model=model, batch_size=batch_size)
    correct = {name: 0 for name in ("clean", *attacks)}
    worst = n = 0
    for xb, yb in batches:
        check_inputs(where, xb, yb, None, False)
        if not len(yb):
            continue   # an empty batch holds no example to predict (and no shape to check)
        logits = check_logits(where, eval_logits(model, xb), len(xb), False)
        check_labels(where, yb, logits)
        right = logits.argmax(-1) == yb
        correct["clean"] += int(right.sum())
        all_right = right
        for name, attack in attacks.items():
            with torch.no_grad():
                x_adv = attack(model, xb, yb)
            right = predict(model, x_adv) == yb
            correct[name] += int(right.sum())
            all_right = all_right & right
        worst += int(all_right.sum())
        n += len(yb)
    if n == 0:
        raise ValueError(f"{where}: data must hold at least one example, got none")
    out = {name: c / n for name, c in correct.items()}
    out["worst_case"] = worst / n
    return out


@dataclass
class TrainingHistory:
    """Per-epoch record of :func:`adversarial_training` (lists indexed by epoch).

    ``loss``/``train_acc``: mean loss and accuracy on the training inputs the model was fitted to
    (adversarial ones unless ``method="standard"``); ``clean_acc``/``robust_acc``: accuracy of
    the check batch, clean and under a PGD attack; ``seconds``: wall time of the epoch's
    training (the check excluded); ``catastrophic_overfitting``: the PGD robust accuracy
    dropped by more than ``co_drop`` since the previous epoch; ``divergence``: where training
    stopped because a value became non-finite (:class:`~toolkit.algorithms.divergence.Divergence`; the
    lists then hold the epochs completed before it), ``None`` while everything is finite.
    """

    method: str
    eps: float
    alpha: float
    steps: int
    epoch: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    clean_acc: list[float] = field(default_factory=list)
    robust_acc: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    catastrophic_overfitting: list[bool] = field(default_factory=list)
    stopped_early: bool = False
    divergence: Divergence | None = None

    @property
    def overfitting_epoch(self) -> int | None:
        """First epoch flagged as catastrophic overfitting, or ``None``."""
        for epoch, flag in zip(self.epoch, self.catastrophic_overfitting):
            if flag:
                return epoch
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the settings and per-epoch lists."""
        out = dict(self.__dict__)
        out["overfitting_epoch"] = self.overfitting_epoch
        out["divergence"] = None if self.divergence is None else self.divergence.as_dict()
        return out


def _training_attack(method: str, eps: float, alpha: float | None, steps: int | None
                     ) -> tuple[float, int, bool]:
    """(alpha, steps, random_start) of each method, with the papers' defaults."""
    if method == "pgd":
        steps = 10 if steps is None else steps
        return (2.5 * eps / steps if alpha is None else alpha), steps, True
    if method == "fgsm_rs":  # Wong et al. 2020: alpha = 1.25 eps, one step, random start
        return (1.25 * eps if alpha is None else alpha), 1 if steps is None else steps, True
    if method == "fgsm":  # Goodfellow et al. 2015: one step of size eps from x
        return (eps if alpha is None else alpha), 1 if steps is None else steps, False
    return (eps if alpha is None else alpha), 0, False  # standard training: no attack


def _pgd_check(eps: float, steps: int, norm: str, bounds: Bounds,
               generator: torch.Generator | None) -> Attack:
    """The check attack of :func:`adversarial_training`: PGD with ``alpha = 2.5 eps / steps``."""
    def attack(model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return pgd(model, x, y, eps, 2.5 * eps / steps, steps, norm=norm, bounds=bounds,
                   generator=generator)
    return attack


def adversarial_training(
    model: nn.Module,
    data: Data,
    optimizer: torch.optim.Optimizer,
    *,
    method: str = "pgd",
    epochs: int = 10,
    eps: float = 0.1,
    alpha: float | None = None,
    steps: int | None = None,
    norm: str = "linf",
    batch_size: int = 128,
    bounds: Bounds = (0.0, 1.0),
    loss_fn: LossFn | None = None,
    check_data: Data | None = None,
    check_size: int = 256,
    check_steps: int = 10,
    co_drop: float = 0.2,
    stop_on_overfitting: bool = False,
    generator: torch.Generator | None = None,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainingHistory:
    """Train ``model`` on adversarial examples: PGD-AT, Fast-FGSM (random start), FGSM, or none.

    Each minibatch ``(x, y)`` is replaced by ``x_adv`` from the method's attack (run in eval
    mode, then the model is back in training mode) and the optimizer takes one step on
    ``mean L(f(x_adv), y)``:

    - ``"pgd"`` (Madry et al. 2018): :func:`~.attacks.pgd` with ``steps`` (default 10),
      ``alpha`` (default ``2.5 eps / steps``) and a random start;
    - ``"fgsm_rs"`` (Wong et al. 2020): one step of ``alpha = 1.25 eps`` from a random start;
    - ``"fgsm"`` (Goodfellow et al. 2015): one step of ``eps`` from ``x``;
    - ``"standard"``: the clean batch (the baseline).

    The examples pass the block ``"adversarial.examples"``; call this inside
    ``disable_blocks("adversarial.examples")`` to also backpropagate through the attack.

    After every epoch the check batch (``check_data``, default the first ``check_size`` training
    examples: in storage order for a pair or a ``Dataset``, else the first ones the first epoch
    draws) is scored clean and under PGD (``check_steps`` steps, ``alpha = 2.5 eps /
    check_steps``, random start from a generator seeded with 0 every epoch). If the robust
    accuracy falls by more than ``co_drop`` from the previous epoch the epoch is flagged as
    catastrophic overfitting (Wong et al. 2020) and a :class:`CatastrophicOverfittingWarning` is
    issued; with ``stop_on_overfitting`` training stops and the parameters of the previous epoch
    are restored.

    Divergence: at every update the adversarial examples, the loss and the gradients are checked
    before the optimizer step and the parameters after it. On the first value that is not
    finite training stops there (nothing non-finite is applied; a step that overflows a
    parameter is the last one), ``history.divergence`` says where and a
    :class:`~toolkit.algorithms.divergence.DivergenceWarning` is issued once; the history keeps the epochs
    completed before it, and the model the parameters it has (non-finite only when the last
    step overflowed one). The attack's own steps need no check of their own: non-finite
    examples are caught here (an L2 step normalises a non-finite input gradient to NaN, which
    stays NaN through every later step and the projection), and finite ones are where the
    checked loss is computed. Parameters that are not finite before training are an error.

    Args:
        model: the classifier (n, ...) -> logits; trained in place.
        data: a ``DataLoader``, any re-iterable of ``(x, y)`` batches (a list of pairs; a
            one-shot iterator such as a generator only with ``epochs=1``, else ``TypeError``), a
            map-style ``Dataset`` (e.g. ``TensorDataset``) or an ``(X, y)`` pair of tensors or
            arrays (e.g. a ``toolkit.lab.data.Dataset``). A ``Dataset`` or a pair is batched with
            ``batch_size`` in an order drawn from ``generator`` every epoch; a loader keeps its
            own batches and order. Batches move to the model's device (see :mod:`~.batches`).
        optimizer: optimizer over ``model``'s parameters.
        method: one of :data:`METHODS`.
        epochs: passes over the data, >= 1.
        eps, alpha, steps, norm, bounds, loss_fn: the training attack (see
            :func:`~.attacks.pgd`).
        batch_size: minibatch size, >= 1 (for a ``Dataset`` or a pair).
        check_data, check_size, check_steps: the per-epoch robustness check; ``check_data`` may
            be of any kind ``data`` may, and is read once.
        co_drop: robust-accuracy drop between epochs flagged as catastrophic overfitting.
        stop_on_overfitting: stop at the first flag and restore the previous epoch's parameters.
        generator: shuffling and random starts (same generator state → same run).
        callback: called as ``callback(epoch, record)`` after each epoch with that epoch's numbers.

    Returns:
        a :class:`TrainingHistory`.

    Raises:
        ValueError: NaN or infinite inputs or parameters, a negative label or a label
            ``>= n_classes`` (found in the batch where it occurs, at the model call), inputs
            outside ``bounds``.

    Example, with a ``DataLoader``:

    >>> import torch
    >>> from torch import nn
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> g = torch.Generator().manual_seed(0)
    >>> X, y = torch.rand(64, 4, generator=g), torch.randint(0, 3, (64,), generator=g)
    >>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    >>> loader = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True, generator=g)
    >>> history = adversarial_training(model, loader, torch.optim.Adam(model.parameters()),
    ...                                epochs=2, eps=8 / 255, generator=g)
    >>> history.epoch
    [0, 1]
    """
    where = "adversarial_training"
    check_params(where, {
        "model": model, "optimizer": optimizer, "method": method, "epochs": epochs, "eps": eps, "alpha": alpha, "steps": steps,
        "norm": norm, "batch_size": batch_size, "loss_fn": loss_fn, "check_size": check_size,
        "check_steps": check_steps, "co_drop": co_drop, "stop_on_overfitting": stop_on_overfitting,
        "generator": generator, "callback": callback}, _TRAINING_ARGS)
    checked_bounds = check_bounds(where, bounds)
    custom_loss = loss_fn is not None
    batches = Batches(where, "data", data, model=model, batch_size=batch_size, shuffle=True,
                      generator=generator, passes=epochs)
    if batches.pair is not None:  # checked once; other kinds batch by batch
        check_inputs(where, *batches.pair, checked_bounds, custom_loss)
    check_set = (_check_set(where, check_data, model, checked_bounds, custom_loss)
                 if check_data is not None else batches.head(check_size))
    alpha_m, steps_m, random_start = _training_attack(method, eps, alpha, steps)

    history = TrainingHistory(method, eps, alpha_m, steps_m)
    finite = UpdateCheck.for_module(where, model)
    finite.check_start()
    previous: dict[str, torch.Tensor] | None = None
    for epoch in range(epochs):
        if stop_on_overfitting:
            with torch.no_grad():
                previous = {k: v.clone() for k, v in model.state_dict().items()}
        model.train()
        start = time.perf_counter()
        total_loss = total_right = 0.0
        n = 0
        first: list[Batch] = []  # the default check set of an iterable: the first examples
        for xb, yb in batches:
            if batches.pair is None:
                check_inputs(where, xb, yb, checked_bounds, custom_loss)
            if check_set is None and sum(len(t) for _, t in first) < check_size:
                first.append((xb, yb))
            if method != "standard":  # pgd, with errors (labels, bounds) naming this function
                xb = run_attack(where, model, xb, yb, eps=eps, alpha=alpha_m, steps=steps_m,
                                norm=norm, random_start=random_start, restarts=1,
                                targeted=False, loss_fn=loss_fn, bounds=checked_bounds,
                                generator=generator, use_eval_mode=True)
            losses, logits = Objective(where, model, yb, loss_fn)(xb)
            if epoch == 0 and n == 0:  # the first model call: check every label known so far
                for known in (batches.pair, check_set):
                    if known is not None:
                        check_labels(where, known[1], logits)
            loss = losses.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # the examples, the loss and the gradients before the step, the parameters after
            examples = (("adversarial examples", xb),) if method != "standard" else ()
            if finite.step(optimizer, *examples, ("loss", loss), epoch=epoch):  # stop here: the epoch is not completed, nothing more is applied
                history.divergence = finite.divergence
                return history
            total_loss += loss.item() * len(yb)
            total_right += float((logits.argmax(-1) == yb).sum())
            n += len(yb)
        seconds = time.perf_counter() - start
        if n == 0:
            raise ValueError(f"{where}: data must hold at least one example, got none in epoch "
                             f"{epoch}")
        if check_set is None:
            check_set = (torch.cat([x for x, _ in first])[:check_size],
                         torch.cat([t for _, t in first])[:check_size])

        # The check draws its random starts from its own generator, re-seeded every epoch: the
        # epochs are compared on the same attack, and the training randomness does not depend
        # on the check's settings.
        check_attack = _pgd_check(eps, check_steps, norm, checked_bounds,
                                  torch.Generator().manual_seed(0))
        acc = evaluate_robustness(model, check_set, {"pgd": check_attack})
        overfit = bool(history.robust_acc and acc["pgd"] < history.robust_acc[-1] - co_drop)
        record = {"epoch": epoch, "loss": total_loss / n, "train_acc": total_right / n,
                  "clean_acc": acc["clean"], "robust_acc": acc["pgd"], "seconds": seconds,
                  "catastrophic_overfitting": overfit}
        for key, value in record.items():
            getattr(history, key).append(value)
        if callback is not None:
            callback(epoch, record)
        if overfit:
            warnings.warn(
                f"{where}: catastrophic overfitting at epoch {epoch} ({method}): PGD robust "
                f"accuracy fell from {history.robust_acc[-2]:.3f} to {acc['pgd']:.3f}; use "
                f"method='pgd', a smaller alpha, or stop_on_overfitting=True",
                CatastrophicOverfittingWarning, stacklevel=2)
            if stop_on_overfitting and previous is not None:
                model.load_state_dict(previous)
                history.stopped_early = True
                break
    return history
