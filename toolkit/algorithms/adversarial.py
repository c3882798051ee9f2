"""Adversarial examples (FGSM, PGD) and adversarial training, with the example-generation block.

Adversarial training (Madry et al. 2018) minimises the robust loss

.. math::

    \\min_\\theta \\; \\mathbb{E}_{(x, y)} \\Big[ \\max_{\\|\\delta\\| \\le \\varepsilon,\\;
    x + \\delta \\in [lo, hi]} L(f_\\theta(x + \\delta), y) \\Big].

By Danskin's theorem the gradient of the inner maximum with respect to ``θ`` is the gradient of
``L`` at the maximiser ``x_adv``, which is held fixed. The adversarial example is therefore a
constant for the parameter update, and the attack ends with the module's one block::

    x_adv = stop_gradient(x_adv, name="adversarial.examples")

Inside ``disable_blocks("adversarial.*")`` the same code keeps the graph of every attack step
(``create_graph=True`` for the input gradients), so ``x_adv`` stays a differentiable function of
the parameters and the training gradient also flows through the unrolled attack (second order,
memory growing with ``steps``). With L∞ sign steps that extra gradient is zero almost everywhere
(``sign`` has zero derivative) although its cost is not; with L2 normalised steps it is not zero.

References:
    - I. Goodfellow, J. Shlens, C. Szegedy. Explaining and harnessing adversarial examples.
      ICLR 2015. https://arxiv.org/abs/1412.6572 (FGSM)
    - A. Madry, A. Makelov, L. Schmidt, D. Tsipras, A. Vladu. Towards deep learning models
      resistant to adversarial attacks. ICLR 2018. https://arxiv.org/abs/1706.06083 (PGD, PGD-AT)
    - E. Wong, L. Rice, J. Z. Kolter. Fast is better than free: revisiting adversarial training.
      ICLR 2020. https://arxiv.org/abs/2001.03994 (FGSM with random start, α = 1.25ε,
      catastrophic overfitting)
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from toolkit.core.stop_gradient import is_block_disabled, stop_gradient

__all__ = [
    "METHODS",
    "NORMS",
    "CatastrophicOverfittingWarning",
    "TrainingHistory",
    "adversarial_training",
    "eval_mode",
    "evaluate_robustness",
    "fgsm",
    "pgd",
]

#: Block name: the adversarial examples are constants for the parameter update.
BLOCK = "adversarial.examples"
#: Threat models: ``"linf"`` (sign steps, box projection), ``"l2"`` (normalised steps, ball).
NORMS = ("linf", "l2")
#: Training procedures of :func:`adversarial_training`.
METHODS = ("standard", "pgd", "fgsm_rs", "fgsm")

Bounds = tuple[float, float] | None
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Model = Callable[[torch.Tensor], torch.Tensor]

_TINY = 1e-12


class CatastrophicOverfittingWarning(RuntimeWarning):
    """PGD robust accuracy collapsed between two epochs of single-step adversarial training."""


@contextlib.contextmanager
def eval_mode(model: Model, enabled: bool = True) -> Iterator[Model]:
    """Put ``model`` in eval mode for the ``with`` block, then restore every submodule's flag.

    The ``training`` flag of each submodule is recorded before and written back in ``finally``,
    so mixed modes (e.g. a frozen BatchNorm inside a training network) survive, also when the
    block raises. ``enabled=False`` leaves the modes alone; a plain callable is passed through.

    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    >>> net[1].train(False)
    Dropout(p=0.5, inplace=False)
    >>> with eval_mode(net):
    ...     [m.training for m in net.modules()]
    [False, False, False]
    >>> [m.training for m in net.modules()]
    [True, True, False]
    """
    if not isinstance(model, nn.Module):
        yield model
        return
    modes = [(module, module.training) for module in model.modules()]
    try:
        if enabled:
            model.eval()
        yield model
    finally:
        for module, flag in modes:
            module.training = flag


# ---------------------------------------------------------------------------------------------
# validation


def _check_positive(where: str, arg: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {arg} must be a number > 0, got {type(value).__name__} "
                        f"{value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: {arg} must be > 0, got {value!r}")
    return float(value)


def _check_int(where: str, arg: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {arg} must be an int >= {minimum}, got {value!r}")
    return value


def _check_bounds(where: str, bounds: object) -> Bounds:
    if bounds is None:
        return None
    try:
        lo, hi = (float(b) for b in bounds)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: bounds must be None or a pair (lo, hi) of numbers, "
                         f"got {bounds!r}") from None
    if not lo < hi:
        raise ValueError(f"{where}: bounds must satisfy lo < hi, got {bounds!r}")
    return lo, hi


def _check_data(where: str, x: object, y: object, bounds: Bounds, custom_loss: bool) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim < 1:
        desc = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor)
                else type(x).__name__)
        raise TypeError(f"{where}: x must be a floating-point tensor of shape (n, ...), got {desc}")
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"{where}: y must be a tensor of labels, got {type(y).__name__}")
    n = x.shape[0]
    if y.ndim == 0 or y.shape[0] != n or (not custom_loss and y.ndim != 1):
        raise ValueError(f"{where}: y must have shape ({n},) to match x of shape "
                         f"{tuple(x.shape)}, got {tuple(y.shape)}")
    if bounds is not None and x.numel():
        lo, hi = bounds
        x_min, x_max = float(x.min()), float(x.max())
        if x_min < lo or x_max > hi:
            raise ValueError(f"{where}: x must lie within bounds ({lo}, {hi}), got values in "
                             f"[{x_min:.4g}, {x_max:.4g}]; pass bounds=None for unbounded inputs")


def _check_attack(where: str, x: object, y: object, eps: object, alpha: object, steps: object,
                  norm: object, restarts: object, bounds: object, loss_fn: object
                  ) -> tuple[float, float, Bounds]:
    eps_f = _check_positive(where, "eps", eps)
    alpha_f = _check_positive(where, "alpha", alpha)
    _check_int(where, "steps", steps)
    _check_int(where, "restarts", restarts)
    if norm not in NORMS:
        raise ValueError(f"{where}: norm must be one of {NORMS}, got {norm!r}")
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(f"{where}: loss_fn must be callable (logits, y) -> per-example losses, "
                        f"got {type(loss_fn).__name__}")
    checked = _check_bounds(where, bounds)
    _check_data(where, x, y, checked, loss_fn is not None)
    return eps_f, alpha_f, checked


# ---------------------------------------------------------------------------------------------
# the attack


def _per_example_loss(where: str, model: Model, x: torch.Tensor, y: torch.Tensor,
                      loss_fn: LossFn | None) -> tuple[torch.Tensor, torch.Tensor]:
    logits = model(x)
    if loss_fn is None:
        return F.cross_entropy(logits, y, reduction="none"), logits
    losses = loss_fn(logits, y)
    if not isinstance(losses, torch.Tensor) or losses.shape != (x.shape[0],):
        shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
        raise ValueError(f"{where}: loss_fn must return per-example losses of shape "
                         f"({x.shape[0]},) (use reduction='none'), got {shape}")
    return losses, logits


def _per_example(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape a per-example vector (n,) to broadcast against ``like`` (n, ...)."""
    return v.reshape(-1, *([1] * (like.ndim - 1)))


def _l2(v: torch.Tensor) -> torch.Tensor:
    return v.flatten(1).norm(dim=1) if v.ndim > 1 else v.abs()


def _random_start(x: torch.Tensor, eps: float, norm: str,
                  generator: torch.Generator | None) -> torch.Tensor:
    """A uniform draw from the ε-ball: the L∞ cube, or the L2 ball (direction × radius)."""
    device = generator.device if generator is not None else x.device
    shape = x.shape
    if norm == "linf":
        delta = torch.rand(shape, generator=generator, device=device, dtype=x.dtype) * 2 - 1
    else:
        d = x[0].numel() if x.ndim > 1 else 1
        direction = torch.randn(shape, generator=generator, device=device, dtype=x.dtype)
        radius = torch.rand(shape[0], generator=generator, device=device, dtype=x.dtype) ** (1 / d)
        delta = direction * _per_example(radius / _l2(direction).clamp_min(_TINY), direction)
    return (eps * delta).to(x.device)


def _project_l2(x_adv: torch.Tensor, x: torch.Tensor, eps: float, bounds: Bounds) -> torch.Tensor:
    """Euclidean projection onto the L2 ball {‖x' − x‖₂ ≤ ε}, then clipping to the bounds.

    Clipping moves every coordinate towards ``x`` (which lies inside the bounds), so the result
    stays inside the ball. (The L∞ case is a single clamp onto a box, done in :func:`_run_pgd`.)
    """
    delta = x_adv - x
    scale = (eps / _l2(delta).clamp_min(_TINY)).clamp(max=1.0)
    out = x + delta * _per_example(scale, delta)
    return out if bounds is None else out.clamp(bounds[0], bounds[1])


def _run_pgd(where: str, model: Model, x: torch.Tensor, y: torch.Tensor, eps: float,
             alpha: float, steps: int, norm: str, random_start: bool, targeted: bool,
             loss_fn: LossFn | None, bounds: Bounds, generator: torch.Generator | None,
             keep_graph: bool) -> torch.Tensor:
    """One PGD run. With ``keep_graph`` every step is recorded (create_graph), else none is."""
    sign = -1.0 if targeted else 1.0
    # Without keep_graph the updates run under no_grad: each iterate is a fresh tensor with no
    # history, and only the input gradient of the current step is ever recorded.
    updates = torch.enable_grad() if keep_graph else torch.no_grad()
    with updates:
        x_adv = x + _random_start(x, eps, norm, generator) if random_start else x.clone()
        if random_start and bounds is not None:
            x_adv = x_adv.clamp(bounds[0], bounds[1])
        if norm == "linf":  # the feasible set is a box: [x − ε, x + ε] ∩ [lo, hi]
            box_lo, box_hi = x - eps, x + eps
            if bounds is not None:
                box_lo, box_hi = box_lo.clamp(min=bounds[0]), box_hi.clamp(max=bounds[1])
    for _ in range(steps):
        with torch.enable_grad():
            if not x_adv.requires_grad:
                x_adv.requires_grad_(True)
            losses, _ = _per_example_loss(where, model, x_adv, y, loss_fn)
            (grad,) = torch.autograd.grad(losses.sum(), x_adv, create_graph=keep_graph)
        with updates:
            if norm == "linf":  # x + α sign(g), projected onto the box (one clamp)
                x_adv = torch.add(x_adv, grad.sign(), alpha=sign * alpha).clamp(box_lo, box_hi)
            else:
                # x + α g / ‖g‖₂ (a unit L2 step per example), projected onto the ball
                unit = grad / _per_example(_l2(grad).clamp_min(_TINY), grad)
                x_adv = _project_l2(x_adv + (sign * alpha) * unit, x, eps, bounds)
    return x_adv


def _attack(where: str, model: Model, x: torch.Tensor, y: torch.Tensor, eps: float,
            alpha: float, steps: int, *, norm: str, random_start: bool, restarts: int,
            targeted: bool, loss_fn: LossFn | None, bounds: object,
            generator: torch.Generator | None, use_eval_mode: bool) -> torch.Tensor:
    eps, alpha, checked = _check_attack(where, x, y, eps, alpha, steps, norm, restarts, bounds,
                                        loss_fn)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{where}: generator must be a torch.Generator or None, "
                        f"got {type(generator).__name__}")
    # The same code path serves both variants: the graph of the attack is kept only when the
    # block below is switched off (and someone records gradients at all).
    keep_graph = torch.is_grad_enabled() and is_block_disabled(BLOCK)
    with eval_mode(model, enabled=use_eval_mode):
        best = _run_pgd(where, model, x, y, eps, alpha, steps, norm, random_start, targeted,
                        loss_fn, checked, generator, keep_graph)
        if restarts > 1:
            # Per example keep the worst case: a successful attack first, then the higher
            # objective (the loss, or minus the loss towards the target when targeted).
            best_success, best_objective = _score(where, model, best, y, loss_fn, targeted)
            for _ in range(restarts - 1):
                candidate = _run_pgd(where, model, x, y, eps, alpha, steps, norm, random_start,
                                     targeted, loss_fn, checked, generator, keep_graph)
                success, objective = _score(where, model, candidate, y, loss_fn, targeted)
                better = (success & ~best_success) | (
                    (success == best_success) & (objective > best_objective))
                best = torch.where(_per_example(better, best), candidate, best)
                best_success = best_success | success
                best_objective = torch.where(better, objective, best_objective)
    # Danskin: the inner maximiser is a constant for the parameter update. Switched off, the
    # tensor returned still carries the unrolled attack (create_graph above) and the training
    # gradient flows through every step of it.
    x_adv = stop_gradient(best, name="adversarial.examples")
    return x_adv


@torch.no_grad()
def _score(where: str, model: Model, x_adv: torch.Tensor, y: torch.Tensor,
           loss_fn: LossFn | None, targeted: bool) -> tuple[torch.Tensor, torch.Tensor]:
    losses, logits = _per_example_loss(where, model, x_adv, y, loss_fn)
    if targeted:
        return logits.argmax(-1) == y, -losses
    return logits.argmax(-1) != y, losses


def pgd(
    model: Model,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    alpha: float,
    steps: int,
    *,
    norm: str = "linf",
    random_start: bool = True,
    restarts: int = 1,
    targeted: bool = False,
    loss_fn: LossFn | None = None,
    bounds: Bounds = (0.0, 1.0),
    generator: torch.Generator | None = None,
    use_eval_mode: bool = True,
) -> torch.Tensor:
    """Projected gradient descent attack (Madry et al. 2018), L∞ or L2, with restarts.

    Starting from ``x`` (or a uniform draw from the ε-ball around it), each step ascends the
    per-example loss and projects back:

    .. math::

        x_{t+1} = \\Pi_{B_\\varepsilon(x) \\cap [lo, hi]}\\big(x_t + \\alpha\\, s_t\\big),\\quad
        s_t = \\operatorname{sign}(\\nabla_x L) \\;(L_\\infty) \\text{ or }
        \\nabla_x L / \\|\\nabla_x L\\|_2 \\;(L_2).

    Gradients are taken with respect to the input only (``torch.autograd.grad``), so the
    parameters' ``.grad`` is never touched. With ``restarts > 1`` each example keeps the worst
    case over the runs: a successful attack first, then the highest loss. The result passes
    through the block ``"adversarial.examples"``; inside ``disable_blocks("adversarial.*")`` the
    attack is recorded with ``create_graph=True`` and the returned tensor is a differentiable
    function of the parameters (only when gradients are enabled at the call).

    Args:
        model: maps ``x`` (n, ...) to logits (n, n_classes); any callable.
        x: clean inputs (n, ...), inside ``bounds``.
        y: labels (n,); the *target* labels when ``targeted``.
        eps: radius of the ball, > 0.
        alpha: step size, > 0 (Madry et al. use ``2.5 * eps / steps``).
        steps: number of steps, >= 1.
        norm: ``"linf"`` or ``"l2"``.
        random_start: start from a uniform point of the ε-ball (L∞ cube or L2 ball).
        restarts: number of runs (each with its own random start).
        targeted: descend the loss towards ``y`` instead of ascending it away from ``y``.
        loss_fn: ``(logits, y) -> losses (n,)``; default cross-entropy.
        bounds: valid input range ``(lo, hi)``, or ``None`` for unbounded inputs.
        generator: source of the random starts.
        use_eval_mode: run the model in eval mode (see :func:`eval_mode`); ``False`` keeps the
            current modes (e.g. to attack a network in training mode).

    Returns:
        ``x_adv`` with the shape and dtype of ``x``; ``‖x_adv − x‖ ≤ eps`` and inside ``bounds``.

    >>> import torch
    >>> from torch import nn
    >>> net = nn.Linear(4, 3)
    >>> x, y = torch.rand(5, 4), torch.tensor([0, 1, 2, 0, 1])
    >>> x_adv = pgd(net, x, y, eps=0.1, alpha=0.05, steps=5, generator=torch.Generator().manual_seed(0))
    >>> bool(((x_adv - x).abs() <= 0.1 + 1e-6).all()), net.weight.grad is None
    (True, True)
    """
    return _attack("pgd", model, x, y, eps, alpha, steps, norm=norm, random_start=random_start,
                   restarts=restarts, targeted=targeted, loss_fn=loss_fn, bounds=bounds,
                   generator=generator, use_eval_mode=use_eval_mode)


def fgsm(
    model: Model,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    *,
    targeted: bool = False,
    loss_fn: LossFn | None = None,
    bounds: Bounds = (0.0, 1.0),
    norm: str = "linf",
    use_eval_mode: bool = True,
) -> torch.Tensor:
    """Fast gradient sign method (Goodfellow et al. 2015): one step of size ``eps`` from ``x``.

    .. math::  x_{adv} = \\operatorname{clip}_{[lo, hi]}\\big(x + \\varepsilon\\,
               \\operatorname{sign}(\\nabla_x L(f(x), y))\\big)

    (``norm="l2"``: the step ``ε ∇L / ‖∇L‖₂``, the fast gradient method.) It is :func:`pgd` with
    ``steps=1``, ``alpha=eps`` and no random start, and shares its block, mode handling and
    checks; ``targeted`` steps down the loss towards ``y``.

    >>> import torch
    >>> from torch import nn
    >>> net = nn.Linear(2, 2)
    >>> x = torch.full((1, 2), 0.5)
    >>> bool(((fgsm(net, x, torch.tensor([0]), eps=0.25) - x).abs() == 0.25).all())
    True
    """
    return _attack("fgsm", model, x, y, eps, eps, 1, norm=norm, random_start=False, restarts=1,
                   targeted=targeted, loss_fn=loss_fn, bounds=bounds, generator=None,
                   use_eval_mode=use_eval_mode)


# ---------------------------------------------------------------------------------------------
# evaluation and training


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


def _device_of(model: Model) -> torch.device | None:
    if isinstance(model, nn.Module):
        for p in model.parameters():
            return p.device
    return None


@torch.no_grad()
def _predict(model: Model, x: torch.Tensor) -> torch.Tensor:
    with eval_mode(model):
        return model(x).argmax(-1)


Attack = Callable[[Model, torch.Tensor, torch.Tensor], torch.Tensor]


def evaluate_robustness(model: Model, data: Sequence[torch.Tensor], attacks: Mapping[str, Attack],
                        *, batch_size: int = 512) -> dict[str, float]:
    """Clean accuracy and accuracy under each attack; ``"worst_case"``: right under all of them.

    Each attack is a callable ``attack(model, x, y) -> x_adv``, e.g.
    ``functools.partial(pgd, eps=0.1, alpha=0.01, steps=40)``. Predictions use eval mode. The
    attacks are called under ``torch.no_grad()``, so :func:`pgd` and :func:`fgsm` never keep a
    graph here (they switch gradients on for their input gradients themselves); other attacks
    must do the same.

    >>> import functools, torch
    >>> from torch import nn
    >>> net = nn.Linear(2, 2)
    >>> data = (torch.rand(8, 2), torch.randint(0, 2, (8,)))
    >>> acc = evaluate_robustness(net, data, {"fgsm": functools.partial(fgsm, eps=0.1)})
    >>> sorted(acc), acc["fgsm"] <= acc["clean"]
    (['clean', 'fgsm', 'worst_case'], True)
    """
    X, y = _as_data("evaluate_robustness", "data", data)
    _check_int("evaluate_robustness", "batch_size", batch_size)
    if not isinstance(attacks, Mapping):
        raise TypeError(f"evaluate_robustness: attacks must be a dict name -> attack(model, x, y), "
                        f"got {type(attacks).__name__}")
    for name in ("clean", "worst_case"):
        if name in attacks:
            raise ValueError(f"evaluate_robustness: attack name {name!r} is reserved")
    device = _device_of(model)
    correct = {name: 0 for name in ("clean", *attacks)}
    worst = 0
    for start in range(0, X.shape[0], batch_size):
        xb, yb = X[start:start + batch_size], y[start:start + batch_size]
        if device is not None:
            xb, yb = xb.to(device), yb.to(device)
        right = _predict(model, xb) == yb
        correct["clean"] += int(right.sum())
        all_right = right
        for name, attack in attacks.items():
            with torch.no_grad():
                x_adv = attack(model, xb, yb)
            right = _predict(model, x_adv) == yb
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

    - ``"pgd"`` (Madry et al. 2018): :func:`pgd` with ``steps`` (default 10), ``alpha``
      (default ``2.5 eps / steps``) and a random start;
    - ``"fgsm_rs"`` (Wong et al. 2020): one step of ``alpha = 1.25 eps`` from a random start;
    - ``"fgsm"`` (Goodfellow et al. 2015): one step of ``eps`` from ``x``;
    - ``"standard"``: the clean batch (the baseline).

    The examples pass the block ``"adversarial.examples"``; call this inside
    ``disable_blocks("adversarial.*")`` to also backpropagate through the attack.

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
        eps, alpha, steps, norm, bounds, loss_fn: the training attack (see :func:`pgd`).
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
    if method not in METHODS:
        raise ValueError(f"{where}: method must be one of {METHODS}, got {method!r}")
    _check_int(where, "epochs", epochs)
    _check_int(where, "batch_size", batch_size)
    _check_int(where, "check_size", check_size)
    _check_int(where, "check_steps", check_steps)
    eps = _check_positive(where, "eps", eps)
    if alpha is not None:
        _check_positive(where, "alpha", alpha)
    if steps is not None:
        _check_int(where, "steps", steps)
    if norm not in NORMS:
        raise ValueError(f"{where}: norm must be one of {NORMS}, got {norm!r}")
    _check_positive(where, "co_drop", co_drop)
    checked_bounds = _check_bounds(where, bounds)
    X, y = _as_data(where, "data", data)
    Xc, yc = (X[:check_size], y[:check_size]) if check_data is None else _as_data(
        where, "check_data", check_data)
    _check_data(where, X, y, checked_bounds, loss_fn is not None)
    alpha_m, steps_m, random_start = _training_attack(method, eps, alpha, steps)
    device = _device_of(model)
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
            losses, logits = _per_example_loss(where, model, xb, yb, loss_fn)
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
        check = _pgd_check(eps, check_steps, norm, checked_bounds,
                           torch.Generator().manual_seed(0))
        acc = evaluate_robustness(model, (Xc, yc), {"pgd": check})
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


def _pgd_check(eps: float, steps: int, norm: str, bounds: Bounds,
                generator: torch.Generator | None) -> Attack:
    """The check attack of :func:`adversarial_training`: PGD with ``alpha = 2.5 eps / steps``."""
    def attack(model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return pgd(model, x, y, eps, 2.5 * eps / steps, steps, norm=norm, bounds=bounds,
                   generator=generator)
    return attack
