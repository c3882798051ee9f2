"""Adversarial examples (FGSM, PGD): the functional core and the package's one block.

Adversarial training (Madry et al. 2018) minimises the robust loss

.. math::

    \\min_\\theta \\; \\mathbb{E}_{(x, y)} \\Big[ \\max_{\\|\\delta\\| \\le \\varepsilon,\\;
    x + \\delta \\in [lo, hi]} L(f_\\theta(x + \\delta), y) \\Big].

By Danskin's theorem the gradient of the inner maximum with respect to ``θ`` is the gradient of
``L`` at the maximiser ``x_adv``, which is held fixed. The adversarial example is therefore a
constant for the parameter update, and the attack is computed as one::

    x_adv = as_constant(<the attack>, model, x, y, ..., name=BLOCK)

With the block active the attack runs under ``no_grad`` (only each step's input gradient is
recorded, then thrown away) and ``x_adv`` comes back cut. Inside
``disable_blocks("adversarial.examples")`` the attack runs in the caller's grad mode: it reads
``torch.is_grad_enabled()`` and asks autograd for ``create_graph=True``, so ``x_adv`` stays a
differentiable function of the parameters and the training gradient also flows through the
unrolled attack (second order, memory growing with ``steps``). With L∞ sign steps that extra
gradient is zero almost everywhere (``sign`` has zero derivative) although its cost is not;
with L2 normalised steps it is not zero.

References:
    - I. Goodfellow, J. Shlens, C. Szegedy. Explaining and harnessing adversarial examples.
      ICLR 2015. https://arxiv.org/abs/1412.6572 (FGSM)
    - A. Madry, A. Makelov, L. Schmidt, D. Tsipras, A. Vladu. Towards deep learning models
      resistant to adversarial attacks. ICLR 2018. https://arxiv.org/abs/1706.06083 (PGD)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from toolkit._utils.array_validation import check_tensor
from toolkit._utils.param_validation import (
    Bool,
    Callable_,
    Generator,
    Integer,
    Options,
    Real,
    check_params,
    show_value,
)
from toolkit.algorithms.adversarial.batches import (
    Bounds,
    Model,
    call_model,
    check_bounds,
    check_inputs,
    check_labels,
    check_logits,
    check_model,
    check_model_input,
    model_device,
)
from toolkit.core import as_constant

__all__ = ["BLOCK", "NORMS", "eval_mode", "fgsm", "pgd", "predict"]

#: The package's one block: the adversarial examples are constants for the parameter update
#: (Danskin's theorem), so the attack is computed as a constant.
BLOCK = "adversarial.examples"
#: Threat models: ``"linf"`` (sign steps, box projection), ``"l2"`` (normalised steps, ball).
NORMS = ("linf", "l2")

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_TINY = 1e-12
_ATTACK_ARGS = {
    "eps": [Real(0, closed="neither")],
    "alpha": [Real(0, closed="neither")],
    "steps": [Integer(1)],
    "restarts": [Integer(1)],
    "norm": [Options(*NORMS)],
    "random_start": [Bool],
    "targeted": [Bool],
    "use_eval_mode": [Bool],
    "loss_fn": [None, Callable_],
    "generator": [None, Generator],
}


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
    check_model("eval_mode", model)
    check_params("eval_mode", {"enabled": enabled}, {"enabled": [Bool]})
    if not isinstance(model, nn.Module):
        yield model
        return
    modes = [(module, module.training) for module in model.modules()]
    try:
        if enabled:
            model.train(False)  # eval mode (Module.eval is train(False))
        yield model
    finally:
        for module, flag in modes:
            module.training = flag


@torch.no_grad()
def eval_logits(model: Model, x: torch.Tensor) -> torch.Tensor:
    """``model(x)`` in eval mode (modes restored) without a graph: pure evaluation."""
    with eval_mode(model):
        return model(x)


def predict(model: Model, x: torch.Tensor) -> torch.Tensor:
    """Predicted classes ``argmax_k f(x)_k`` (n,), in eval mode (modes restored), no graph.

    ``x`` (n, ...) is moved to the model's device first.

    >>> import torch
    >>> from torch import nn
    >>> net = nn.Linear(2, 3)
    >>> predict(net, torch.rand(4, 2)).shape
    torch.Size([4])
    """
    check_model("predict", model)
    check_tensor("predict", "x", x)
    if x.ndim == 0:
        raise ValueError("predict: x must be a tensor of inputs (n, ...), got a 0-d tensor")
    device = model_device(model)
    x = x if device is None else x.to(device)
    check_model_input("predict", model, x)
    logits = call_model("predict", lambda v: eval_logits(model, v), x)
    if not isinstance(logits, torch.Tensor) or logits.ndim == 0:
        raise TypeError(f"predict: model must return a tensor of logits (n, n_classes), got "
                        f"{show_value(logits)}")
    return logits.argmax(-1)


# ---------------------------------------------------------------------------------------------
# the objective and the attack


class Objective:
    """Per-example loss ``L(f(x), y)`` (n,) and logits; checks labels and the loss once.

    At the first call the labels are checked against the number of logits (a label ``>= C``
    is an error that names ``where``), and ``loss_fn``'s output against the shape ``(n,)``.
    """

    def __init__(self, where: str, model: Model, y: torch.Tensor, loss_fn: LossFn | None
                 ) -> None:
        self.where, self.model, self.y, self.loss_fn = where, model, y, loss_fn
        self.checked = False

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # the first call says in words when the model cannot take x; later calls see the same x
        logits = self.model(x) if self.checked else call_model(self.where, self.model, x)
        if not self.checked:
            check_logits(self.where, logits, x.shape[0], self.loss_fn is not None)
            check_labels(self.where, self.y, logits)
        if self.loss_fn is None:
            losses = F.cross_entropy(logits, self.y, reduction="none")
        else:
            losses = self.loss_fn(logits, self.y)
            if not isinstance(losses, torch.Tensor) or losses.shape != (x.shape[0],):
                shape = (tuple(losses.shape) if isinstance(losses, torch.Tensor)
                         else type(losses).__name__)
                raise ValueError(f"{self.where}: loss_fn must return per-example losses of shape "
                                 f"({x.shape[0]},) (use reduction='none'), got {shape}")
        self.checked = True
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


def _run_pgd(objective: Objective, x: torch.Tensor, eps: float, alpha: float, steps: int,
             norm: str, random_start: bool, targeted: bool, bounds: Bounds,
             generator: torch.Generator | None) -> torch.Tensor:
    """One PGD run, recorded (``create_graph``) exactly when the caller records a graph."""
    # Under as_constant with the block active this runs under no_grad: each iterate is a fresh
    # tensor with no history and only the current step's input gradient is recorded. Inside
    # disable_blocks the caller's grad mode holds and every step stays in the graph.
    create_graph = torch.is_grad_enabled()
    sign = -1.0 if targeted else 1.0
    x_adv = x + _random_start(x, eps, norm, generator) if random_start else x.clone()
    if random_start and bounds is not None:
        x_adv = x_adv.clamp(bounds[0], bounds[1])
    if norm == "linf":  # the feasible set is a box: [x − ε, x + ε] ∩ [lo, hi]
        box_lo, box_hi = x - eps, x + eps
        if bounds is not None:
            box_lo, box_hi = box_lo.clamp(min=bounds[0]), box_hi.clamp(max=bounds[1])
    for _ in range(steps):
        with torch.enable_grad():  # the input gradient, in any grad mode
            if not x_adv.requires_grad:
                x_adv.requires_grad_(True)
            losses, _ = objective(x_adv)
            if not losses.requires_grad:
                raise ValueError(f"{objective.where}: model's output must depend on x through "
                                 f"autograd, got an output with no gradient path to x (the "
                                 f"model detaches it or runs under torch.no_grad()); the attack "
                                 f"ascends the gradient of the loss with respect to x")
            (grad,) = torch.autograd.grad(losses.sum(), x_adv, create_graph=create_graph)
        if norm == "linf":  # x + α sign(g), projected onto the box (one clamp)
            x_adv = torch.add(x_adv, grad.sign(), alpha=sign * alpha).clamp(box_lo, box_hi)
        else:
            # x + α g / ‖g‖₂ (a unit L2 step per example), projected onto the ball
            unit = grad / _per_example(_l2(grad).clamp_min(_TINY), grad)
            x_adv = _project_l2(x_adv + (sign * alpha) * unit, x, eps, bounds)
    return x_adv


@torch.no_grad()
def _score(objective: Objective, x_adv: torch.Tensor, y: torch.Tensor, targeted: bool
           ) -> tuple[torch.Tensor, torch.Tensor]:
    losses, logits = objective(x_adv)
    if targeted:
        return logits.argmax(-1) == y, -losses
    return logits.argmax(-1) != y, losses


def _worst_case(objective: Objective, x: torch.Tensor, y: torch.Tensor, restarts: int,
                targeted: bool, **run: Any) -> torch.Tensor:
    """PGD with restarts: per example a successful attack first, then the higher objective."""
    best = _run_pgd(objective, x, targeted=targeted, **run)
    if restarts == 1:
        return best
    best_success, best_objective = _score(objective, best, y, targeted)
    for _ in range(restarts - 1):
        candidate = _run_pgd(objective, x, targeted=targeted, **run)
        success, value = _score(objective, candidate, y, targeted)
        better = (success & ~best_success) | ((success == best_success) & (value > best_objective))
        best = torch.where(_per_example(better, best), candidate, best)
        best_success = best_success | success
        best_objective = torch.where(better, value, best_objective)
    return best


def run_attack(where: str, model: Model, x: torch.Tensor, y: torch.Tensor, *, bounds: object,
               use_eval_mode: bool, **args: Any) -> torch.Tensor:
    """The attack of :func:`pgd`, :func:`fgsm` and the training loop: arguments checked (errors
    name ``where``), the worst case over restarts computed as a constant behind :data:`BLOCK`."""
    check_model(where, model)
    check_params(where, {**args, "use_eval_mode": use_eval_mode}, _ATTACK_ARGS)
    checked = check_bounds(where, bounds)
    loss_fn = args.pop("loss_fn")
    check_inputs(where, x, y, checked, loss_fn is not None)
    check_model_input(where, model, x)
    objective = Objective(where, model, y, loss_fn)
    with eval_mode(model, enabled=use_eval_mode):
        # The one cut (Danskin): the inner maximiser is a constant for the parameter update.
        # Inside disable_blocks(BLOCK) the attack keeps its graph (create_graph above) and the
        # training gradient flows through every step of it.
        return as_constant(_worst_case, objective, x, y, bounds=checked, **args, name=BLOCK)


def pgd(
    model: Model,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float = 8 / 255,
    alpha: float = 2 / 255,
    steps: int = 10,
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
    case over the runs: a successful attack first, then the highest loss. The result is computed
    as a constant behind the block ``"adversarial.examples"``; inside
    ``disable_blocks("adversarial.examples")`` the attack is recorded with ``create_graph=True``
    and the returned tensor is a differentiable function of the parameters (only when gradients
    are enabled at the call).

    The defaults are torchattacks' ``PGD`` defaults (L∞, images in [0, 1]): ``eps = 8/255``,
    ``alpha = 2/255``, ``steps = 10``, random start. For ``norm="l2"`` pass your own radius
    (torchattacks' ``PGDL2`` uses ``eps=1.0, alpha=0.2``).

    Args:
        model: maps ``x`` (n, ...) to logits (n, n_classes); any callable.
        x: clean inputs (n, ...), finite and inside ``bounds``.
        y: labels (n,) in ``[0, n_classes)``; the *target* labels when ``targeted``.
        eps: radius of the ball, > 0 (default 8/255).
        alpha: step size, > 0 (default 2/255; Madry et al. use ``2.5 * eps / steps``).
        steps: number of steps, >= 1 (default 10).
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

    Raises:
        ValueError: NaN or infinity in ``x``, a label outside ``[0, n_classes)`` (found at the
            first model call), ``x`` outside ``bounds``, or an argument out of range.

    >>> import torch
    >>> from torch import nn
    >>> net = nn.Linear(4, 3)
    >>> x, y = torch.rand(5, 4), torch.tensor([0, 1, 2, 0, 1])
    >>> x_adv = pgd(net, x, y, eps=0.1, alpha=0.05, steps=5, generator=torch.Generator().manual_seed(0))
    >>> bool(((x_adv - x).abs() <= 0.1 + 1e-6).all()), net.weight.grad is None
    (True, True)
    """
    return run_attack("pgd", model, x, y, eps=eps, alpha=alpha, steps=steps, norm=norm,
                      random_start=random_start, restarts=restarts, targeted=targeted,
                      loss_fn=loss_fn, bounds=bounds, generator=generator,
                      use_eval_mode=use_eval_mode)


def fgsm(
    model: Model,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float = 8 / 255,
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
    checks; ``targeted`` steps down the loss towards ``y``. The default ``eps = 8/255`` is
    torchattacks' ``FGSM`` default (images in [0, 1]).

    >>> import torch
    >>> from torch import nn
    >>> net = nn.Linear(2, 2)
    >>> x = torch.full((1, 2), 0.5)
    >>> bool(((fgsm(net, x, torch.tensor([0]), eps=0.25) - x).abs() == 0.25).all())
    True
    """
    return run_attack("fgsm", model, x, y, eps=eps, alpha=eps, steps=1, norm=norm,
                      random_start=False, restarts=1, targeted=targeted, loss_fn=loss_fn,
                      bounds=bounds, generator=None, use_eval_mode=use_eval_mode)
