"""The backward graph as data: readable node names, shortest paths, and cuts made visible.

A loss's backward graph is reachable from ``loss.grad_fn`` through ``next_functions``; a
parameter appears as the ``AccumulateGrad`` node that holds it (``node.variable``). A plain cut
(``detach``) leaves no trace in that graph: the branch behind it simply is not there. Inside
:func:`trace_cuts` every active ``stop_gradient`` / ``as_constant`` of the toolkit keeps the
graph behind the cut and inserts a *marker* node named after its block, whose backward returns no
gradient; values and gradients stay exactly those of the plain cut. :func:`gradient_graph`
turns the result into plain data (nodes, edges, which named blocks cut what, which parameter
group each node leads to) that can be saved as JSON and drawn by
:func:`toolkit.lens.graph_draw.draw_gradient_graph`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit._utils.trees import tree_map
from toolkit.core.stop_gradient import observe_cuts
from toolkit.lens.graph_walk import closure, output_roots, walk

__all__ = ["CutTrace", "GradientGraph", "gradient_graph", "named_tensors", "trace_cuts"]

_SUFFIX = re.compile(r"Backward\d*$")


# --- naming the tensors a user cares about --------------------------------------------------------


def named_tensors(params: Any, *, where: str, arg: str = "params", prefix: str = ""
                  ) -> dict[str, torch.Tensor]:
    """``name -> tensor`` for a tensor, a list, a dict, an ``nn.Module`` or ``named_parameters()``.

    A module contributes every parameter under its module path (``0.weight``); dict values may
    themselves be modules, lists or dicts (their names are joined with dots). ``prefix`` is put
    in front of every name (``target.0.weight``); a lone tensor is called ``prefix`` or ``arg``.
    """
    base = prefix or arg
    join = (lambda key: f"{prefix}.{key}") if prefix else str
    if isinstance(params, torch.Tensor):
        return {base: params}
    if isinstance(params, torch.nn.Module):
        named = {join(k): v for k, v in params.named_parameters()}
        if not named:
            raise ValueError(f"{where}: {arg} {base!r} is a {type(params).__name__} with no "
                             f"parameters")
        return named
    if isinstance(params, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in params.items()]
    elif isinstance(params, (str, bytes)) or not isinstance(params, Iterable) or hasattr(
            params, "__array__") or hasattr(params, "toarray"):  # numpy, pandas, scipy.sparse
        raise TypeError(f"{where}: {arg} must be a tensor, a list or dict of tensors, an "
                        f"nn.Module or named_parameters(), got {type(params).__name__}")
    else:
        values = list(params)
        if values and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
                          for v in values):  # named_parameters() output
            items = values
        else:
            return _merge([named_tensors(v, where=where, arg=arg, prefix=f"{base}[{i}]")
                           if not isinstance(v, torch.Tensor) else {f"{base}[{i}]": v}
                           for i, v in enumerate(values)], where=where, arg=arg, base=base)
    return _merge([{join(k): v} if isinstance(v, torch.Tensor) else
                   named_tensors(v, where=where, arg=arg, prefix=join(k)) for k, v in items],
                  where=where, arg=arg, base=base)


def _merge(parts: list[dict[str, Any]], *, where: str, arg: str, base: str
           ) -> dict[str, torch.Tensor]:
    named: dict[str, torch.Tensor] = {}
    for part in parts:
        named.update(part)
    if not named:
        raise ValueError(f"{where}: {arg} {base!r} is empty; pass at least one tensor")
    return named


# --- nodes -----------------------------------------------------------------------------------------


class _CutMarker(torch.autograd.Function):
    """Identity forward (``x.detach()``, storage shared); no gradient backward, zero tangent.

    Its node (``ctx``) carries the block's name in ``block``, and its input edge keeps the graph
    behind the cut reachable for drawing.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, name: str | None) -> torch.Tensor:
        return x.detach()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.block = inputs[1]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None]:
        return None, None

    @staticmethod
    def jvp(ctx: Any, x_t: torch.Tensor, name_t: Any) -> torch.Tensor:
        return torch.zeros_like(x_t)


def is_cut_marker(node: Any) -> bool:
    """Whether an autograd node is the mark of a cut made under :func:`trace_cuts`."""
    return getattr(type(node), "_forward_cls", None) is _CutMarker


def _passes(node: Any) -> bool:
    """Whether gradient passes ``node`` (it is no cut marker): where searches go on."""
    return not is_cut_marker(node)


def node_label(node: Any, leaf_names: Mapping[int, str] | None = None) -> str:
    """A short readable name: ``"Addmm"``, ``"cut 'dqn.target'"``, or a parameter's name.

    A leaf (``AccumulateGrad``) is called by its name in ``leaf_names`` (``id(tensor) -> name``)
    when given, else ``"AccumulateGrad"``.
    """
    if is_cut_marker(node):
        block = getattr(node, "block", None)
        return f"cut {block!r}" if block else "cut (unnamed stop_gradient)"
    variable = getattr(node, "variable", None)
    if variable is not None:
        return (leaf_names or {}).get(id(variable), "AccumulateGrad")
    name = node.name().rsplit("::", 1)[-1]
    return _SUFFIX.sub("", name) or name


class ShortestPaths:
    """Breadth-first search of the backward graph from some outputs, stopping at cut markers.

    ``path_to(tensor)`` is then the shortest chain of nodes through which a gradient reaches
    ``tensor``. The search keeps every node it met alive, so ``id``s are not reused meanwhile.
    With ``through_cuts=True`` it also walks behind the cut markers (the graph a cut removes),
    to find which cut stops a path. Nodes are known by ``id``: ``parent`` is the node that
    first reached each (``None`` for an output's own), ``leaf_node`` a leaf tensor's
    ``AccumulateGrad``.
    """

    def __init__(self, outputs: list[Any], *, through_cuts: bool = False) -> None:
        self.outputs = outputs
        self.nodes: dict[int, Any] = {}
        self.parent: dict[int, int | None] = {}
        self.edge_parent: dict[tuple[int, int], int | None] = {}  # (node, output_nr) -> parent
        self.leaf_node: dict[int, int] = {}  # id(leaf tensor) -> id(AccumulateGrad)
        self.expand = None if through_cuts else _passes  # where the search goes on
        nodes, parents, edge_parent = self.nodes, self.parent, self.edge_parent
        for parent, node, nr, first in walk(outputs, expand=self.expand):
            key, up = id(node), None if parent is None else id(parent)
            edge_parent.setdefault((key, nr), up)
            if first:
                nodes[key] = node
                parents[key] = up
                variable = getattr(node, "variable", None)
                if variable is not None:
                    self.leaf_node.setdefault(id(variable), key)

    def chain(self, key: int | None) -> list[Any]:
        """The nodes from an output down to the node ``key`` (by ``id``), along ``parent``."""
        chain = []
        while key is not None:
            chain.append(self.nodes[key])
            key = self.parent[key]
        return chain[::-1]

    def path_to(self, tensor: torch.Tensor) -> list[Any] | None:
        """Nodes from an output to ``tensor`` (its ``AccumulateGrad`` or its ``grad_fn``)."""
        if not tensor.requires_grad:
            return None
        if any(out is tensor for out in self.outputs):
            return [tensor.grad_fn] if tensor.grad_fn is not None else []
        if tensor.grad_fn is None:
            key = self.leaf_node.get(id(tensor))
            return None if key is None else self.chain(key)
        target = (id(tensor.grad_fn), tensor.output_nr)
        if target not in self.edge_parent:
            return None
        return [*self.chain(self.edge_parent[target]), tensor.grad_fn]


# --- the lens mode ---------------------------------------------------------------------------------


@dataclass
class CutTrace:
    """What :func:`trace_cuts` saw: the name of every active cut made (``None``: unnamed)."""

    cuts: list[str | None] = field(default_factory=list)
    n_marked: int = 0

    @property
    def blocks(self) -> list[str]:
        """The distinct named blocks that cut, in first-seen order."""
        return list(dict.fromkeys(n for n in self.cuts if n is not None))


@contextlib.contextmanager
def trace_cuts() -> Iterator[CutTrace]:
    """Make every active cut visible in the backward graph, with identical values and gradients.

    Inside the ``with``, each active ``stop_gradient(x, name=...)`` returns, for every tensor
    leaf of ``x`` that requires grad, a marker node named after the block whose backward returns
    no gradient, instead of a bare ``x.detach()``; ``as_constant(fn, ..., name=...)`` runs
    ``fn`` with the caller's grad mode (so that the graph behind the cut exists) and marks its
    result the same way. Forward values are the same tensors (storage shared, as with
    ``detach``), every gradient is the same, and ``gradient_path`` /
    ``assert_no_gradient`` stop at the marks. Two things differ: a cut tensor reports
    ``requires_grad=True`` (with a gradient that is always zero), and the graph behind the cut
    is kept alive, so the traced step costs what the step without ``as_constant``'s savings
    would. Disabled blocks (``disable_blocks``) are not marked: gradient flows through them.
    Ignored under ``torch.compile``.

    >>> import torch
    >>> from toolkit import stop_gradient
    >>> from toolkit.lens import trace_cuts
    >>> w = torch.tensor(3.0, requires_grad=True)
    >>> with trace_cuts() as trace:
    ...     loss = w * stop_gradient(2 * w, name="demo.target")
    >>> trace.blocks, torch.autograd.grad(loss, w)[0]
    (['demo.target'], tensor(6.))
    """
    trace = CutTrace()

    def mark(t: Any, name: str | None) -> Any:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            trace.n_marked += 1
            return _CutMarker.apply(t, name)
        return t.detach() if isinstance(t, torch.Tensor) else t  # the plain cut

    def on_cut(x: Any, name: str | None) -> Any:
        trace.cuts.append(name)
        return tree_map(lambda t: mark(t, name), x)

    with observe_cuts(on_cut=on_cut):
        yield trace


# --- the graph as data -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientGraph:
    """A backward graph as plain, JSON-able data (see :func:`gradient_graph`).

    ``nodes[i]`` is a dict with ``id``, ``label``, ``kind`` (``"op"``, ``"leaf"`` or
    ``"cut"``), ``behind`` (only reachable through a cut: receives no gradient), ``groups`` (the
    parameter groups reachable from it without crossing a cut; for nodes behind a cut, the
    groups they would reach), ``block`` (for a cut) and ``shape`` (for a leaf); node 0 is the
    loss. ``edges`` are ``[src, dst, kind]`` in the direction gradient flows (loss to
    leaves), ``kind`` being ``"flow"``, ``"cut"`` (the edge a block removes) or ``"behind"``.
    """

    nodes: list[dict[str, Any]]
    edges: list[list[Any]]
    groups: list[str]
    blocks: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges, "groups": self.groups,
                "blocks": self.blocks}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GradientGraph:
        try:
            return cls([dict(n) for n in data["nodes"]], [list(e) for e in data["edges"]],
                       list(data["groups"]), list(data["blocks"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"GradientGraph.from_dict: expected a dict with nodes, edges, groups "
                             f"and blocks (GradientGraph.to_dict()), got {exc!r}") from None


def _leaf_names(groups: Mapping[str, Any] | None, where: str) -> tuple[dict[int, str],
                                                                       dict[int, str]]:
    names: dict[int, str] = {}
    group_of: dict[int, str] = {}
    if groups is None:
        return names, group_of
    if not isinstance(groups, Mapping):
        raise TypeError(f"{where}: groups must be a dict name -> parameters (a module, a list "
                        f"or dict of tensors), got {type(groups).__name__}")
    for group, params in groups.items():
        for name, tensor in named_tensors(params, where=where, arg="groups",
                                          prefix=str(group)).items():
            names.setdefault(id(tensor), name)
            group_of.setdefault(id(tensor), str(group))
    return names, group_of


def gradient_graph(loss: torch.Tensor | Callable[[], torch.Tensor],
                   groups: Mapping[str, Any] | None = None) -> GradientGraph:
    """The backward graph of ``loss`` as :class:`GradientGraph` data, cuts included.

    ``loss`` is a tensor (its graph is taken as it is: cuts are visible if it was built inside
    :func:`trace_cuts`) or a callable returning one, which is then called inside
    ``trace_cuts()``. ``groups`` maps a name to parameters (a module, a list or dict of
    tensors); their leaves are labelled with their names and every node gets the groups it
    leads to.
    """
    where = "gradient_graph"
    leaf_names, group_of = _leaf_names(groups, where)
    if callable(loss) and not isinstance(loss, torch.Tensor):
        with trace_cuts():
            loss = loss()
    roots = output_roots(loss, where)
    order: list[Any] = []
    index: dict[int, int] = {}
    starts: list[int] = []
    edges: list[list[Any]] = []
    seen_edges: set[tuple[int, int]] = set()
    for parent, node, _, first in walk(roots):
        if first:
            index[id(node)] = len(order)
            order.append(node)
        if parent is None:
            starts.append(index[id(node)])
            continue
        pair = (index[id(parent)], index[id(node)])
        if pair not in seen_edges:
            seen_edges.add(pair)
            edges.append([*pair, "cut" if is_cut_marker(parent) else "flow"])
    children: list[list[int]] = [[] for _ in order]
    for src, dst, kind in edges:
        if kind != "cut":
            children[src].append(dst)
    live = closure(starts, children.__getitem__)
    for edge in edges:
        if edge[2] == "flow" and edge[0] not in live:
            edge[2] = "behind"
    group_names = list(dict.fromkeys(group_of.values()))
    reach = _groups_reached(order, children, group_of, group_names)
    nodes = []
    for i, node in enumerate(order):
        kind = "cut" if is_cut_marker(node) else ("leaf" if hasattr(node, "variable") else "op")
        entry: dict[str, Any] = {"id": i, "label": node_label(node, leaf_names), "kind": kind,
                                 "behind": i not in live, "groups": reach[i]}
        if kind == "cut":
            entry["block"] = getattr(node, "block", None)
        elif kind == "leaf":
            entry["shape"] = list(node.variable.shape)
        nodes.append(entry)
    blocks = list(dict.fromkeys(n["block"] for n in nodes if n.get("block")))
    return GradientGraph(nodes, edges, group_names, blocks)


def _groups_reached(order: list[Any], children: list[list[int]], group_of: dict[int, str],
                    group_names: list[str]) -> list[list[str]]:
    """For each node, the groups whose leaves it reaches (cut edges excluded), in group order."""
    n = len(order)
    indegree = [0] * n
    for kids in children:
        for k in kids:
            indegree[k] += 1
    topo = [i for i in range(n) if indegree[i] == 0]
    for i in topo:  # Kahn's algorithm; the list grows while we walk it
        for k in children[i]:
            indegree[k] -= 1
            if indegree[k] == 0:
                topo.append(k)
    rank = {g: r for r, g in enumerate(group_names)}
    reach: list[set[str]] = [set() for _ in range(n)]
    for i in reversed(topo):
        variable = getattr(order[i], "variable", None)
        if variable is not None and id(variable) in group_of:
            reach[i].add(group_of[id(variable)])
        for k in children[i]:
            reach[i] |= reach[k]
    return [sorted(r, key=rank.__getitem__) for r in reach]
