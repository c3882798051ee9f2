"""The backward graph a ``backward()`` is about to run, read before it runs: its nodes (with
the order autograd made them in) and the leaves it reaches, read by the walk every graph tool
of the toolkit shares (:mod:`toolkit.lens.graph_walk`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch

from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import nodes

__all__ = ["Graph", "beside", "between", "current_sequence", "places", "reaches", "read_graph",
           "toward"]


class Graph:
    """The nodes reachable from some roots (by identity) and the leaf tensors they accumulate
    into (by ``id``)."""

    def __init__(self) -> None:
        self.nodes: dict[int, object] = {}
        self.leaves: dict[int, torch.Tensor] = {}


class _Place(NamedTuple):
    """A node as a root of :func:`~toolkit.lens.graph_walk.walk` (its output 0)."""

    grad_fn: object
    output_nr: int = 0


def places(roots: Iterable[object]) -> list[_Place]:
    """``roots`` (``grad_fn`` nodes; ``None`` skipped) as roots of the walk."""
    return [_Place(r) for r in roots if r is not None]


def read_graph(roots: Iterable[object]) -> Graph:
    """Every node and leaf behind ``roots`` (``grad_fn`` nodes; ``None`` skipped), read by the
    one walk of the backward graph (:func:`toolkit.lens.graph_walk.nodes`)."""
    graph = Graph()
    for node in nodes(places(roots)):
        graph.nodes[id(node)] = node
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            graph.leaves[id(variable)] = variable
    return graph


def toward(graph: Graph, leaves: set[int]) -> set[int]:
    """The ids of the nodes of ``graph`` behind which one of ``leaves`` (tensor ids) lies,
    leaves' own ``AccumulateGrad`` nodes left out: the computation that carries gradient into
    them (one pass, every node after its inputs)."""
    found: set[int] = set()
    for key, kids in _bottom_up(graph):
        if getattr(graph.nodes[key], "variable", None) is None and any(
                k in found or id(getattr(graph.nodes[k], "variable", None)) in leaves
                for k in kids):
            found.add(key)
    return found


def reaches(starts: Iterable[object], target: object) -> bool:
    """Whether the node ``target`` lies behind the nodes ``starts``."""
    return any(node is target for node in nodes(places(starts)))


def current_sequence() -> int:
    """The sequence number autograd gives the next node it makes on this thread: every node
    made before this call has a smaller one."""
    with torch.enable_grad():
        probe = torch.zeros((), requires_grad=True)
        return (probe * 1).grad_fn._sequence_nr() + 1  # type: ignore[union-attr]


def sequence(node: object) -> int:
    """The order in which autograd made ``node`` (``-1`` where it keeps none)."""
    try:
        return int(node._sequence_nr())  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return -1


def _bottom_up(graph: Graph) -> Iterator[tuple[int, list[int]]]:
    """Each node of ``graph`` (by id) with the ids of its inputs in it, every node after its
    inputs."""
    done: set[int] = set()
    for start in graph.nodes:
        stack = [(start, False)]
        while stack:
            key, ready = stack.pop()
            if key in done:
                continue
            kids = [id(n) for n, _ in graph.nodes[key].next_functions  # type: ignore[attr-defined]
                    if n is not None and id(n) in graph.nodes]
            if not ready:
                stack.append((key, True))
                stack.extend((k, False) for k in kids if k not in done)
                continue
            done.add(key)
            yield key, kids


def between(graph: Graph, stepped: dict[int, int]) -> dict[int, set[int]]:
    """The leaves no optimizer steps that lie between the loss and stepped tensors (a
    predictor on top of a trained encoder, a head left out of its model's optimizer), each with
    the optimizers (``stepped``: tensor id -> optimizer index) stepping the tensors below them.

    A leaf's operation is the first node above it that reads more than it (a view, a
    transpose or a normalisation of a weight, made of the weight alone, is the weight
    itself: ArcFace's ``F.normalize(W)``); the leaf lies between when that operation also
    reaches a stepped tensor. An unstepped leaf below everything stepped (a backbone under
    a trained head, a target network read on data) reaches nothing stepped: not between."""
    if all(k in stepped for k in graph.leaves):
        return {}   # every leaf stepped (the common case): none lies between
    below: dict[int, set[int]] = {}   # node id -> optimizers stepping a tensor it reaches
    alone: dict[int, int | None] = {}  # node id -> the one leaf it reaches (-1: several)
    for key, kids in _bottom_up(graph):
        variable = getattr(graph.nodes[key], "variable", None)
        mine = {stepped[id(variable)]} if isinstance(variable, torch.Tensor) and \
            id(variable) in stepped else set()
        leaves = {id(variable)} if isinstance(variable, torch.Tensor) else set()
        for k in kids:
            mine |= below.get(k, set())
            one = alone.get(k)
            leaves |= {one} if one is not None else set()
        below[key] = mine
        alone[key] = next(iter(leaves)) if len(leaves) == 1 else (-1 if leaves else None)
    parents: dict[int, list[int]] = {}
    for key, node in graph.nodes.items():
        for n, _ in node.next_functions:  # type: ignore[attr-defined]
            if n is not None and id(n) in graph.nodes:
                parents.setdefault(id(n), []).append(key)
    found: dict[int, set[int]] = {}
    for key, node in graph.nodes.items():
        variable = getattr(node, "variable", None)
        if not isinstance(variable, torch.Tensor) or id(variable) in stepped:
            continue
        todo, seen, optimizers = list(parents.get(key, ())), set(), set()
        while todo:
            up = todo.pop()
            if up in seen:
                continue
            seen.add(up)
            if alone.get(up) == id(variable):   # made of the leaf alone: the operation
                todo.extend(parents.get(up, ()))  # that reads it is above
            elif below.get(up):
                optimizers |= below[up]
            else:
                optimizers |= _scaling(graph, up, parents, below, alone)
        if optimizers:
            found[id(variable)] = optimizers
    return found


#: the operations that add a loss's terms
_TERMS = frozenset({"Add", "Sub", "Mean", "Sum"})
#: and what a loss's terms pass through from its root down: its sums, means and negations
_LOSS_TERMS = _TERMS | {"Neg"}


def beside(graph: Graph, stepped: dict[int, int]) -> dict[int, set[int]]:
    """The leaves no optimizer steps that a loss trains in a term of their own, beside terms
    that train stepped tensors (``mse(q1(s), y) + mse(q2(s), y)`` with ``q2`` left out of
    the critics' optimizer), each with the optimizers stepping the tensors of the other
    terms: every operation that first reads both (from the leaves up) is a sum of terms.
    A backbone under a trained head meets it in the head's own operation, not a sum, and has
    no term of its own."""
    if all(k in stepped for k in graph.leaves):
        return {}
    opts: dict[int, frozenset[int]] = {}      # node -> optimizers stepping what it reaches
    free: dict[int, frozenset[int]] = {}      # node -> unstepped leaves it reaches
    kids: dict[int, list[int]] = {}
    for key, below in _bottom_up(graph):
        variable = getattr(graph.nodes[key], "variable", None)
        mine: set[int] = set()
        unstepped: set[int] = set()
        if isinstance(variable, torch.Tensor) and variable.requires_grad:
            if id(variable) in stepped:
                mine.add(stepped[id(variable)])
            else:
                unstepped.add(id(variable))
        for k in below:
            mine |= opts[k]
            unstepped |= free[k]
        opts[key], free[key], kids[key] = frozenset(mine), frozenset(unstepped), below
    # each unstepped leaf's first meetings with stepped tensors: the nodes reaching both whose
    # inputs do not (one pass over the nodes, not one per leaf)
    meets: dict[int, list[int]] = {}
    for key, below in kids.items():
        if opts[key]:
            for leaf in free[key].difference(*(free[c] for c in below if opts[c])):
                meets.setdefault(leaf, []).append(key)
    out = {leaf: set().union(*(opts[k] for k in at)) for leaf, at in meets.items()
           if all(node_label(graph.nodes[k]) in _TERMS for k in at)}
    # or a term of the loss of their own, whatever else reaches them: the terms are what the
    # loss's sums add (from the root down through sums, means and negations alone), and one
    # that reaches unstepped leaves and nothing an optimizer steps, beside one that does,
    # trains them alone (a latent ODE's KL term, of a recognition network left out of the
    # optimizer, whose output the trained ODE reads as well)
    inputs = {k for below in kids.values() for k in below}
    terms: list[int] = []
    todo, seen = [k for k in kids if k not in inputs], set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        if node_label(graph.nodes[key]) in _LOSS_TERMS:
            todo.extend(kids[key])
        else:
            terms.append(key)
    trained = set().union(*(opts[t] for t in terms))
    if trained:
        for leaf in set().union(*(free[t] for t in terms if not opts[t])):
            out.setdefault(leaf, set()).update(trained)
    return out


#: operations whose gradient to one input is scaled by another's values
_PRODUCTS = frozenset({"Mul", "Div", "Mm", "Bmm", "Mv", "Addmm", "Baddbmm", "Addbmm", "Dot",
                       "Convolution"})


def _scaling(graph: Graph, start: int, parents: dict[int, list[int]],
             below: dict[int, set[int]], alone: dict[int, int | None]) -> set[int]:
    """The optimizers of a computation that the leaf's operation ``start`` (reaching nothing
    stepped itself) scales: up through nodes that reach nothing stepped, the first product
    that also reads, through an operation of several leaves, tensors an optimizer steps
    (QMIX's mixing weights, made by hypernetworks from the state, times the agents' Q-values:
    the loss's gradient to the agents passes through them). A product whose stepped input is
    one weight read directly (a trained head on a backbone below it) does not count: the
    backbone lies below the head."""
    out: set[int] = set()
    todo, seen = [start], {start}
    while todo:
        k = todo.pop()
        for up in parents.get(k, ()):
            if up in seen:
                continue
            seen.add(up)
            if not below.get(up):
                todo.append(up)
                continue
            node = graph.nodes[up]
            if node_label(node) not in _PRODUCTS:
                continue
            for n, _ in node.next_functions:  # type: ignore[attr-defined]
                c = id(n) if n is not None else None
                if c is not None and c != k and below.get(c) and alone.get(c) == -1:
                    out |= below[c]
    return out
