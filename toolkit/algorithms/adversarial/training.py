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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from toolkit._validation import (
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
    Bounds,
    LossFn,
    Model,
    Objective,
    check_bounds,
    check_inputs,
    model_device,
    pgd,
    predict,
)

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

_TRAINING_ARGS = {
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


def _as_data(where: str, arg: str, data: object) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(data, Sequence) or len(data) != 2 or not all(
            isinstance(t, torch.Tensor) for t in data):
        raise TypeError(f"{where}: {arg} must be a pair (X, y) of tensors (e.g. a "
                        f"toolkit.data.Dataset), got {type(data).__name__}")
    X, y = data
    if X.ndim < 1 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(f"{where}: {arg} must hold X (n, ...) and y (n,) with n >= 1, got "
                         f"{tuple(X.shape)} and {tuple(y.shape)}")
    return X, y


def evaluate_robustness(model: Model, data: Sequence[torch.Tensor], attacks: Mapping[str, Attack],
                        *, batch_size: int = 512) -> dict[str, float]:
    """Clean accuracy and accuracy under each attack; ``"worst_case"``: right under all of them.

    Each attack is a callable ``attack(model, x, y) -> x_adv``, e.g.
    ``functools.partial(pgd, eps=0.1, alpha=0.01, steps=40)``. Predictions use eval mode
    (:func:`~.attacks.predict`). The attacks are called under ``torch.no_grad()``, so
    :func:`~.attacks.pgd` and :func:`~.attacks.fgsm` never keep a graph here (they switch
    gradients on for their input gradients themselves); other attacks must do the same.

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
    X, y = _as_data(where, "data", data)
    check(where, "batch_size", batch_size, [Integer(1)])
    check(where, "attacks", attacks, [Instance(Mapping, name="a dict name -> attack(model, x, y)")])
    for name in ("clean", "worst_case"):
        if name in attacks:
            raise ValueError(f"{where}: attack name {name!r} is reserved")
    device = model_device(model)
    correct = {name: 0 for name in ("clean", *attacks)}
    worst = 0
    for start in range(0, X.shape[0], batch_size):
        xb, yb = X[start:start + batch_size], y[start:start + batch_size]
        if device is not None:
            xb, yb = xb.to(device), yb.to(device)
        right = predict(model, xb) == yb
        correct["clean"] += int(right.sum())
        all_right = right
        for name, attack in attacks.items():
            with torch.no_grad():
                x_adv = attack(model, xb, yb)
            right = predict(model, x_adv) == yb
            correct[name] += int(right.sum())
            all_right = all_right & right
        worst += int(all_right.sum())
    n = X.shape[0]
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
    dropped by more than ``co_drop`` since the previous epoch.
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
    data: Sequence[torch.Tensor],
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
    check_data: Sequence[torch.Tensor] | None = None,
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
    examples) is scored clean and under PGD (``check_steps`` steps, ``alpha = 2.5 eps /
    check_steps``, random start from a generator seeded with 0 every epoch). If the robust
    accuracy falls by more than ``co_drop`` from the previous epoch the epoch is flagged as
    catastrophic overfitting (Wong et al. 2020) and a :class:`CatastrophicOverfittingWarning` is
    issued; with ``stop_on_overfitting`` training stops and the parameters of the previous epoch
    are restored.

    Args:
        model: the classifier (n, ...) -> logits; trained in place.
        data: training pair ``(X, y)`` (e.g. a ``toolkit.data.Dataset``).
        optimizer: optimizer over ``model``'s parameters.
        method: one of :data:`METHODS`.
        epochs: passes over the data, >= 1.
        eps, alpha, steps, norm, bounds, loss_fn: the training attack (see
            :func:`~.attacks.pgd`).
        batch_size: minibatch size, >= 1.
        check_data, check_size, check_steps: the per-epoch robustness check.
        co_drop: robust-accuracy drop between epochs flagged as catastrophic overfitting.
        stop_on_overfitting: stop at the first flag and restore the previous epoch's parameters.
        generator: shuffling and random starts (same generator state → same run).
        callback: called as ``callback(epoch, record)`` after each epoch with that epoch's numbers.

    Returns:
        a :class:`TrainingHistory`.
    """
    where = "adversarial_training"
    check_params(where, {
        "method": method, "epochs": epochs, "eps": eps, "alpha": alpha, "steps": steps,
        "norm": norm, "batch_size": batch_size, "loss_fn": loss_fn, "check_size": check_size,
        "check_steps": check_steps, "co_drop": co_drop, "stop_on_overfitting": stop_on_overfitting,
        "generator": generator, "callback": callback}, _TRAINING_ARGS)
    checked_bounds = check_bounds(where, bounds)
    X, y = _as_data(where, "data", data)
    Xc, yc = (X[:check_size], y[:check_size]) if check_data is None else _as_data(
        where, "check_data", check_data)
    check_inputs(where, X, y, checked_bounds, loss_fn is not None)
    alpha_m, steps_m, random_start = _training_attack(method, eps, alpha, steps)
    device = model_device(model)
    if device is not None:
        X, y, Xc, yc = X.to(device), y.to(device), Xc.to(device), yc.to(device)

    history = TrainingHistory(method, eps, alpha_m, steps_m)
    previous: dict[str, torch.Tensor] | None = None
    n = X.shape[0]
    for epoch in range(epochs):
        if stop_on_overfitting:
            with torch.no_grad():
                previous = {k: v.clone() for k, v in model.state_dict().items()}
        model.train()
        start = time.perf_counter()
        total_loss = total_right = 0.0
        order = torch.randperm(n, generator=generator).to(X.device)
        for i in range(0, n, batch_size):
            idx = order[i:i + batch_size]
            xb, yb = X[idx], y[idx]
            if method != "standard":
                xb = pgd(model, xb, yb, eps, alpha_m, steps_m, norm=norm,
                         random_start=random_start, loss_fn=loss_fn, bounds=checked_bounds,
                         generator=generator)
            losses, logits = Objective(where, model, yb, loss_fn)(xb)
            loss = losses.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(idx)
            total_right += float((logits.argmax(-1) == yb).sum())
        seconds = time.perf_counter() - start

        # The check draws its random starts from its own generator, re-seeded every epoch: the
        # epochs are compared on the same attack, and the training randomness does not depend
        # on the check's settings.
        check_attack = _pgd_check(eps, check_steps, norm, checked_bounds,
                                  torch.Generator().manual_seed(0))
        acc = evaluate_robustness(model, (Xc, yc), {"pgd": check_attack})
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
