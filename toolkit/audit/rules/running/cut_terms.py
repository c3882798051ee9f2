"""A term of a loss that trains nothing its step uses, because a cut keeps it from what the
rest of the loss trains: an actor's loss ``alpha * log_pi - critic(state, action.detach())``
(TQC's, SAC's, with the action cut) reaches the critic alone, whose gradient from it the
critic's optimizer clears before its own loss, while the actor, which the action was computed
by, trains through the entropy term only. The same with the action drawn by ``sample()`` where
the policy's log-probability is read too (SAC's tanh-Gaussian policy, whose ``rsample()``
carries the reparameterised path): the log-probability trains the policy, the critic's term
nothing.

Told apart, on the graph of each audited ``backward()``, from a cut that belongs:

- the term is one the loss adds (reached from the loss through sums, means, signs, views and
  constant factors, as :mod:`toolkit.audit.rules.constant` reads terms), and it reads a value
  cut from tensors the rest of the loss reaches, which the term itself reaches by no path: a
  stop-gradient on a target (SimSiam's, a TD target from the online network) sits in a term
  that trains the network it cuts, through the other side of the comparison;
- and the gradient the term sends is all cleared before any step used it, while a step
  used the loss's gradient in the cut network: an actor-critic's advantage, cut for the
  actor's term, is read by a term whose gradient the actor's optimizer steps.

A failure at the cut, whose edit removes it (``.detach()`` dropped, ``sample()`` made
``rsample()``), found where the gradient is cleared: the step that trains the cut network
with the rest of the loss came first."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.backward import Graph, places, read_graph
from toolkit.audit.record.frames import Site
from toolkit.audit.record.ledger import Source
from toolkit.audit.result import plural
from toolkit.audit.rules.constant import SUMMING, cut_behind
from toolkit.audit.rules.running import drawn
from toolkit.audit.rules.running.state import WatchState
from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import inputs_of, nodes

__all__ = ["CutTerm", "judged", "keep_draws", "note"]


@dataclass(frozen=True)
class CutTerm:
    """A term of a backward's loss that reads a cut value: what its gradient reaches
    (``leaves``), what the cut kept from it (``behind``, which the rest of the loss reaches),
    the cut's site, how it cut (``"detach"``, ``"sample"``), and the step after its backward
    (where the term's gradient would first have counted)."""

    leaves: frozenset[int]
    behind: frozenset[int]
    site: Site
    how: str
    step: int = 0


def _terms(root: object) -> list[object]:
    """The nodes of the terms the loss ``root`` adds: below it through sums, means, signs,
    views and products by a constant, the first node that is none of these."""
    out: list[object] = []
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        below = inputs_of(node)
        label = node_label(node)
        if label in SUMMING or (label in ("Mul", "Div") and len(below) == 1):
            todo.extend(below)
        elif not hasattr(node, "variable"):
            out.append(node)
    return out


def note(w: WatchState, tensors: list[torch.Tensor], graph: Graph, source: Source) -> None:
    """At an audited ``backward()`` of one loss: the terms of it that read a value cut from
    tensors the rest of the loss reaches (``.detach()``-ed, or drawn by ``sample()`` from a
    distribution whose log-probability the script read), which the term does not reach, kept
    for :func:`judged` by the backward's index."""
    rec = w.staged.rec
    reads: list[tuple[int, frozenset[int], Site, str]] = []
    if rec is not None:
        for call, cuts, _, _, node in rec.cut_read:
            if call != rec.call or node not in graph.nodes:
                continue
            for cut in cuts:
                site = _detach_site(w, cut[2]) if cut[1] == "detach" else None
                if site is not None:
                    reads.append((node, cut_behind(cut), site, "detach"))
    for node, site, behind in [*_weighed_draws(w), *w.drawn_met]:
        if graph.nodes.get(id(node)) is node:
            reads.append((id(node), behind, site, "sample"))
    if not reads or len(tensors) != 1 or tensors[0].grad_fn is None:
        return
    found: list[CutTerm] = []
    for term in _terms(tensors[0].grad_fn):
        inside = {id(n): n for n in nodes(places([term]))}
        leaves = frozenset(id(v) for n in inside.values()
                           if isinstance(v := getattr(n, "variable", None), torch.Tensor)
                           and v.requires_grad)
        for node, behind, site, how in reads:
            if node in inside and leaves and leaves.isdisjoint(behind) and \
                    not behind.isdisjoint(graph.leaves):
                found.append(CutTerm(leaves, behind & graph.leaves.keys(), site, how,
                                     w.step_events))
    if found:
        w.cut_terms = {i: t for i, t in w.cut_terms.items() if i >= w.last_step_event - 8}
        w.cut_terms[source.index] = found


def _weighed_draws(w: WatchState) -> list[tuple[object, Site, frozenset[int]]]:
    """Where each draw a ``log_prob`` read met a graph: the node, the draw's site, the leaves
    behind its distribution."""
    out = []
    for node, keys in w.constants.met.values():
        for k in keys:
            if isinstance(k, drawn.Drawn) and k in w.draws and drawn.weighed(w, k):
                out.append((node, k.site, frozenset(read_graph(w.draws[k][1]).leaves)))
    return out


def keep_draws(w: WatchState) -> None:
    """Before a step forgets the draws: where those a ``log_prob`` read met a graph, kept for
    the rest of the iteration (SAC's critic reads the action before the value network's step,
    and the policy's loss is differentiated after it)."""
    if w.draws and w.log_prob_reads:
        w.drawn_met.extend(_weighed_draws(w))


def _detach_site(w: WatchState, origin: object) -> Site | None:
    """The user's ``.detach()`` that cut ``origin`` (the edge into the node cut), where the
    watch saw it."""
    cut = getattr(origin, "grad_fn", origin)
    return next((site for node, site, _, _ in reversed(w.detaches) if node is cut), None)


def judged(w: WatchState, src: Source) -> bool:
    """Where gradient of ``src`` was cleared unused (at a step): a failure for each of its
    terms (:func:`note`) whose gradient was all cleared so, while a step used its gradient in
    what the term's cut kept from it. Whether one was found (it says more than the note of
    the gradient done in vain)."""
    terms = w.cut_terms.get(src.index)
    if not terms or src.step is None:
        return False
    wasted = {k for i, k in w.ledger.wasted_ever if i == src.index}
    names = w.names()
    held = w.keyed_map()
    found = False
    for term in terms:
        used = (term.behind & src.wrote) - wasted
        if not term.leaves <= wasted or not used:
            continue
        found = True
        if term.how == "sample":
            edit = drawn.rsample_edit(w, term.site)
            called, fix = "drawn by `sample()`", "draw it with rsample()"
        else:
            edit = w.fixes.remove_detach(term.site.path, term.site.span)
            called, fix = "cut by `.detach()`", "drop the .detach()"
        keys = tuple(held[k] for k in used if k in held)
        shown = tuple(names.get(k, "?") for k in used)
        idle = tuple(names.get(k, "?") for k in term.leaves)
        w.add(ScriptFinding(
            "constant_term" if term.how == "detach" else "drawn", src.iteration,
            f"a term of {src.label} (backward at {src.site}) reads a value {called} at "
            f"{term.site}, so it trains nothing a step uses: its gradient reaches only "
            f"{plural(len(idle), 'tensor')} ({', '.join(idle[:3])}"
            f"{', ...' if len(idle) > 3 else ''}), cleared before any step, never the "
            f"{plural(len(shown), 'tensor')} that value was computed by, which the rest of the "
            f"loss trains", keys, shown,
            tuple(s.shown() for s in (term.site, src.site) if s is not None),
            (edit,) if edit is not None else (),
            advice=f"{fix}, so that the term trains what the value was computed by",
            step=term.step, concerned=keys))
    return found
