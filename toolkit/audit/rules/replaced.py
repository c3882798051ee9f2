"""A module replaced after its optimizer was built (a new head, ``model.fc = nn.Linear(512,
3)``, set after ``optimizer = SGD(model.parameters())``), or a parameter (weights tied after
it: ``model.dec.weight = model.emb.weight``).

The optimizer steps the tensors of the module that was replaced: no module holds them and no
loss reaches them (DEAD). The new module's tensors get gradient and no optimizer steps them
(LEAK). Both findings get one fix: build the optimizer after the replacement, the statement
that builds it moved below the assignment when that is found in the same block
(:func:`~toolkit.audit.fixes.optimizer_edits.build_after`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.optimizer_edits import build_after
from toolkit.audit.record.sites import Line

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["orphans", "rebuild_fix", "replaced_owner"]


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


def rebuild_fix(step: RecordedStep, loss: str, owner: str | None
                ) -> tuple[str, tuple[Line, ...], tuple[Edit, ...]]:
    """``(the fix in words, the line that builds the loss's optimizer, the edits that move it
    below the assignment of module ``owner``)``; with no ``owner`` (a parameter replaced:
    weights tied after the optimizer was built), below the last assignment of a module or
    tensor the named modules hold. The edits are none where the assignment is not found in
    the same block."""
    optimizer = step.optimizer_of[loss]
    line = step.built_at(step.optimizer(loss))
    names = step.rec.names
    module = names.by_label.get(owner) if owner is not None else None
    held = {*names.modules, *names.tensors}
    edits = () if line is None else build_after(
        line, step.namespace, (lambda value: value is module) if owner is not None
        else (lambda value: value is not None and id(value) in held))
    where = (f"optimizer {optimizer!r} (built at {line.file}:{line.number})"
             if line is not None else f"optimizer {optimizer!r}")
    moved = f" (the assignment at {edits[1].file}:{edits[1].line})" if edits else ""
    if owner is None:
        return (f"{where} steps tensors that no module holds and no loss reaches: a module or "
                f"parameter was replaced after it was built (a new layer, weights tied); build "
                f"the optimizer after the replacement{moved}"), (
            () if line is None else (line,)), edits
    return (f"{owner} was replaced after {where} was built: the optimizer steps the tensors "
            f"of the module it replaced, which no module holds and no loss reaches, and not "
            f"the new ones; build the optimizer after the replacement{moved}, or add the new "
            f"tensors to it"), (() if line is None else (line,)), edits
