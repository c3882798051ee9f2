"""Tensors stepped by two optimizers: each ``step()`` of every optimizer that holds a tensor
updates it, so a tensor in two optimizers moves twice per iteration (with two learning rates
and two sets of moments), usually because a module was passed to both (``Adam(model.
parameters())`` next to ``Adam(model.head.parameters())``)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from toolkit.audit.findings import SharedTensor
from toolkit.audit.rules.leaks import passes_through
from toolkit.audit.rules.wanted import LeaveOut, Wanted

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check"]


def check(step: RecordedStep) -> Found:
    """The rule: for each pair of distinct optimizer objects given, the tensors requiring
    grad that both hold, as one finding with the lines that build the two. A pairing by param
    groups, modules or tensors is not an optimizer: what two such pairings share is stepped
    once, by the one optimizer that holds it."""
    owners: dict[int, tuple[str, Any]] = {}  # id(optimizer) -> (its name, the optimizer)
    losses: dict[int, list[str]] = {}  # id(optimizer) -> the losses paired with it
    for optimizer, members in step.groups:
        pairing = step.optimizer(members[0])
        if hasattr(pairing, "param_groups"):
            owners.setdefault(id(pairing), (optimizer, pairing))
            losses.setdefault(id(pairing), []).extend(members)
    held = {key: {id(p): p for g in opt.param_groups for p in g["params"] if p.requires_grad}
            for key, (_, opt) in owners.items()}
    found = []
    keys = list(owners)
    for a, b in itertools.combinations(keys, 2):
        both = [held[a][i] for i in held[a] if i in held[b]]
        if not both:
            continue
        names = (owners[a][0], owners[b][0])
        lines = [step.built_at(owners[k][1]) for k in (a, b)]
        built = [f"{line.file}:{line.number}" for line in lines if line is not None]
        where = f" (built at {' and '.join(built)})" if len(built) == 2 else ""
        # the edit leaves them out of the optimizer that holds more (a model-wide optimizer
        # beside one built for them), else out of the other, where its line can say so; never
        # out of one whose losses would then leak into them (each must reach them, if at all,
        # only on its way to the other tensors it steps: pass-through, as the leak rule says)
        ids = {id(t) for t in both}
        free = [i for i in (0, 1)
                if all(passes_through(step, loss, ids) for loss in losses[(a, b)[i]])]
        order = sorted(free, key=lambda i: -len(held[(a, b)[i]]))
        leave = LeaveOut(tuple((line, owners[(a, b)[i]][1]) for i in order
                               if (line := lines[i]) is not None), tuple(both))
        fix = (f"keep them in one optimizer: take them out of {names[0]!r} or {names[1]!r}"
               f"{where}; each step() updates them once more")
        if not free:
            fix = (f"the losses of {names[0]!r} and of {names[1]!r} both train them, and "
                   f"each step() updates them once more{where}: step them once, from one "
                   f"optimizer over both losses (their sum), or take them out of one optimizer "
                   f"and cut them from its losses")
        found.append(Wanted(SharedTensor(
            parameters=tuple(step.rec.names.name(t) for t in both),
            shapes=tuple(tuple(t.shape) for t in both), optimizers=names, fix=fix,
            lines=tuple(line for line in lines if line is not None)), leave))
    return {"shared": found}
