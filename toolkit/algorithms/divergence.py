"""Divergence detection for training loops: stop at the first non-finite value, say where.

Every training loop of the toolkit checks, after each update, that what it just produced is
finite. On the first value that is not (an overflow to ``inf``, or a ``nan``), the loop stops
before applying anything more, records a :class:`Divergence` (which update, which quantity),
warns once with a :class:`DivergenceWarning` and returns what it has. Detection never depends on
a particular floating-point trajectory: it looks at the values themselves.

>>> import torch, warnings
>>> check_finite({"weights": torch.ones(2), "bias": torch.tensor([0.0, float("inf")])})
'bias'
>>> div = Divergence(where="train_cd", quantity="weights", step=3, epoch=1)
>>> print(div)
train_cd: the weights became non-finite (inf or nan) at update 3 (epoch 1); training stopped there
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from toolkit._utils.array_validation import check_storage
from toolkit._utils.caller import user_stacklevel
from toolkit._utils.param_validation import show_value

__all__ = ["Divergence", "DivergenceWarning", "History", "UpdateCheck", "check_finite",
           "check_step_fits", "warn_divergence"]


class DivergenceWarning(RuntimeWarning):
    """A training loop met a non-finite value and stopped there (see :class:`Divergence`)."""


@dataclass(frozen=True)
class Divergence:
    """Where a training loop diverged.

    ``where``: the loop (function or estimator); ``quantity``: what became non-finite (a
    parameter's name, ``"loss"``, ``"gradient of weights"``, …); ``step``: the index of the
    update that produced it (0 for the first update), so ``step`` updates had been applied
    before it; ``epoch``: the pass over the data it happened in, when the loop has epochs;
    ``applied``: whether the update that produced it was applied (a non-finite parameter is
    seen after its update, a non-finite gradient before it).
    """

    where: str
    quantity: str
    step: int
    epoch: int | None = None
    applied: bool = True

    def __str__(self) -> str:
        epoch = f" (epoch {self.epoch})" if self.epoch is not None else ""
        return (f"{self.where}: the {self.quantity} became non-finite (inf or nan) at update "
                f"{self.step}{epoch}; training stopped there")

    def as_dict(self) -> dict[str, Any]:
        """The record as plain values (for ``summary.json`` or a log line)."""
        return asdict(self)


def check_finite(tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]
                 ) -> str | None:
    """The name of the first tensor holding an ``inf`` or a ``nan``, or ``None`` if all are finite.

    One reduction per tensor (all of them in one fused ``foreach`` call) and a single host
    synchronisation when all are finite (the common case). The reduction is the 2-norm: an
    ``inf`` or a ``nan`` makes it non-finite, so a finite norm proves the tensor finite. A
    non-finite norm can also come from large finite values whose squares overflow; those
    tensors are looked at again with ``max |x|``, which cannot overflow (NaN propagates through
    the maximum on every device), and only then are names looked at. Integer, boolean and
    empty tensors are finite.
    """
    if not isinstance(tensors, (Mapping, Iterable)) or isinstance(tensors, (str, bytes)):
        raise TypeError(f"check_finite: tensors must be a dict name -> tensor or (name, "
                        f"tensor) pairs, got {show_value(tensors)}")
    items = list(tensors.items() if isinstance(tensors, Mapping) else tensors)
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"check_finite: tensors must be a dict name -> tensor or (name, "
                            f"tensor) pairs, got the item {show_value(item)}")
        name, t = item
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"check_finite: tensors[{name!r}] must be a torch.Tensor, got "
                            f"{show_value(t)}")
        check_storage("check_finite", f"tensors[{name!r}]", t)
    checked = [(name, t) for name, t in items
               if (t.is_floating_point() or t.is_complex()) and t.numel() > 0]
    if not checked:
        return None
    with torch.no_grad():  # a value, never part of a graph
        flags = _finite(torch._foreach_norm([t for _, t in checked], 2))
        if bool(flags.all()):
            return None
        suspects = [(name, t) for (name, t), ok in zip(checked, flags.tolist()) if not ok]
        exact = _finite(torch._foreach_norm([t for _, t in suspects], _INF)).tolist()
    for (name, _), ok in zip(suspects, exact):
        if not ok:
            return name
    return None  # squares overflowed, but every value is finite


def _finite(norms: list[torch.Tensor]) -> torch.Tensor:
    """Whether each 0-d norm is finite, as one boolean vector on the first norm's device."""
    device, dtype = norms[0].device, norms[0].dtype
    if all(n.device == device and n.dtype == dtype for n in norms):
        return torch.isfinite(torch.stack(norms))
    return torch.stack([torch.isfinite(n).to(device) for n in norms])  # mixed: flags, not values


_INF = float("inf")


def check_step_fits(where: str, dtype: torch.dtype, **values: float) -> None:
    """Raise ``ValueError`` for a step size (or decay) that the parameters' floating ``dtype``
    cannot hold: every update would overflow, and PyTorch's optimizers fail at the first step.

    >>> check_step_fits("loop", torch.float32, lr=1e300)
    Traceback (most recent call last):
    ...
    ValueError: loop: lr=1e+300 does not fit the parameters' torch.float32 (at most 3.40282e+38)
    """
    top = torch.finfo(dtype).max
    for name, value in values.items():
        if value > top:
            raise ValueError(f"{where}: {name}={value:g} does not fit the parameters' {dtype} "
                             f"(at most {top:g})")


class History(list):
    """The per-epoch rows a training loop returns (a plain ``list``), with ``divergence``: the
    :class:`Divergence` where the loop stopped, ``None`` while every value stayed finite.

    >>> rows = History([{"loss": 0.5}])
    >>> rows == [{"loss": 0.5}], rows.divergence
    (True, None)
    """

    def __init__(self, rows: Iterable[Any] = (), divergence: Divergence | None = None) -> None:
        super().__init__(rows)
        self.divergence = divergence


class UpdateCheck:
    """The divergence check of a loop that trains named tensors (e.g. a module's parameters)
    with an optimizer, shared by the toolkit's training loops.

    Per update: :meth:`before_step` once the gradients are computed and before the optimizer
    applies them (the loss and any further named tensors, then each parameter's ``.grad``),
    :meth:`after_step` once it has (the parameters); :meth:`step` does both around
    ``optimizer.step()``. Each returns ``True`` when a value is not
    finite: then ``divergence`` says where, a :class:`DivergenceWarning` has been issued and the
    loop must stop (nothing non-finite from ``before_step`` has been applied). ``n_updates``
    counts the updates applied. Each check is one :func:`check_finite`: one reduction per
    tensor, one synchronisation.

    >>> w = torch.zeros(2, requires_grad=True)
    >>> check = UpdateCheck("loop", [("weights", w)])
    >>> check.check_start()
    >>> (w * torch.tensor([1.0, float("nan")])).sum().backward()
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     check.before_step(("loss", torch.tensor(0.0)), epoch=0)
    True
    >>> check.divergence
    Divergence(where='loop', quantity='gradient of weights', step=0, epoch=0, applied=False)
    """

    def __init__(self, where: str, parameters: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.where = where
        self.parameters = list(parameters)
        self.n_updates = 0
        self.divergence: Divergence | None = None

    @classmethod
    def for_module(cls, where: str, module: torch.nn.Module) -> UpdateCheck:
        """The check of ``module``'s trainable parameters, named ``"parameter <name>"``."""
        return cls(where, [(f"parameter {name}", p) for name, p in module.named_parameters()
                           if p.requires_grad])

    def check_start(self) -> None:
        """Raise ``ValueError`` if a parameter is not finite before training (nothing to train
        from: a state that diverged must start again)."""
        bad = check_finite(self.parameters)
        if bad is not None:
            raise ValueError(f"{self.where}: the {bad} must be finite before training, got inf "
                             f"or nan (training cannot go on from a state that diverged: start "
                             f"again from finite values)")

    def before_step(self, *values: tuple[str, torch.Tensor], epoch: int | None = None) -> bool:
        """Check ``values`` (``("loss", loss)``, …) and each parameter's ``.grad`` (as
        ``"gradient of <name>"``) before the update is applied."""
        gradients = [(f"gradient of {name}", p.grad) for name, p in self.parameters
                     if p.grad is not None]
        bad = check_finite([*values, *gradients])
        return bad is not None and self._stop(bad, epoch, applied=False)

    def after_step(self, *, epoch: int | None = None) -> bool:
        """Count the update just applied and check the parameters it produced."""
        self.n_updates += 1
        bad = check_finite(self.parameters)
        return bad is not None and self._stop(bad, epoch, applied=True)

    def step(self, optimizer: torch.optim.Optimizer, *values: tuple[str, torch.Tensor],
             epoch: int | None = None) -> bool:
        """One checked update: :meth:`before_step`, ``optimizer.step()`` only if everything was
        finite, then :meth:`after_step`; ``True`` when the loop must stop."""
        if self.before_step(*values, epoch=epoch):
            return True
        optimizer.step()
        return self.after_step(epoch=epoch)

    def _stop(self, quantity: str, epoch: int | None, *, applied: bool) -> bool:
        step = self.n_updates - 1 if applied else self.n_updates
        self.divergence = Divergence(self.where, quantity, step, epoch, applied)
        warn_divergence(self.divergence)
        return True


def warn_divergence(divergence: Divergence) -> None:
    """Warn, with a :class:`DivergenceWarning` attributed to the caller's own code (the first
    frame outside the toolkit and scikit-learn), that a loop stopped at ``divergence``."""
    warnings.warn(f"{divergence}. Lower the learning rate (or the weight decay), or check the "
                  f"data and the initial parameters for extreme values.", DivergenceWarning,
                  stacklevel=user_stacklevel())
