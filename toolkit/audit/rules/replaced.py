"""A module replaced after its optimizer was built (a new head, ``model.fc = nn.Linear(512,
3)``, set after ``optimizer = SGD(model.parameters())``), or a parameter (weights tied after
it: ``model.dec.weight = model.emb.weight``).

The optimizer steps the tensors of the module that was replaced: no module holds them and no
loss reaches them (DEAD). The new module's tensors get gradient and no optimizer steps them
(LEAK). Both findings get one fix: build the optimizer after the replacement, the statement
that builds it moved below the assignment when that is found in the same block
(:func:`~toolkit.audit.fixes.optimizer_edits.rebuild_fix`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["orphans", "replaced_owner"]


def orphans(step: RecordedStep, loss: str) -> set[int]:
    """``id`` of the parameters the loss's optimizer steps that no named module holds and the
    loss never reaches."""
    held = {id(t) for root in step.rec.names.roots for t in root.parameters()}
    reached = step.graphs[loss].search.leaf_node
    return {i for i, t in step.stepped[loss].items() if i not in held and i not in reached
            and isinstance(t, nn.Parameter)}


def replaced_owner(step: RecordedStep, loss: str, variable: Any) -> str | None:
    """The name of the module that holds ``variable`` when that module was put in place after
    the loss's optimizer was built: a learned tensor no optimizer steps, in a module that holds
    nothing stepped, inside a module whose other tensors the loss's optimizer steps, while
    that optimizer steps :func:`orphans` of the same make (as many tensors of each number of
    dimensions as the module holds, at least)."""
    if not step.unstepped(variable):
        return None
    names = step.rec.names
    owner = names.tensors.get(id(variable), "").rpartition(".")[0]
    parent = owner.rpartition(".")[0]
    module = names.by_label.get(owner)
    if module is None or not parent or names.members(owner) & step.all_stepped or not (
            names.members(parent) & set(step.stepped[loss])):
        return None
    # the tensors left behind have the make of the module's own (a weight and a bias)
    left = Counter(step.stepped[loss][i].ndim for i in orphans(step, loss))
    new = Counter(t.ndim for t in module.parameters())
    return owner if new and not new - left else None
