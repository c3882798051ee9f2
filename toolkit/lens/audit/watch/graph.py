"""The backward graph a ``backward()`` is about to run, read before it runs: its nodes (with
the order autograd made them in) and the leaves it reaches."""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["Graph", "current_sequence", "read_graph"]


class Graph:
    """The nodes reachable from some roots (by identity) and the leaf tensors they accumulate
    into (by ``id``)."""

    def __init__(self) -> None:
        self.nodes: dict[int, object] = {}
        self.leaves: dict[int, torch.Tensor] = {}


def read_graph(roots: Iterable[object], stop: set[int] | None = None) -> Graph:
    """Walk from ``roots`` (``grad_fn`` nodes) to every node and leaf behind them; nodes whose id
    is in ``stop`` are not entered."""
    graph = Graph()
    todo = [r for r in roots if r is not None]
    while todo:
        node = todo.pop()
        key = id(node)
        if key in graph.nodes or (stop and key in stop):
            continue
        graph.nodes[key] = node
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            graph.leaves[id(variable)] = variable
        todo.extend(nxt for nxt, _ in node.next_functions if nxt is not None)  # type: ignore[attr-defined]
    return graph


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
