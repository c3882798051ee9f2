"""The step audit's findings, read off the backward graph of the step's second call.

Every search here is :class:`~toolkit.lens.backward_graph.ShortestPaths` (the lens's
breadth-first search from the losses, stopping at cuts); nothing runs ``backward``:

- **leaks**: the leaves a loss's search reaches that its optimizer does not step (or steps
  while the step also writes them in place). The likely cut is on the leak's shortest path, at
  the first node (from the loss) behind which no stepped parameter lies; when every node of the
  path also leads to stepped parameters the leak passes *through* them and no cut can remove it;
- **dead parameters**: what an optimizer steps that none of its losses reaches, with the cut
  that stops it: a toolkit block (found by searching behind the cut markers), a ``detach`` /
  ``.data`` (a search from the tensors the step detached), ``torch.no_grad()``,
  ``requires_grad=False``, or no use at all;
- **carried graphs**: nodes of the second call's graph that autograd numbered before the call
  began (``Node._sequence_nr``), i.e. graph kept from the first call or from before the audit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from toolkit.lens.audit_record import Recording, is_open_marker
from toolkit.lens.backward_graph import ShortestPaths, is_cut_marker, node_label
from toolkit.lens.graph_walk import closure, walk

__all__ = ["CarriedGraph", "DeadParameter", "Leak"]


@dataclass(frozen=True)
class Leak:
    """Gradient of ``loss`` reaches ``parameter``, which ``optimizer`` does not step.

    ``path``: the shortest chain of node names from the loss to the parameter (modules named,
    disabled blocks named); ``grad_bytes``: the gradient it gets (``numel × element size``);
    ``reason``: why it counts as a leak; ``fix``: the likely fix; ``cut_at``: where to cut
    (``None`` when no cut can remove it: the gradient passes through it on its way to
    parameters the optimizer steps).
    """

    loss: str
    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    grad_bytes: int
    path: tuple[str, ...]
    reason: str
    fix: str
    cut_at: str | None


@dataclass(frozen=True)
class DeadParameter:
    """``optimizer`` steps ``parameter`` but none of its ``losses`` reaches it.

    ``cut``: what stops it (``"stop_gradient 'dqn.target'"``, ``".detach() of the output of
    encoder (shape (8, 16))"``, ``"torch.no_grad()"``, ``"requires_grad=False"``, ``"not used"``
    ...); ``path``: the loss-to-parameter chain through that cut when one is known.
    """

    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    losses: tuple[str, ...]
    cut: str
    path: tuple[str, ...] | None


@dataclass(frozen=True)
class CarriedGraph:
    """The second call's graph reaches graph made before it: state carried without a cut.

    ``shape``: the carried tensor's shape; ``source``: what made it; ``entered``: the node of
    the second call that reads it; ``path``: loss → … → the carried node; ``created``: ``"the
    first call"`` or ``"before the audit"``; ``n_nodes``: old nodes reachable through it.
    """

    loss: str
    shape: tuple[int, ...] | None
    source: str
    entered: str
    path: tuple[str, ...]
    created: str
    n_nodes: int
    fix: str


# --- naming nodes ----------------------------------------------------------------------------------

_VIEWS = frozenset({"T", "Transpose", "View", "Reshape", "Permute", "Expand", "Unsqueeze",
                    "Squeeze", "ToCopy", "Alias"})


class Labeller:
    """Readable node names: ``Addmm (q_target.2)``, ``block 'dqn.target' (disabled)``, …"""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec

    def module_of(self, node: Any, outer: bool = False) -> str | None:
        entry = self.rec.outputs.get(id(node))
        if entry is not None and entry[0] is node:
            return entry[2] if outer else entry[1]
        return None

    def _consumes(self, node: Any) -> str | None:
        """The module of a named parameter that ``node`` reads directly (or through a view)."""
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            if node_label(nxt) in _VIEWS:
                found = self._consumes(nxt)
                if found:
                    return found
            variable = getattr(nxt, "variable", None)
            name = None if variable is None else self.rec.names.tensors.get(id(variable))
            if name and "." in name:
                return name.rsplit(".", 1)[0]
        return None

    def __call__(self, node: Any) -> str:
        if is_open_marker(node):
            return f"block {node.block!r} (disabled)"
        variable = getattr(node, "variable", None)
        if variable is not None:
            return self.rec.names.name(variable)
        label = node_label(node)
        module = self.module_of(node) or (None if is_cut_marker(node) else self._consumes(node))
        return f"{label} ({module})" if module else label

    def tensor(self, node: Any, consumer: Any | None) -> tuple[str, tuple[int, ...] | None]:
        """``("the output of q_target", shape)`` for the tensor ``node`` gives ``consumer``."""
        shape = None
        entry = self.rec.outputs.get(id(node))
        if entry is not None and entry[0] is node:
            return f"the output of {entry[2]}", entry[3]
        if consumer is not None:
            for nxt, nr in consumer.next_functions:
                if nxt is node:
                    shape = _shape(node, nr)
                    break
        return f"the output of {self(node)}", shape


def _shape(node: Any, nr: int) -> tuple[int, ...] | None:
    try:
        return tuple(node._input_metadata[nr].shape)
    except (AttributeError, IndexError, RuntimeError):  # private API: optional
        return None


def _shape_text(shape: tuple[int, ...] | None) -> str:
    return "" if shape is None else f" (shape {tuple(shape)})"


def _owners(names: Iterable[str]) -> str:
    """The modules that hold ``names``: their longest common dotted prefix, else the tops."""
    names = list(names)
    parts = [n.split(".")[:-1] for n in names]
    common = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    if common:
        return ".".join(common)
    tops = list(dict.fromkeys(p[0] if p else n for p, n in zip(parts, names)))
    return ", ".join(tops[:3]) + (", …" if len(tops) > 3 else "")


# --- leaks ------------------------------------------------------------------------------------------


def _useful(search: ShortestPaths, targets: set[int]) -> set[int]:
    """Keys of the nodes of ``search`` from which one of ``targets`` (node keys) is reached:
    the same walk as the search's, its edges reversed."""
    callers: dict[int, list[int]] = {}
    for parent, node, _, _ in walk(search.outputs, expand=search.expand):
        if parent is not None:
            callers.setdefault(id(node), []).append(id(parent))
    return closure(targets, lambda key: callers.get(key, ()))


def find_leaks(loss: str, optimizer: str, search: ShortestPaths, stepped: set[int],
               rec: Recording, label: Labeller, *, allow_pass_through: bool) -> list[Leak]:
    """The leaks of one loss (see :class:`Leak`)."""
    names = rec.names
    candidates = []
    for var_id, key in search.leaf_node.items():
        variable = search.nodes[key].variable
        known = var_id in names.tensors or isinstance(variable, nn.Parameter)
        twice = var_id in stepped and var_id in rec.written
        if known and (var_id not in stepped or twice):
            candidates.append(variable)
    if not candidates:
        return []
    targets = {search.leaf_node[i] for i in stepped
               if i in search.leaf_node and i not in rec.written}
    useful = _useful(search, targets)
    found = []
    for variable in candidates:
        chain = search.path_to(variable) or []
        first = next(i for i, node in enumerate(chain) if id(node) not in useful)
        if id(variable) in stepped:
            reason = (f"stepped by optimizer {optimizer!r} and also written in place by the "
                      f"step ({rec.written[id(variable)]}): updated twice")
        else:
            reason = f"not stepped by optimizer {optimizer!r}"
        found.append((variable, chain, first, reason))
    behind: dict[int, list[str]] = {}  # entry node -> names of the leaks behind it
    for variable, chain, first, _ in found:
        behind.setdefault(id(chain[first]), []).append(names.name(variable))
    order = {key: i for i, key in enumerate(names.tensors)}
    found.sort(key=lambda item: order.get(id(item[0]), len(order)))
    leaks = []
    for variable, chain, first, reason in found:
        cut_at, fix = _fix(chain, first, loss, optimizer, label,
                           _owners(behind[id(chain[first])]))
        if cut_at is None and first > 0 and allow_pass_through:
            continue
        leaks.append(Leak(loss, optimizer, names.name(variable), tuple(variable.shape),
                          variable.numel() * variable.element_size(),
                          tuple(label(n) for n in chain), reason, fix, cut_at))
    return leaks


def _fix(chain: list[Any], first: int, loss: str, optimizer: str, label: Labeller,
         owners: str) -> tuple[str | None, str]:
    opened = [n for n in chain[first:] if is_open_marker(n)]
    if opened:
        where = f"block {opened[0].block!r}"
        return where, f"the {where} is disabled here: enable it (it cuts this path)"
    if first == 0:
        return None, (f"loss {loss!r} reaches no parameter optimizer {optimizer!r} steps: pair "
                      f"it with the optimizer of the parameters it trains")
    if all(node_label(n) in _VIEWS for n in chain[first:-1]):  # only the parameter itself
        return None, ("no cut can remove it: the gradient passes through it to the parameters "
                      f"optimizer {optimizer!r} steps; freeze it while computing loss {loss!r} "
                      "(requires_grad_(False)), or differentiate only the stepped parameters "
                      "(backward(inputs=...)) and audit with allow_pass_through=True")
    what, shape = label.tensor(chain[first], chain[first - 1])
    cut_at = f"{what}{_shape_text(shape)}"
    return cut_at, (f"cut at {cut_at}, where {label(chain[first - 1])} reads it (behind it: "
                    f"{owners}): stop_gradient(x, name=...), x.detach() or torch.no_grad()")


# --- dead parameters ---------------------------------------------------------------------------------


def find_dead(optimizer: str, losses: tuple[str, ...], roots: list[torch.Tensor],
              missing: list[torch.Tensor], rec: Recording, label: Labeller) -> list[DeadParameter]:
    """Why each tensor of ``missing`` (stepped, never reached) gets no gradient."""
    behind: ShortestPaths | None = None
    detached: ShortestPaths | None = None
    sources = {id(edge.grad_fn): (shape, how) for call, edge, shape, how in rec.detached
               if call == rec.call}
    out = []
    for tensor in missing:
        key, path = id(tensor), None
        if not tensor.requires_grad:
            cut = "requires_grad=False" + (" (set by the step)" if key in rec.frozen else "")
        elif key in rec.leaf_detached:
            cut = f"{rec.leaf_detached[key]} of the parameter itself"
        else:
            behind = behind or ShortestPaths(roots, through_cuts=True)
            chain = behind.path_to(tensor)
            marks = [n for n in chain or () if is_cut_marker(n)]
            if marks:
                blocks = [getattr(n, "block", None) for n in marks]
                cut = " and ".join(f"stop_gradient {b!r}" if b else "an unnamed stop_gradient"
                                   for b in dict.fromkeys(blocks))
                path = tuple(label(n) for n in chain or ())
            else:
                if detached is None and sources:
                    edges: list[Any] = [e for call, e, _, _ in rec.detached if call == rec.call]
                    detached = ShortestPaths(edges)
                chain = detached.path_to(tensor) if detached is not None else None
                if chain:
                    shape, how = sources[id(chain[0])]
                    what, _ = label.tensor(chain[0], None)
                    cut = f"{how} of {what}{_shape_text(shape)}"
                    path = ("…", *(label(n) for n in chain))
                elif key in rec.no_grad:
                    cut = f"torch.no_grad() (read by {rec.no_grad[key]} with gradients off)"
                elif key not in rec.used:
                    cut = "not used: the step never reads it"
                else:
                    cut = ("no graph: the step reads it, but nothing it computes with it reaches "
                           "the loss (an output not used, .item(), an integer op)")
        out.append(DeadParameter(optimizer, rec.names.name(tensor), tuple(tensor.shape),
                                 losses, cut, path))
    return out


# --- carried graphs ----------------------------------------------------------------------------------


def find_carried(loss: str, search: ShortestPaths, rec: Recording, label: Labeller
                 ) -> list[CarriedGraph]:
    """Nodes of this call's graph made before the call began (see :class:`CarriedGraph`)."""
    first_mark, this_mark = rec.marks[0], rec.marks[-1]
    old = {key for key, node in search.nodes.items()  # a cut is no graph in a plain run
           if getattr(node, "variable", None) is None and not is_cut_marker(node)
           and node._sequence_nr() < this_mark}
    if not old:
        return []
    entry_of: dict[int, int] = {}  # old node -> the first old node on its chain from the loss
    for key in old:
        trail, k = [], key
        while k not in entry_of:
            parent = search.parent[k]
            if parent is None or parent not in old:
                entry_of[k] = k
                break
            trail.append(k)
            k = parent
        for t in trail:
            entry_of[t] = entry_of[k]
    counts: dict[int, int] = {}
    for top in entry_of.values():
        counts[top] = counts.get(top, 0) + 1
    out = []
    for top, n in counts.items():
        node = search.nodes[top]
        parent_key = search.parent[top]
        consumer = None if parent_key is None else search.nodes[parent_key]
        nr = next((nr for nxt, nr in (consumer.next_functions if consumer else ())
                   if nxt is node), 0)
        module = label.module_of(node, outer=True)
        shape = _shape(node, nr)
        source = f"the output of {module}" if module else f"the output of {label(node)}"
        passed = label.rec.inputs.get(id(node))
        if passed is not None and passed[0] is node:
            entered = f"the input of {passed[1]}"
        else:
            entered = "the loss itself" if consumer is None else label(consumer)
        created = "in the first call" if node._sequence_nr() >= first_mark else "before the audit"
        path = tuple(label(x) for x in [*search.chain(parent_key), node])
        if is_open_marker(node):
            fix = f"the block {node.block!r} is disabled here: enable it (it cuts the state)"
        else:
            fix = (f"cut the state where it enters ({entered}) before each step uses it: "
                   f"stop_gradient(state, name=...) or state.detach()")
        out.append(CarriedGraph(loss, shape, source, entered, path, created, n, fix))
    return out
