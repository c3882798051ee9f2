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

import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

__all__ = ["Divergence", "DivergenceWarning", "check_finite", "warn_divergence"]


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

    One reduction per tensor and a single host synchronisation when all are finite (the
    common case); the names are looked at only when something is not finite.
    """
    items = list(tensors.items() if isinstance(tensors, Mapping) else tensors)
    if not items:
        return None
    flags = torch.stack([torch.isfinite(t).all().to(items[0][1].device) for _, t in items])
    if bool(flags.all()):
        return None
    for (name, _), ok in zip(items, flags.tolist()):
        if not ok:
            return name
    return None  # unreachable: some flag was False


def warn_divergence(divergence: Divergence) -> None:
    """Warn, with a :class:`DivergenceWarning` attributed to the caller's own code (the first
    frame outside this package), that a loop stopped at ``divergence``."""
    warnings.warn(f"{divergence}. Lower the learning rate (or the weight decay), or check the "
                  f"data and the initial parameters for extreme values.", DivergenceWarning,
                  stacklevel=_user_stacklevel())


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside the toolkit, seen from ``warnings.warn``
    called by this module's caller."""
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
