"""Walking the backward graph: the one traversal under the gradient tools, the lens, the graph
drawing, the step audit and the graph-size measure.

A tensor ``t`` enters its backward graph at ``t.grad_fn``, as output ``t.output_nr`` of that
node. Each node lists in ``node.next_functions`` the ``(node, output_nr)`` pairs its backward
sends gradient to (``None`` for an input that needs none); a leaf that requires grad is reached
as its ``AccumulateGrad`` node, which holds it in ``node.variable``. :func:`walk` visits this
graph breadth first without running backward; :func:`closure` is reachability over any graph
derived from it (node indices, reversed edges).

References:
    PyTorch, "Autograd mechanics", https://pytorch.org/docs/stable/notes/autograd.html ;
    ``torch.autograd.graph.Node``, https://pytorch.org/docs/stable/autograd.html#autograd-graph
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, TypeVar

import torch

from toolkit._utils.trees import tree_map

__all__ = ["closure", "inputs_of", "nodes", "output_roots", "walk"]

K = TypeVar("K", bound=Hashable)


def walk(roots: Iterable[Any], *, expand: Callable[[Any], bool] | None = None
         ) -> Iterator[tuple[Any, Any, int, bool]]:
    """Every edge of the backward graph behind ``roots``, breadth first: ``(parent, node,
    output_nr, first)``, gradient flowing from ``parent`` into output ``output_nr`` of ``node``.

    ``roots`` are tensors, or anything with ``grad_fn`` and ``output_nr`` (a place in the graph
    kept without its tensor); those without a ``grad_fn`` are skipped. Their entry edges come
    first (``parent=None``), then the non-``None`` ``next_functions`` of each node in the order
    first reached. ``first`` says whether ``node`` is met for the first time: every edge is
    reported, every node expanded once (a shared subgraph is not walked twice), and a node's
    first edge lies on a path with fewest nodes from a root. ``expand(node)`` false keeps the
    walk from going behind ``node`` (a cut), which is still reported. Iterative, so no recursion
    limit; the nodes met stay alive while the walk runs, so their ``id`` is not reused.

    >>> import torch
    >>> from toolkit.lens.graph_walk import walk
    >>> x = torch.ones(2, requires_grad=True)
    >>> steps = walk([(x * x).sum()])  # x is reached twice: Mul's two inputs
    >>> [(type(node).__name__, first) for parent, node, nr, first in steps]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('SumBackward0', True), ('MulBackward0', True), ('AccumulateGrad', True),
     ('AccumulateGrad', False)]
    """
    seen: dict[int, Any] = {}
    queue: deque[Any] = deque()
    parent, edges = None, [(root.grad_fn, root.output_nr) for root in roots]
    while True:
        for node, nr in edges:
            if node is not None:
                key = id(node)
                first = key not in seen
                if first:
                    seen[key] = node
                    queue.append(node)
                yield parent, node, nr, first
        if not queue:
            return
        parent = queue.popleft()
        edges = parent.next_functions if expand is None or expand(parent) else ()


def nodes(roots: Iterable[Any]) -> Iterator[Any]:
    """Each distinct node behind ``roots`` once (``AccumulateGrad`` included), breadth first."""
    return (node for _, node, _, first in walk(roots) if first)


def inputs_of(node: Any) -> list[Any]:
    """The nodes ``node``'s backward sends gradient to (its ``next_functions``, ``None``s left
    out)."""
    return [n for n, _ in node.next_functions if n is not None]


def closure(starts: Iterable[K], neighbours: Callable[[K], Iterable[K]]) -> set[K]:
    """``starts`` and everything reachable from them through ``neighbours`` (iterative)."""
    seen = set(starts)
    stack = list(seen)
    while stack:
        for nxt in neighbours(stack.pop()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def output_roots(output: Any, where: str, arg: str = "loss") -> list[torch.Tensor]:
    """The tensors of ``output``: a tensor or a nested dict/list/tuple of them (tree order).

    Raises ``TypeError`` naming ``where`` and ``arg`` for any other leaf.
    """
    roots: list[torch.Tensor] = []

    def take(leaf: Any) -> None:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(f"{where}: {arg} must be a tensor or a list/tuple/dict of tensors, "
                            f"got {type(leaf).__name__}")
        roots.append(leaf)

    tree_map(take, output)
    return roots
