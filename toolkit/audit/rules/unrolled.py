"""Uncut unrolls: a loss that backpropagates through every pass of an iteration in the forward
whose earlier passes its form says were meant to be cut. Two forms say so
(:class:`~toolkit.audit.kinds.UnrollKind`):

- **split**: the loop's pass is written again right after it
  (:mod:`toolkit.audit.record.unrolls`: a fixed-point solve followed by one differentiable
  step, an unrolled optimisation split into the steps before the last few and those). The
  nodes of the loss's graph that the earlier part made (a line of it on the user's stack where
  autograd made them) are the earlier passes kept in the graph. The fix cuts the state where
  the earlier part assigns it; a state the code began as a tensor that requires grad by itself
  (the weights of an unrolled optimisation, differentiated at each pass) is handed on as one.
- **sampled**: an estimate refined pass by pass, which the loss compares with a target at each
  pass, read by the next pass as the positions where it samples its input (the grid of
  ``grid_sample``) through position arithmetic alone, the sampled values going on into a later
  estimate. Each pass is trained by its own comparison; kept in the graph, every later pass
  also trains the earlier ones through the gradient of where they sample, which is the local
  slope of the sampled features. RAFT cuts the flow where each refinement iteration begins
  (Teed and Deng, "RAFT: Recurrent All-Pairs Field Transforms for Optical Flow", ECCV 2020,
  ``coords1 = coords1.detach()``), as Deformable DETR's iterative box refinement cuts its
  reference points between decoder layers (Zhu et al., ICLR 2021). The fix cuts the estimate
  where the next pass reads it. A position no loss compares (a spatial transformer's, an
  unsupervised flow warped into a photometric loss) learns through the sampling alone: no
  finding.

The graph decides, not the syntax alone: a published script's cut leaves the loss none of
those nodes, and no finding is made.
"""

from __future__ import annotations

import dataclasses
import linecache
from typing import TYPE_CHECKING, Any

from toolkit.audit.findings import UnrolledLoop
from toolkit.audit.kinds import UnrollKind
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unrolls import Unroll, handed_on, unrolls_in
from toolkit.audit.rules.targets import COMPARE, EVEN
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS
from toolkit.audit.truth.proof import CutBefore, MadeAt
from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import closure, inputs_of

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check"]


#: the operations that sample their input at positions given as a tensor (their second input)
_SAMPLERS = frozenset({"GridSampler2D", "GridSampler3D"})
#: nodes walked from one sampler's positions before the walk gives up
_MAX_WALK = 4096


def check(step: RecordedStep) -> Found:
    """The rule: per loss, each split whose earlier part made nodes the loss reaches, through
    which it reaches a tensor its optimizer steps; and each place where a loop hands on an
    estimate the loss compares, read as the positions of a later sampling."""
    found = []
    for loss in step.searches:
        found += _split(step, loss)
        found += _sampled(step, loss)
    return {"unrolled": found}


def _split(step: RecordedStep, loss: str) -> list[Wanted[UnrolledLoop]]:
    """Each split whose earlier part made nodes the loss reaches; where the syntax alone does
    not show the later part runs the same pass, a network both parts call."""
    # split -> (a line of its earlier part, the nodes made there, the networks called there)
    earlier: dict[Unroll, tuple[Line, list[int], set[str]]] = {}
    later: dict[Unroll, set[str]] = {}   # split -> the networks its later part calls
    splits: dict[str, tuple[Unroll, ...]] = {}
    for key, node in step.searches[loss].nodes.items():
        made = step.rec.made.get(key)
        if made is None or made[0] is not node:
            continue
        network = step.label.module_of(node)
        for line in made[1]:
            if line.path not in splits:
                splits[line.path] = unrolls_in(line.path) if line.path else ()
            for unroll in splits[line.path]:
                if unroll.holds(line.number):
                    entry = earlier.setdefault(unroll, (line, [], set()))
                    entry[1].append(key)
                    entry[2].update([network] if network else [])
                elif unroll.repeats_at(line.number) and network:
                    later.setdefault(unroll, set()).add(network)
    found = []
    for unroll, (seen, keys, networks) in earlier.items():
        if not unroll.repeated and not networks & later.get(unroll, set()):
            continue
        finding = _finding(step, loss, unroll, seen, keys)
        if finding is not None:
            found.append(finding)
    return found


def _finding(step: RecordedStep, loss: str, unroll: Unroll, seen: Line,
             keys: list[int]) -> Wanted[UnrolledLoop] | None:
    trained = _trained(step, loss, keys)
    if not trained:
        return None
    cut = dataclasses.replace(seen, number=unroll.at, span=None,
                              text=linecache.getline(unroll.path, unroll.at).strip())
    again = dataclasses.replace(seen, number=unroll.again, span=None,
                                text=linecache.getline(unroll.path, unroll.again).strip())
    lost = _only_through(step, loss, keys, trained)
    place = CutBefore(again, unroll.indent, unroll.state, leaf=unroll.leaf,
                      start=unroll.start if lost else None)
    fix = (f"cut `{unroll.state}` between the loop and the pass it repeats "
           f"(`{place.statement}`), so that the loss backpropagates through the repeated pass "
           f"alone, as the one-step or truncated gradient the split is written for")
    if lost:
        fix += (f"; {', '.join(lost)} {'is' if len(lost) == 1 else 'are'} trained only through "
                f"the loop, from what `{unroll.state}` began as: its gradient goes on as if the "
                f"loop were the identity (Chang et al. 2022's implicit slot attention)")
    finding = UnrolledLoop(loss=loss, kind=UnrollKind.SPLIT, state=unroll.state, cut=cut,
                           shown_by=again, n_nodes=len(keys), parameters=trained, fix=fix)
    places = () if lost and unroll.start is None else (place,)
    return Wanted(finding, FirstOf((Option(places, fix, (cut, again)),)))


def _only_through(step: RecordedStep, loss: str, keys: list[int],
                  trained: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``trained`` that ``loss`` reaches only through the nodes ``keys``."""
    graph = step.graphs[loss]
    inside = set(keys)
    removed = {(p, k) for k in keys for p in graph.callers.get(k, ()) if p not in inside}
    elsewhere = graph.leaves(graph.reach(graph.roots, removed))
    return tuple(step.rec.names.name(t) for i, t in step.stepped[loss].items()
                 if i not in elsewhere and step.rec.names.name(t) in trained)


def _trained(step: RecordedStep, loss: str, keys: list[int]) -> tuple[str, ...]:
    """The names of the tensors ``loss``'s optimizer steps that the nodes ``keys`` reach."""
    graph = step.graphs[loss]
    leaves = graph.leaves(graph.reach(keys))
    return tuple(step.rec.names.name(t) for i, t in step.stepped[loss].items() if i in leaves)


def _sampled(step: RecordedStep, loss: str) -> list[Wanted[UnrolledLoop]]:
    """One failure per place where a loop hands on, uncut, an estimate the loss compares and
    a later pass reads as the positions of a sampling whose values go on into another
    compared estimate (:func:`~toolkit.audit.record.unrolls.handed_on` says where)."""
    graph = step.graphs[loss]
    nodes = graph.search.nodes
    samplers = [key for key, node in nodes.items() if node_label(node) in _SAMPLERS]
    if not samplers:
        return []
    compared = _compared(graph)
    # where the loop hands an estimate on -> (the name, the sampling's line, the estimates)
    found_at: dict[Line, tuple[str, Line | None, dict[int, Any]]] = {}
    for key in samplers:
        grid = nodes[key].next_functions[1][0] if len(nodes[key].next_functions) > 1 else None
        if grid is None:
            continue
        met = _estimates_below(graph, id(grid), compared)
        if not met or not compared.keys() & _above_a_layer(graph, key):
            continue
        for estimate in met:
            made = _made_line(step, nodes[estimate])
            handed = handed_on(made.path, made.number) if made is not None and made.path \
                else None
            if made is None or handed is None:
                continue   # no loop of the user's code hands it on
            cut = dataclasses.replace(made, number=handed.line, span=handed.span,
                                      text=linecache.getline(made.path, handed.line).strip())
            entry = found_at.setdefault(cut, (handed.name, _made_line(step, nodes[key]), {}))
            entry[2][estimate] = nodes[estimate]
    found = []
    for cut, (state, sampling, estimates) in found_at.items():
        trained = _trained(step, loss, list(estimates))
        if not trained:
            continue
        fix = (f"cut `{state}` where the loop hands it on to its next pass ({state}.detach()), "
               f"as RAFT cuts its flow and Deformable DETR its reference points: each pass is "
               f"then trained by its own comparison, not through where the passes after it "
               f"sample")
        finding = UnrolledLoop(loss=loss, kind=UnrollKind.SAMPLED, state=state, cut=cut,
                               shown_by=sampling or cut, n_nodes=len(estimates),
                               parameters=trained, fix=fix)
        found.append(Wanted(finding, FirstOf((Option((MadeAt(cut),), fix, (cut,)),))))
    return found


def _compared(graph: Graph) -> dict[int, Any]:
    """The nodes the loss compares with a constant, and the views of them: the first input of
    a loss function whose target has no graph (``F.mse_loss(pred, y)``), or the operand of a
    difference with a tensor of no graph under an even function (``(pred - y).abs()``)."""
    out: dict[int, Any] = {}
    for node in graph.search.nodes.values():
        label, inputs = node_label(node), [n for n, _ in node.next_functions]
        side = None
        if label in COMPARE and len(inputs) == 2 and inputs[1] is None:
            side = inputs[0]
        elif label in EVEN and inputs and inputs[0] is not None \
                and node_label(inputs[0]) == "Sub":
            sides = [n for n, _ in inputs[0].next_functions]
            if len(sides) == 2 and (sides[0] is None) != (sides[1] is None):
                side = sides[0] or sides[1]
        while side is not None:
            out[id(side)] = side
            below = inputs_of(side)
            side = below[0] if node_label(side) in VIEWS and len(below) == 1 else None
    return out


def _estimates_below(graph: Graph, grid: int, compared: dict[int, Any]) -> set[int]:
    """The compared nodes the positions ``grid`` of a sampling are computed from through
    position arithmetic alone (no operation on the way reads a leaf: a layer's output is data
    to it)."""
    nodes = graph.search.nodes
    found: set[int] = set()
    seen: set[int] = set()
    stack = [grid]
    while stack and len(seen) < _MAX_WALK:
        key = stack.pop()
        if key in compared:
            found.add(key)
            continue
        if key in seen:
            continue
        seen.add(key)
        node = nodes.get(key)
        if node is None or _reads_a_leaf(node):
            continue
        stack.extend(graph.children.get(key, ()))
    return found


def _reads_a_leaf(node: Any) -> bool:
    return any(getattr(n, "variable", None) is not None for n, _ in node.next_functions
               if n is not None)


def _above_a_layer(graph: Graph, key: int) -> set[int]:
    """The nodes from which ``key`` is reached only through an operation that reads a leaf (a
    layer): what the values made at ``key`` go on into through a network, not what merely
    compares or rearranges them."""
    nodes = graph.search.nodes
    everything = graph.useful({key}, set(nodes))
    plain = closure([key], lambda k: [c for c in graph.callers.get(k, ())
                                      if not _reads_a_leaf(nodes[c])])
    return everything - plain


def _made_line(step: RecordedStep, node: Any) -> Line | None:
    """The innermost line of the user's code that made ``node`` (inside a forward the user
    wrote, where a module's call returned it)."""
    inside = step.rec.made_inside.get(id(node))
    if inside is not None and inside[0] is node:
        return inside[1]
    made = step.rec.made.get(id(node))
    return made[1][0] if made is not None and made[0] is node and made[1] else None


