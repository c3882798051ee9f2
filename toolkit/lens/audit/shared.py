"""Tensors stepped by two optimizers: each ``step()`` of every optimizer that holds a tensor
updates it, so a tensor in two optimizers moves twice per iteration (with two learning rates
and two sets of moments), usually because a module was passed to both (``Adam(model.
parameters())`` next to ``Adam(model.head.parameters())``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.lens.audit.findings import SharedTensor

if TYPE_CHECKING:
    from toolkit.lens.audit.recorded import Found, RecordedStep

__all__ = ["check"]


def check(step: RecordedStep) -> Found:
    """The rule: every tensor that requires grad held by two or more of the optimizers given
    (a tensor in two param groups of one optimizer is refused by torch itself)."""
    holders: dict[int, list[str]] = {}
    for optimizer, members in step.groups:
        for i in step.stepped[members[0]]:
            holders.setdefault(i, []).append(optimizer)
    found = []
    for i, optimizers in holders.items():
        if len(optimizers) < 2:
            continue
        tensor = next(group[i] for group in step.stepped.values() if i in group)
        if not tensor.requires_grad:
            continue
        names = tuple(dict.fromkeys(optimizers))
        found.append(SharedTensor(
            parameter=step.rec.names.name(tensor), shape=tuple(tensor.shape), optimizers=names,
            fix=(f"keep it in one optimizer: remove it from all but one of "
                 f"{', '.join(repr(n) for n in names)} (each step() updates it once more)")))
    return {"shared": found}
