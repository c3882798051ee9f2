"""Uncut unrolls: a loss that backpropagates through every pass of a loop whose pass the code
right after it repeats (:mod:`toolkit.audit.record.unrolls`: a fixed-point solve followed by
one differentiable step, an unrolled optimisation split into the steps before the last few and
those). Written apart, the earlier passes were meant to be cut; the loss reaching the graph
they made says they are not.

The graph decides, not the syntax alone: the nodes of the loss's graph that the earlier part
made (a line of it on the user's stack where autograd made them) are the earlier passes kept
in the graph, and the stepped tensors reached through them are what the loss trains through
every pass. A published script cuts that part (``.detach()``, ``torch.no_grad()``): its loss
reaches none of those nodes, and no finding is made. The fix cuts the state where the earlier
part assigns it; a state the code began as a tensor that requires grad by itself (the weights
of an unrolled optimisation, differentiated at each pass) is handed on as one again.
"""

from __future__ import annotations

import dataclasses
import linecache
from typing import TYPE_CHECKING

from toolkit.audit.findings import UnrolledLoop
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unrolls import Unroll, unroll_at
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.proof import MadeAt

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check"]


def check(step: RecordedStep) -> Found:
    """The rule: per loss, each unroll whose earlier part made nodes the loss reaches, through
    which it reaches a tensor its optimizer steps."""
    found = []
    known: dict[tuple[str, int], Unroll | None] = {}
    for loss, search in step.searches.items():
        under: dict[Unroll, tuple[Line, list[int]]] = {}
        for key in search.nodes:
            made = step.rec.made.get(key)
            for line in made[1] if made is not None else ():
                where = (line.path, line.number)
                if where not in known:
                    known[where] = unroll_at(line.path, line.number) if line.path else None
                unroll = known[where]
                if unroll is not None:
                    under.setdefault(unroll, (line, []))[1].append(key)
                    break
        for unroll, (seen, keys) in under.items():
            finding = _finding(step, loss, unroll, seen, keys)
            if finding is not None:
                found.append(finding)
    return {"unrolled": found}


def _finding(step: RecordedStep, loss: str, unroll: Unroll, seen: Line,
             keys: list[int]) -> Wanted[UnrolledLoop] | None:
    nodes = step.searches[loss].nodes
    reached = step.graphs[loss].reach(keys)
    leaves = {id(v) for k in reached if (v := getattr(nodes[k], "variable", None)) is not None}
    trained = tuple(step.rec.names.name(t) for i, t in step.stepped[loss].items() if i in leaves)
    if not trained:
        return None
    cut = dataclasses.replace(seen, number=unroll.at, span=unroll.value,
                              text=linecache.getline(unroll.path, unroll.at).strip())
    again = dataclasses.replace(seen, number=unroll.again, span=None,
                                text=linecache.getline(unroll.path, unroll.again).strip())
    handed = "`.detach().requires_grad_()`" if unroll.leaf else "`.detach()`"
    fix = (f"cut `{unroll.state}` where the loop's earlier passes hand it on ({handed}, or "
           f"run them under torch.no_grad()), so that the loss backpropagates through the "
           f"repeated pass alone, as the one-step or truncated gradient the split is written "
           f"for")
    finding = UnrolledLoop(loss=loss, state=unroll.state, cut=cut, again=again,
                           n_nodes=len(keys), parameters=trained, fix=fix)
    return Wanted(finding, FirstOf((Option((MadeAt(cut, leaf=unroll.leaf),), fix, (cut,)),)))
