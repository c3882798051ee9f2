"""One loss's backward graph as the audit's rules read it: its edges both ways, what is
reachable without some edges, and the regions of computed weights (``parametrize``, the
``spectral_norm`` / ``weight_norm`` hooks) where no cut may go."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolkit.audit.record.recording import Recording
from toolkit.lens.backward_graph import ShortestPaths
from toolkit.lens.graph_walk import closure, walk

__all__ = ["Graph", "parameter_regions"]

_MAX_REGION = 256  # nodes: a weight computed by more is a network, not a reparametrisation


class Graph:
    """The edges of one loss's search, both ways, by node ``id`` (built once per loss)."""

    def __init__(self, search: ShortestPaths) -> None:
        self.search = search
        self.children: dict[int, list[int]] = {}
        self.callers: dict[int, list[int]] = {}
        self.roots: list[int] = []
        self._reaching: dict[frozenset[int], set[int]] = {}
        for parent, node, _, _ in walk(search.outputs, expand=search.expand):
            if parent is None:
                self.roots.append(id(node))
            else:
                self.children.setdefault(id(parent), []).append(id(node))
                self.callers.setdefault(id(node), []).append(id(parent))

    def reach(self, starts: list[int], removed: set[tuple[int, int]] | frozenset = frozenset()
              ) -> set[int]:
        """Nodes reachable from ``starts`` without the edges ``removed`` (parent, child)."""
        return closure(starts, lambda k: [c for c in self.children.get(k, ())
                                          if (k, c) not in removed])

    def leaves(self, met: Iterable[int]) -> set[int]:
        """``id`` of the tensors whose leaf nodes are among the node ids ``met``."""
        nodes = self.search.nodes
        return {id(v) for k in met if (v := getattr(nodes[k], "variable", None)) is not None}

    def reaching(self, tensors: Iterable[int]) -> set[int]:
        """Nodes from which the leaf node of a tensor of ``tensors`` (by ``id``) is reached:
        the part of the graph that trains them (computed once per set: several rules of one
        backward ask for the tensors its optimizers step)."""
        leaf = self.search.leaf_node
        key = frozenset(k for k in tensors if k in leaf)
        found = self._reaching.get(key)
        if found is None:
            found = self._reaching[key] = self.useful({leaf[k] for k in key},
                                                      set(self.search.nodes))
        return found

    def useful(self, targets: set[int], within: set[int],
               removed: set[tuple[int, int]] | frozenset = frozenset()) -> set[int]:
        """Nodes of ``within`` from which a node of ``targets`` is reached, edges ``removed``
        left out (the walk follows reversed edges)."""
        return closure({t for t in targets if t in within},
                       lambda k: [c for c in self.callers.get(k, ())
                                  if c in within and (c, k) not in removed])


def parameter_regions(rec: Recording, leaf_ids: set[int]) -> set[int]:
    """Node ids of every weight computation the recording saw: the graph below a weight with a
    graph that a layer function read, when it is small and ends only in named tensors.

    ``leaf_ids``: ``id`` of the tensors the audit knows (parameters, buffers, optimizer
    tensors). A computed weight whose graph reaches anything else (an activation, a leaf of
    the step) is left alone: it is data, not a reparametrisation.
    """
    region: set[int] = set()
    for root in rec.computed.values():
        if id(root) in region:
            continue
        found: set[int] = set()
        for _, node, _, first in walk([_Edge(root)]):
            if not first:
                continue
            found.add(id(node))
            variable = getattr(node, "variable", None)
            if (variable is not None and id(variable) not in leaf_ids) or len(found) > _MAX_REGION \
                    or (node is not root and _is_network_output(rec, node)):
                break
        else:
            region |= found
    return region


def _is_network_output(rec: Recording, node: Any) -> bool:
    """Whether ``node`` is the output of a module call other than a parametrization's."""
    entry = rec.outputs.get(id(node))
    return entry is not None and entry[0] is node and ".parametrizations." not in f".{entry[1]}."


class _Edge:
    """A place in the graph (``grad_fn``, ``output_nr``) that :func:`walk` accepts as a root."""

    def __init__(self, node: Any) -> None:
        self.grad_fn, self.output_nr = node, 0


