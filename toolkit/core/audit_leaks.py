"""The step audit's leaks: which tensors a loss's gradient reaches beyond its optimizer, and
whether a cut could remove that gradient.

A loss's backward graph (the :class:`~toolkit.core.backward_graph.ShortestPaths` search from the
loss, stopping at cuts) reaches leaves. A leaf the loss's optimizer does not step is a
*candidate*. Whether it is a leak or *pass-through* is decided by a proof on the graph, not by
the shape of one path:

- A **cut** removes edges into *activations* (``x.detach()`` where a tensor is read). A
  parameter and the nodes that compute a layer's weight from stored tensors (``parametrize``,
  the ``spectral_norm`` / ``weight_norm`` hooks, a weight computed in a module's own forward)
  form the parameter's *region*: no cut goes there (cutting there is freezing, not cutting).
- ``P(L)``: the activation nodes that read the region of the candidate ``L`` (the layers that
  use it). Every cut that removes ``L`` must make every node of ``P(L)`` unreachable, and the
  cut that keeps most of the graph is "everything reachable from the loss without entering
  ``P(L)``". ``L`` is **pass-through** when that search misses a stepped tensor the loss reaches:
  every cut that removes it also cuts a stepped tensor off its loss (the discriminator in a
  generator step). Otherwise it is a **leak**, and the suggested cut is on its shortest path, at
  the first node from which, in that largest kept graph, no stepped tensor is reached.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from toolkit.core.audit_graph import VIEWS, Labeller, Leak, shape_text
from toolkit.core.audit_record import Recording, is_open_marker
from toolkit.core.backward_graph import ShortestPaths, node_label
from toolkit.core.graph_walk import closure, walk

__all__ = ["Graph", "find_leaks", "parameter_regions"]

_MAX_REGION = 256  # nodes: a weight computed by more is a network, not a reparametrisation


class Graph:
    """The edges of one loss's search, both ways, by node ``id`` (built once per loss)."""

    def __init__(self, search: ShortestPaths) -> None:
        self.search = search
        self.children: dict[int, list[int]] = {}
        self.callers: dict[int, list[int]] = {}
        self.roots: list[int] = []
        for parent, node, _, _ in walk(search.outputs, expand=search.expand):
            if parent is None:
                self.roots.append(id(node))
            else:
                self.children.setdefault(id(parent), []).append(id(node))
                self.callers.setdefault(id(node), []).append(id(parent))

    def reach(self, starts: list[int], avoid: set[int] | frozenset[int] = frozenset()) -> set[int]:
        """Nodes reachable from ``starts`` without entering ``avoid``."""
        return closure([s for s in starts if s not in avoid],
                       lambda k: [c for c in self.children.get(k, ()) if c not in avoid])

    def useful(self, targets: set[int], within: set[int] | None = None) -> set[int]:
        """Nodes (of ``within``) from which a node of ``targets`` is reached (reversed edges)."""
        if within is None:
            return closure(targets, lambda k: self.callers.get(k, ()))
        return closure({t for t in targets if t in within},
                       lambda k: [c for c in self.callers.get(k, ()) if c in within])


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


def find_leaks(loss: str, optimizer: str, graph: Graph, stepped: set[int], rec: Recording,
               label: Labeller, region: set[int]) -> tuple[list[Leak], list[Leak]]:
    """``(leaks, pass_through)`` of one loss: see the module's docstring and :class:`Leak`."""
    search = graph.search
    names = rec.names
    candidates = []
    for var_id, key in search.leaf_node.items():
        variable = search.nodes[key].variable
        known = var_id in names.tensors or isinstance(variable, nn.Parameter)
        twice = var_id in stepped and var_id in rec.written
        if known and (var_id not in stepped or twice):
            candidates.append(variable)
    if not candidates:
        return [], []
    targets = {search.leaf_node[i] for i in stepped
               if i in search.leaf_node and i not in rec.written}
    kept_by_users: dict[frozenset[int], set[int]] = {}  # P(L) -> the largest graph kept
    found = []
    for variable in candidates:
        leaf = search.leaf_node[id(variable)]
        users = _users(graph, leaf, region)
        if users not in kept_by_users:
            kept_by_users[users] = graph.reach(graph.roots, users)
        kept = kept_by_users[users]
        through = bool(targets) and not targets <= kept
        found.append((variable, users, through))
    useful_in: dict[frozenset[int], set[int]] = {}
    order = {key: i for i, key in enumerate(names.tensors)}
    found.sort(key=lambda item: order.get(id(item[0]), len(order)))
    leaks, passing = [], []
    for variable, users, through in found:
        chain = search.path_to(variable) or []
        twice = id(variable) in stepped
        if twice:
            reason = (f"stepped by optimizer {optimizer!r} and also written in place by the "
                      f"step ({rec.written[id(variable)]}): updated twice")
        else:
            reason = f"not stepped by optimizer {optimizer!r}"
        if through and not twice:
            fix = ("no cut can remove it: every cut that does also cuts a tensor optimizer "
                   f"{optimizer!r} steps off loss {loss!r}; to skip computing it, freeze it "
                   f"while computing loss {loss!r} (requires_grad_(False), as Lightning's "
                   "toggle_optimizer does) or differentiate only the stepped tensors "
                   "(backward(inputs=...))")
            cut_at = None
        else:
            if users not in useful_in:
                useful_in[users] = graph.useful(targets, kept_by_users[users])
            cut_at, fix = _fix(chain, useful_in[users], loss, optimizer, label, targets)
        leak = Leak(loss, optimizer, names.name(variable), tuple(variable.shape),
                    variable.numel() * variable.element_size(),
                    tuple(label(n) for n in chain), reason, fix, cut_at)
        (passing if through and not twice else leaks).append(leak)
    return _owned(leaks), passing


def _users(graph: Graph, leaf: int, region: set[int]) -> frozenset[int]:
    """``P(L)``: the activation nodes that read the region of the leaf node ``leaf`` (the
    computed weights it is part of, and views of them)."""
    nodes = graph.search.nodes
    inside = closure([leaf], lambda k: [c for c in graph.callers.get(k, ())
                                        if c in region or node_label(nodes[c]) in VIEWS])
    return frozenset(c for k in inside for c in graph.callers.get(k, ()) if c not in inside)


def _fix(chain: list[Any], useful: set[int], loss: str, optimizer: str, label: Labeller,
         targets: set[int]) -> tuple[str | None, str]:
    first = next((i for i, node in enumerate(chain) if id(node) not in useful), len(chain) - 1)
    opened = [n for n in chain[first:] if is_open_marker(n)]
    if opened:
        where = f"block {opened[0].block!r}"
        return where, f"the {where} is disabled here: enable it (it cuts this path)"
    if first == 0 or not targets:
        return None, (f"loss {loss!r} reaches no parameter optimizer {optimizer!r} steps: pair "
                      f"it with the optimizer of the parameters it trains")
    what, shape = label.tensor(chain[first], chain[first - 1])
    cut_at = f"{what}{shape_text(shape)}"
    return cut_at, (f"cut at {cut_at}, where {label(chain[first - 1])} reads it (behind it: "
                    "{owners}): stop_gradient(x, name=...), x.detach() or torch.no_grad()")


def _owned(leaks: list[Leak]) -> list[Leak]:
    """Fill each fix's ``{owners}``: the modules of the leaks that share its cut."""
    behind: dict[str | None, list[str]] = {}
    for leak in leaks:
        behind.setdefault(leak.cut_at, []).append(leak.parameter)
    out = []
    for leak in leaks:
        if "{owners}" in leak.fix:
            fix = leak.fix.replace("{owners}", owners(behind[leak.cut_at]))
            leak = Leak(leak.loss, leak.optimizer, leak.parameter, leak.shape, leak.grad_bytes,
                        leak.path, leak.reason, fix, leak.cut_at)
        out.append(leak)
    return out


def owners(names: list[str]) -> str:
    """The modules that hold ``names``: their longest common dotted prefix, else the tops."""
    parts = [n.split(".")[:-1] for n in names]
    common = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    if common:
        return ".".join(_unparametrized(common))
    tops = list(dict.fromkeys(p[0] if p else n for p, n in zip(parts, names)))
    return ", ".join(tops[:3]) + (", …" if len(tops) > 3 else "")


def _unparametrized(parts: list[str]) -> list[str]:
    """``D.0.parametrizations.weight`` -> ``D.0``: the layer, not its parametrization."""
    return parts[:parts.index("parametrizations")] if "parametrizations" in parts else parts
