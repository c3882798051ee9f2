"""The one walk over the backward graph: every edge once, every node expanded once, breadth first."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from toolkit import stop_gradient
from toolkit.lens.backward_graph import is_cut_marker, trace_cuts
from toolkit.lens.graph_walk import closure, nodes, output_roots, walk


def _random_graph(seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A random expression over six leaves, some used twice, some behind stop_gradient."""
    g = torch.Generator().manual_seed(seed)
    leaves = [torch.randn(3, requires_grad=True, generator=g) for _ in range(6)]
    values = list(leaves)
    for _ in range(12):
        i, j = torch.randint(len(values), (2,), generator=g).tolist()
        op = int(torch.randint(4, (1,), generator=g))
        a, b = values[i], values[j]
        values.append([a * b, a + b.tanh(), a - stop_gradient(b), (a.exp() + b).sin()][op])
    return sum(v.sum() for v in values[-4:]), leaves


@pytest.mark.parametrize("seed", range(5))
def test_walk_reports_every_edge_and_expands_each_node_once(seed: int) -> None:
    out, leaves = _random_graph(seed)
    steps = list(walk([out]))
    firsts = [node for _, node, _, first in steps if first]
    assert len({id(n) for n in firsts}) == len(firsts)
    expected_edges = 1 + sum(1 for n in firsts for nxt, _ in n.next_functions if nxt is not None)
    assert len(steps) == expected_edges
    assert list(nodes([out])) == firsts
    # the leaves it reaches are exactly those autograd gives a gradient
    grads = torch.autograd.grad(out, leaves, allow_unused=True)
    reached = {id(n.variable) for n in firsts if hasattr(n, "variable")}
    assert reached == {id(leaf) for leaf, g in zip(leaves, grads) if g is not None}


@pytest.mark.parametrize("seed", range(5))
def test_the_first_edge_to_a_node_lies_on_a_shortest_path(seed: int) -> None:
    out, _ = _random_graph(seed)
    depth: dict[int, int] = {}
    steps = list(walk([out]))
    for parent, node, _, first in steps:
        if first:
            depth[id(node)] = 0 if parent is None else depth[id(parent)] + 1
    for parent, node, _, _ in steps:  # the breadth-first invariant, over every edge
        if parent is not None:
            assert depth[id(node)] <= depth[id(parent)] + 1


def test_expand_stops_behind_a_node_and_a_deep_graph_needs_no_recursion() -> None:
    w = torch.ones(2, requires_grad=True)
    with trace_cuts():
        loss = (w * stop_gradient(w.exp(), name="test.cut")).sum()
    behind = list(nodes([loss]))
    stopped = [n for _, n, _, first in walk([loss], expand=lambda n: not is_cut_marker(n))
               if first]
    assert any(is_cut_marker(n) for n in stopped)
    assert {type(n).__name__ for n in behind} - {type(n).__name__ for n in stopped} == {
        "ExpBackward0"}
    x = w
    for _ in range(sys.getrecursionlimit() + 100):
        x = x * 1.0
    assert sum(1 for _ in nodes([x.sum()])) == sys.getrecursionlimit() + 102


def test_roots_without_a_graph_and_the_roots_of_an_output() -> None:
    w = torch.ones(2, requires_grad=True)
    assert list(walk([w, torch.ones(1)])) == []

    @dataclasses.dataclass
    class Out:
        loss: torch.Tensor
        extra: dict

    a, b = w.sum(), w.exp().sum()
    assert output_roots(Out(a, {"b": [b]}), "f") == [a, b]
    with pytest.raises(TypeError, match=r"f: output must be a tensor or a list/tuple/dict of "
                                        r"tensors, got NoneType"):
        output_roots([a, None], "f", "output")


def test_closure_follows_any_neighbour_function() -> None:
    children = {0: [1, 2], 1: [3], 2: [3], 3: [], 4: [0]}
    assert closure([0], children.__getitem__) == {0, 1, 2, 3}
    assert closure([], children.__getitem__) == set()
