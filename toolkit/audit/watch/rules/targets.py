"""A comparison whose target side carries gradient to stepped tensors (``target``): the step
audit's rule on this backward's graph; and a copy the script moves toward a stepped network
(a momentum or EMA copy) that a loss trains through its own output."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.overrides

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes import script_edits as E
from toolkit.audit.result import plural
from toolkit.audit.rules.targets import target_edges
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.audit.watch.frames import Site
from toolkit.audit.watch.graph import (
    read_graph,
)
from toolkit.audit.watch.kept_in_sync import toward
from toolkit.audit.watch.state import WatchState
from toolkit.audit.watch.tensors import keyed
from toolkit.lens.backward_graph import ShortestPaths

__all__ = ["followers", "targets"]


def targets(w: WatchState, roots: Sequence[torch.Tensor], site: Site | None,
             stepped: dict[int, int]) -> None:
    """A comparison in the head of the loss whose target side reaches tensors an optimizer
    steps (the step audit's rule, :func:`~toolkit.audit.rules.targets.target_edges`,
    on this backward's graph): a teacher's soft targets, a guessed label made by the
    model, computed with gradients; the loss trains those tensors through its target. The
    edit cuts the target where the user's code made it: each network call whose output
    the target side holds (the outermost), ``.detach()``-ed. ``stepped``: each tensor an
    optimizer holds, with its index."""
    outputs = [t for t in roots if t.grad_fn is not None]
    if not stepped or not outputs:
        return
    search = ShortestPaths(outputs)
    graph = StepGraph(search)
    for _, target in sorted(target_edges(graph, set(stepped))):
        met = graph.reach([target])
        reached = sorted({id(v) for k in met
                          if isinstance(v := getattr(search.nodes[k], "variable", None),
                                        torch.Tensor)} & set(stepped))
        if not reached:
            continue
        # the call that made each node (an inner network's call ends first: an outer
        # call handing the same output on is not where it was made)
        made: dict[int, Site] = {}
        for node, s, _ in w.call_outputs:
            if id(node) in met:
                made.setdefault(id(node), s)
        inner = {k for key in made for k in graph.reach([key]) - {key}}
        sites = list(dict.fromkeys(s for key, s in made.items() if key not in inner))
        edits = tuple(e for s in sites if (e := E.detach_call(s.path, s.span)) is not None)
        names = w.names()
        held = {id(p): (k, p) for i, o in enumerate(w.optimizers)
                for k, p in keyed(i, o) if id(p) in set(reached)}
        keys = tuple(key for key, _ in held.values())
        tensors = [p for _, p in held.values()]
        w.add(ScriptFinding(
            "target", w.iteration,
            f"the target of {w.loss_label(site)} (backward at {site}) carries gradient to "
            f"{plural(len(tensors), 'tensor')} an optimizer steps: the loss trains them "
            f"through its own target (a teacher's soft targets, a label the model guessed)",
            keys, tuple(names.get(id(p), "?") for p in tensors),
            tuple(s.shown() for s in sites) + ((site.shown(),) if site else ()), edits,
            advice="compute the target under torch.no_grad(), or .detach() it where it is "
                   "made", step=w.step_events, concerned=keys, extra={"loses": True}))


def followers(w: WatchState, index: int, stepped) -> None:
    """Tensors the script moved itself since their last step, along the line to another
    tensor an optimizer holds (``k <- m k + (1 - m) q``, a momentum or EMA copy, or a copy
    outright), that a loss's gradient reached: the copy the prediction is compared with
    (MoCo's key encoder) is trained by the loss through its own side of the comparison.
    The edit cuts the output of the call that made the copy's values (the outermost call
    reaching them and no other stepped tensor)."""
    held = [p for o in w.optimizers for g in o.param_groups for p in g["params"]]
    moved: dict[int, tuple[str, torch.Tensor]] = {}
    for key, p in stepped:
        old = w.after_step.pop(id(p), None)
        if old is None or old.shape != p.shape or not w.ledger.live.get(id(p)):
            continue
        if torch.equal(p.detach(), old):   # as exact as in double, without the copies
            continue
        now = p.detach().flatten().double()
        before = old.flatten().double()
        for q in held:
            # on the line to q (a clamp, a projection or a decay moves toward no other
            # tensor)
            if q is not p and q.shape == p.shape and toward(
                    before, now, q.detach().flatten().double()):
                moved[id(p)] = (key, p)
                break
    if not moved:
        return
    stepped_ids = {id(p) for p in held}
    reach: dict[int, set[int]] = {}
    sites: dict[int, Site] = {}
    for node, s, _ in w.call_outputs:
        leaves = set(read_graph([node]).leaves) & stepped_ids
        if leaves & set(moved) and leaves <= set(moved):
            reach[id(node)] = leaves
            sites[id(node)] = s
    # the outermost: a call whose output reaches more of them
    best = sorted(reach, key=lambda k: -len(reach[k]))
    chosen: list[Site] = []
    covered: set[int] = set()
    for k in best:
        if not reach[k] <= covered:
            chosen.append(sites[k])
            covered |= reach[k]
    edits = tuple(e for s in dict.fromkeys(chosen)
                  if (e := E.detach_call(s.path, s.span)) is not None)
    names = w.names()
    keys = tuple(k for k, _ in moved.values())
    tensors = [p for _, p in moved.values()]
    srcs = {s for p in tensors for s in w.ledger.live.get(id(p), []) if s.site}
    at = tuple(s.shown() for s in dict.fromkeys(chosen)) + tuple(
        sorted({s.site.shown() for s in srcs}))
    w.add(ScriptFinding(
        "target", w.iteration,
        f"{plural(len(tensors), 'tensor')} the script moves itself toward other tensors an "
        f"optimizer steps (a momentum or EMA copy) get gradient from the loss: the loss "
        f"trains the copy it compares with through the copy's own output",
        keys, tuple(names.get(id(p), "?") for p in tensors), at, edits,
        advice="compute the copy's output under torch.no_grad(), or .detach() it where it "
               "is made", step=w.step_events - 1, concerned=keys,
        extra={"loses": True}))
