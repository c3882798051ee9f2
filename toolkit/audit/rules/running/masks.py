"""A pruning mask an optimizer trains (``trained_mask``).

A layer that multiplies its weight by a mask of the weight's shape (``weight * mask``: magnitude
pruning, Han et al. 2015; a lottery ticket's rounds, Frankle & Carbin 2019; SNIP's keep masks,
Lee et al. 2019; a fixed sparse connectivity, Mocanu et al. 2018) keeps the mask fixed between
its pruning steps: ``torch.nn.utils.prune`` registers ``weight_mask`` as a buffer. A mask made an
``nn.Parameter`` that requires grad is in ``parameters()``, so the optimizer built from them
steps it with the weight: the mask becomes a second multiplicative weight, moves away from its
ones, and a pruned connection comes back as its zero moves.

Told by values and by use, in an audited iteration: a product of two leaves of one shape, one
all zeros and ones (a mask of ones before the first pruning counts), the other not (a weight);
then a step that moves the mask with a gradient. A mask the method learns through a function of
its scores (``weight * sigmoid(scores)``, continuous sparsification) is no product of leaves; a
gain of ones of another shape (weight normalisation's ``g``, batch norm's weight) is none.

A failure at the line that makes the mask and at the optimizer's; the edit switches the masks
off (``net[0].mask.requires_grad_(False)``) right before that optimizer is built, so that it
skips them, as the published buffers are skipped."""

from __future__ import annotations

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import Graph
from toolkit.audit.record.frames import Site
from toolkit.audit.result import plural
from toolkit.audit.rules.running.not_parameters import made_at
from toolkit.audit.rules.running.state import WatchState

__all__ = ["note", "trained"]


def _binary(t: torch.Tensor) -> bool:
    """Whether every value of ``t`` is exactly zero or one (a mask, before it trains)."""
    return t.is_floating_point() and t.numel() > 1 and bool(((t == 0) | (t == 1)).all())


def note(w: WatchState, graph: Graph) -> None:
    """At an audited ``backward()``: each product of two leaves of one shape the loss reads,
    one of zeros and ones and the other not, kept as a mask (for the run: a mask of a phase's
    first step stays one when it has moved)."""
    for node in graph.nodes.values():
        if type(node).__name__ != "MulBackward0":   # read per node of every audited graph
            continue
        below = [n for n, _ in node.next_functions if n is not None]
        leaves = [getattr(n, "variable", None) for n in below]
        if len(leaves) != 2 or not all(isinstance(v, torch.Tensor) for v in leaves) or \
                leaves[0] is leaves[1] or leaves[0].shape != leaves[1].shape:
            continue
        for mask, weight in (leaves, leaves[::-1]):
            if id(mask) not in w.masks and _binary(mask) and not _binary(weight):
                w.masks[id(mask)] = mask


def trained(w: WatchState, index: int, stepped: list[tuple[str, torch.Tensor]]) -> None:
    """At an audited step of optimizer ``index``: the masks (:func:`note`) it moves with a
    gradient, one failure for them all."""
    found = [p for _, p in stepped if id(p) in w.masks and p.grad is not None
             and id(p) not in w.masks_named]
    if not found:
        return
    w.masks_named.update(id(p) for p in found)
    paths: dict[int, str] = {}
    for network, root in w.called_networks():
        for path, p in network.named_parameters():
            paths.setdefault(id(p), f"{root}{S.attribute_path(path)}")
    names = w.names()
    shown = tuple(names.get(id(p), paths.get(id(p), "?")) for p in found)
    # where each mask is made: its layer class's assignment
    owners = {id(p): (type(m), attr) for network, _ in w.called_networks()
              for m in network.modules() for attr, p in m._parameters.items() if p is not None}
    made = {made_at(*owners[id(p)]) for p in found if id(p) in owners} - {None}
    at = [Site(m[0], m[1].lineno, None).shown() for m in sorted(made, key=lambda m: (
        m[0], m[1].lineno))]
    opt = w.optimizers[index]
    built = w.built_at.get(id(opt))
    edits: tuple = ()
    if built is not None:
        at.append(built.shown())
        exprs = [paths.get(id(p)) for p in found]
        parsed = S.syntax_tree(built.path)
        if None not in exprs and parsed is not None:
            indent = S.indent_of(parsed[1], built.line)
            statement = f"\n{indent}".join(f"{e}.requires_grad_(False)" for e in exprs)
            edit = w.fixes.insert_before(built.path, built.line, statement)
            edits = (edit,) if edit is not None else ()
    opt_name = w.assigned(built)
    stepper = f"`{opt_name}`" if opt_name else "an optimizer"
    it = "it" if len(found) == 1 else "each"
    w.add(ScriptFinding(
        "trained_mask", w.iteration,
        f"{plural(len(found), 'mask')} of zeros and ones, multiplied into a weight of "
        f"{'its' if len(found) == 1 else 'their'} shape, {'is' if len(found) == 1 else 'are'} "
        f"stepped by {stepper} with a gradient: {it} trains as a second weight, and a pruned "
        f"connection comes back as its mask moves from zero (pruning keeps masks fixed)",
        shown, shown, tuple(at), edits,
        advice="keep the masks fixed: register them as buffers (register_buffer), or "
               "requires_grad_(False) before the optimizer is built",
        step=w.step_events - 1, concerned=("*",)))
