"""A hard value without its straight-through term (``dead``, for the loss term that reads it):
a network that trains reads a value an operation with no derivative made from another
network's output, and a loss reads its output (:mod:`~toolkit.audit.rules.running.hard_values`).

:func:`called` sees each call of a network in an audited iteration: a floating argument with no
graph, read after another call made an output with one, is a suspect (once per line and
argument); while the watch follows values (:func:`enter` to :func:`leave`: one iteration) it
keeps the calls that read a hard value. :func:`reached` judges them at each ``backward()``."""

from __future__ import annotations

import torch
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.backward import Graph
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import tensors_in
from toolkit.audit.result import plural
from toolkit.audit.rules.running.hard_values import Hard, straight_through_after
from toolkit.audit.rules.running.state import WatchState

__all__ = ["called", "enter", "leave", "reached"]


def called(w: WatchState, module: nn.Module, args: tuple, outs: list[torch.Tensor],
           site: Site) -> None:
    """A call of a network with tensors, with gradients on, by the user's code (before its
    outputs are recorded)."""
    after_graph = bool(w.call_outputs) and w.call_outputs[-1][-1] >= w.last_step_event
    following = w.hard is not None and w.hard.on
    # (a module with no tensors of its own or below makes no graph from a constant)
    if not (after_graph or following) or not (module._parameters or module._modules) or \
            isinstance(module, nn.modules.loss._Loss):
        return
    for i, arg in enumerate(args):
        for t in tensors_in(arg):
            if t.requires_grad or not t.is_floating_point():
                continue
            key = (site, i)
            if following:
                origin = w.hard.origin(t)  # type: ignore[union-attr]
                if origin is not None:
                    w.hard_calls.append((origin, module, [o.grad_fn for o in outs
                                                          if o.grad_fn is not None], site, key))
            if after_graph and key not in w.hard_judged and key not in w.hard_suspects:
                # its iteration is known at the next backward() (see :func:`reached`)
                w.hard_suspects[key] = (None, w.step_events)
            break


def enter(w: WatchState) -> None:
    """After a step: follow values through the next iteration, when there are suspects and
    it is audited."""
    if w.hard is None and w.hard_suspects and not w.done() and w.audited(w.iteration + 1):
        w.hard = Hard()
        w.hard.enter()
        w.hard_since = w.iteration


def leave(w: WatchState) -> None:
    """At a step: the suspects the watch followed one iteration for are judged; it stops
    following values."""
    if w.hard is None or w.iteration <= w.hard_since:
        return
    if w.hard.leave():
        w.hard_judged.update(w.hard_suspects)
        w.hard_suspects = {}
        w.hard_calls = []
        w.hard = None


def reached(w: WatchState, graph: Graph, site: Site | None) -> None:
    """Before a ``backward()``: each kept call whose output this loss's graph reaches, that
    read a hard value made from a network the call's own does not hold, by an operation no
    graph scores the value through, is a failure at the line where the hard value takes the
    soft value's shape."""
    for key, (iteration, step) in w.hard_suspects.items():
        if iteration is None:
            w.hard_suspects[key] = (w.iteration, step)
    if not w.hard_calls:
        return
    held = w.keyed_map()
    names = w.names()
    kept = []
    for call in w.hard_calls:
        origin, module, nodes, call_site, key = call
        if not any(graph.nodes.get(id(n)) is n for n in nodes):
            kept.append(call)
            continue
        if not origin.stands_in:
            continue   # other values picked by a hard mask (a route): no straight-through
        producers = origin.producers()
        own = {id(p) for p in module.parameters()}
        if own & set(producers) or origin.scored(producers):
            continue
        stepped = [(held[i], p) for i, p in producers.items()
                   if i in held and p.requires_grad]
        if not stepped:
            continue
        first = w.hard_suspects.get(key, (None, w.step_events))
        first = (w.iteration if first[0] is None else first[0], first[1])
        keys = tuple(k for k, _ in stepped)
        shown = tuple(names.get(id(p), k) for k, p in stepped)
        edit = straight_through_after(w.fixes, origin)
        places = [s for s in (origin.shaped, origin.made, call_site, site) if s is not None]
        at = tuple(dict.fromkeys(s.shown() for s in places))
        soft = f"`{origin.soft_name}`" if origin.soft_name else "a value with a graph"
        consumer = w.roots.get(id(module), (module, type(module).__name__))[1]
        w.add(ScriptFinding(
            "dead", first[0],
            f"{w.loss_label(site)} (backward at {site}) reads `{consumer}` at {call_site}, "
            f"whose input was made from {soft} at {origin.made} by {origin.what}, which has no "
            f"derivative: that loss passes no gradient to the "
            f"{plural(len(keys), 'tensor')} that made {soft} (a hard value without its "
            f"straight-through term)", keys, shown, at, (edit,) if edit is not None else (),
            advice="pass the gradient straight through where the hard value is made: hard = "
                   "(hard - soft).detach() + soft, the same values forward, the soft value's "
                   "gradient back", step=first[1], concerned=keys))
    w.hard_calls = kept
