"""Where a leak is cut at its cause: a loss that writes gradient into tensors another
optimizer steps (a fake-score network's denoising loss on the generator's samples, taken with
their graph; a discriminator's loss on fakes not ``.detach()``-ed) reaches them through the
output of a call of theirs. Cut there, where the step's own code makes that output
(``generate(n).detach()``), the loss writes nothing into them, and the rest of its gradient is
as it was: the fix at the cause, preferred to a ``zero_grad()`` that clears the symptom before
the other step's own backward.

The cut is written only where it touches no path on which the loss trains its own tensors
(none of them below the call), where every path from the loss to the leaked tensors passes
through it, and at a line whose outputs no other backward of the iteration trains through
(the fakes the generator's own loss reads too; a helper's line that makes the generator's
output for its own loss); and only for a gradient no step of those tensors used yet (one a
step used and no ``zero_grad()`` cleared is a clear left out, not a path to cut)."""

from __future__ import annotations

from typing import Any

from toolkit.audit.edit import Edit
from toolkit.audit.record.frames import Site
from toolkit.audit.record.ledger import Source
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.running.targets import cut_call, where_made
from toolkit.audit.truth.graph import Graph as StepGraph

__all__ = ["cut_at_cause", "note"]


def note(w: WatchState, graph: StepGraph, stepped: set[int], step: str) -> None:
    """Keep this audited backward's graph, the calls whose outputs it reads (each with the
    line of ``step``, the function that called ``backward()``, that made the output), and the
    lines of those it trains ``stepped`` tensors through, until the next iteration ends (a
    leak found at the next iteration's step is stale)."""
    if w.cause_iteration != w.iteration:
        w.cause_graphs = {k: v for k, v in w.cause_graphs.items()
                          if k >= w.cause_events}
        w.cause_iteration, w.cause_events = w.iteration, w.events
    search = graph.search
    calls = [(node, where_made(w, node, site, step)) for node, site, _ in w.call_outputs
             if id(node) in search.nodes]
    if not calls:
        return
    toward = graph.reaching(stepped)
    trains = {(at.path, at.line) for node, at in calls if id(node) in toward}
    w.cause_graphs[w.events] = (graph, calls, trains)


def cut_at_cause(w: WatchState, src: Source, hit: set[int]) -> tuple[Site, Edit] | None:
    """The cut of the call output through which ``src``'s loss reaches the tensors ``hit``
    (by ``id``) and none of the others it wrote, as the module's docstring says; ``None``
    where there is none."""
    entry = w.cause_graphs.get(src.index)
    own = set(src.wrote) - hit
    if entry is None or not own or not hit <= set(src.wrote):
        return None
    # a gradient a step of theirs used already, left in .grad since, is one never cleared:
    # the loss trains them, and the clear is the fix
    if any(w.last_step_of.get(k, -1) > src.index for k in hit):
        return None
    graph, calls, _ = entry
    # the lines whose outputs the other losses train through (the generator's own loss reads
    # the fakes the discriminator's loss reads with their graph): a cut there is theirs too;
    # not the same loss's backward at another iteration
    mine = w.backward_keys.get(src.index)
    others = {line for event, (_, _, trains) in w.cause_graphs.items()
              if w.backward_keys.get(event) != mine for line in trains}
    best: tuple[int, Any, Site] | None = None
    for node, at in calls:
        key = id(node)
        below = graph.leaves(graph.reach([key]))
        if not hit <= below or below & own:
            continue
        removed = {(c, key) for c in graph.callers.get(key, ())}
        if graph.leaves(graph.reach(graph.roots, removed=removed)) & hit:
            continue
        if (at.path, at.line) in others:
            continue
        if best is None or len(below) > best[0]:
            best = (len(below), node, at)
    if best is None:
        return None
    at, edit, _ = cut_call(w.fixes, best[2], best[1])
    return (at, edit) if edit is not None else None
