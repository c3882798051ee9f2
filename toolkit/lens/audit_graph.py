"""The step audit's findings, read off the backward graph of the step's second call.

Every search here is :class:`~toolkit.lens.backward_graph.ShortestPaths` (the lens's
breadth-first search from the losses, stopping at cuts); nothing runs ``backward``:

- **leaks** and **pass-through** are found in :mod:`toolkit.lens.audit_leaks` (the result
  types and the node names are here);
- **dead parameters**: what an optimizer steps that none of its losses reaches, with the cut
  that stops it: a toolkit block (found by searching behind the cut markers), a ``detach`` /
  ``.data`` (a search from the tensors the step detached), ``torch.no_grad()``,
  ``requires_grad=False``, or no use at all;
- **carried graphs**: nodes of the second call's graph that autograd numbered before the call
  began (``Node._sequence_nr``), i.e. graph kept from the first call or from before the audit,
  one finding per carried tensor (an LSTM's ``h`` and ``c`` apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from toolkit.lens.audit_record import Recording, is_open_marker
from toolkit.lens.backward_graph import ShortestPaths, is_cut_marker, node_label
from toolkit.lens.graph_walk import closure

__all__ = ["VIEWS", "CarriedGraph", "DeadParameter", "FrozenTensor", "Labeller", "Leak",
           "find_carried", "find_dead", "shape_text"]


@dataclass(frozen=True)
class Leak:
    """Gradient of ``loss`` reaches ``parameter``, which ``optimizer`` does not step.

    The same type serves :attr:`StepAudit.leaks` (failures: a cut can remove the gradient, or
    the tensor is stepped *and* written in place by the step) and
    :attr:`StepAudit.pass_through` (information: every cut that removes it also cuts a stepped
    tensor off the loss, e.g. the discriminator in a generator step).

    ``path``: the shortest chain of node names from the loss to the parameter (modules named,
    disabled blocks named); ``grad_bytes``: the gradient it gets (``numel × element size``);
    ``reason``: why it counts; ``fix``: the likely fix; ``cut_at``: where to cut (``None`` when
    no cut can remove it). A reparametrised weight (``parametrize``, the ``spectral_norm`` /
    ``weight_norm`` hooks) is named by its stored tensor (``weight_orig``,
    ``parametrizations.weight.original``); no cut is ever proposed inside its computation.
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
    ``kind``: the cut as one word: ``"block"`` (a toolkit ``stop_gradient``), ``"detach"``
    (``.detach()``, ``.data``), ``"no_grad"``, ``"frozen"`` (``requires_grad=False``),
    ``"not_used"`` (never read) or ``"no_graph"`` (read, but what it computes never reaches
    the loss: an output left out of the loss); ``line``: where in the step's code the cut was
    made, or where its module was called for ``"no_graph"`` (``"at model.py:42 (forward)"``),
    when known.
    """

    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    losses: tuple[str, ...]
    cut: str
    path: tuple[str, ...] | None
    kind: str = "no_graph"
    line: str | None = None


@dataclass(frozen=True)
class FrozenTensor:
    """``optimizer`` holds ``parameter``, which does not require grad: every torch optimizer
    skips it. Information, never a failure (SimSiam's unused bias, MoCo's key encoder).

    ``written``: how the step writes it in place, if it does (``"an average of itself and
    (.data =)"`` for an EMA copy, ``"a copy of (copy_)"``); ``written_from``: the tensors those
    writes read (``("encoder_q.0.weight",)``); ``by_step``: the step itself set
    ``requires_grad_(False)``.
    """

    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    written: str | None
    by_step: bool
    written_from: tuple[str, ...] = ()


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

VIEWS = frozenset({"T", "Transpose", "View", "Reshape", "Permute", "Expand", "Unsqueeze",
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
            if node_label(nxt) in VIEWS:
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
            return f"the output of {entry[2]}{entry[4]}", entry[3]
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


def shape_text(shape: tuple[int, ...] | None) -> str:
    return "" if shape is None else f" (shape {tuple(shape)})"


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
        key, path, line = id(tensor), None, None
        if not tensor.requires_grad:
            kind = "frozen"
            cut = "requires_grad=False" + (" (set by the step)" if key in rec.frozen else "")
        elif key in rec.leaf_detached and not _read_for_a_write(rec, key):
            kind, line = "detach", rec.sites.get(("detach", key))
            cut = f"{rec.leaf_detached[key]} of the parameter itself"
        else:
            behind = behind or ShortestPaths(roots, through_cuts=True)
            chain = behind.path_to(tensor)
            marks = [n for n in chain or () if is_cut_marker(n)]
            if marks:
                kind = "block"
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
                    cut = f"{how} of {what}{shape_text(shape)}"
                    path = ("…", *(label(n) for n in chain))
                    kind, line = "detach", rec.sites.get(("detach", rec.call, id(chain[0])))
                elif key in rec.no_grad:
                    cut = f"torch.no_grad() (read by {rec.no_grad[key]} with gradients off)"
                    kind, line = "no_grad", rec.sites.get(("no_grad", key))
                elif key not in rec.used:
                    kind, cut = "not_used", "not used: the step never reads it"
                else:
                    cut = ("no graph: the step reads it, but nothing it computes with it reaches "
                           "the loss (an output not used, .item(), an integer op)")
                    kind, line = "no_graph", _call_site(rec, rec.names.name(tensor), behind)
        out.append(DeadParameter(optimizer, rec.names.name(tensor), tuple(tensor.shape),
                                 losses, cut, path, kind, line))
    return out


def _read_for_a_write(rec: Recording, key: int) -> bool:
    """Whether the step read the watched tensor ``key`` with gradients on, and also detached
    it (``.data``) as the source of an in-place write (an EMA of it): the detach made the
    write's value, not the cut that keeps it from the loss."""
    return key in rec.grad_read and any(key in w.sources for w in rec.writes.values())


def _call_site(rec: Recording, name: str, behind: ShortestPaths) -> str | None:
    """Where the analysed call called the outermost named module holding ``name`` of which
    no parameter is reached (BERT's ``bert.pooler``, not ``bert``): the output left out."""
    reached = [n for i in behind.leaf_node if (n := rec.names.tensors.get(i))]
    parts = name.split(".")
    for end in range(1, len(parts)):
        label = ".".join(parts[:end])
        if any(n.startswith(f"{label}.") for n in reached):
            continue
        site = rec.sites.get(("call", rec.call, label))
        if site is not None:
            return site
    return None


# --- carried graphs ----------------------------------------------------------------------------------


def find_carried(loss: str, search: ShortestPaths, rec: Recording, label: Labeller
                 ) -> list[tuple[tuple[int, int], CarriedGraph]]:
    """Tensors of this call's graph made before the call began (see :class:`CarriedGraph`):
    one per ``(node, output)`` through which the new graph enters the old one, with that
    ``(id(node), output)`` as its key."""
    first_mark, this_mark = rec.marks[0], rec.marks[-1]
    old = {key for key, node in search.nodes.items()  # a cut is no graph in a plain run
           if getattr(node, "variable", None) is None and not is_cut_marker(node)
           and node._sequence_nr() < this_mark}
    if not old:
        return []
    entries: dict[tuple[int, int], int] = {}  # (old node, output) -> the new node reading it
    for (key, nr), parent in search.edge_parent.items():
        if key in old and parent is not None and parent not in old:
            entries.setdefault((key, nr), parent)
        elif key in old and parent is None:
            entries.setdefault((key, nr), -1)
    counts = {key: len(closure([key], lambda k: [id(n) for n, _ in search.nodes[k].next_functions
                                                 if n is not None and id(n) in old]))
              for key in {k for k, _ in entries}}
    out = []
    for (key, nr), parent_key in entries.items():
        node = search.nodes[key]
        consumer = None if parent_key == -1 else search.nodes[parent_key]
        module = label.module_of(node, outer=True)
        shape = _shape(node, nr)
        entry = label.rec.outputs.get(id(node))
        where = entry[4] if module and entry is not None and entry[0] is node else ""
        source = f"the output of {module}{where}" if module else f"the output of {label(node)}"
        if len(_outputs_of(node)) > 1:
            source += f" (output {nr} of its node)"
        passed = label.rec.inputs.get(id(node))
        if passed is not None and passed[0] is node:
            entered = f"the input of {passed[1]}"
        else:
            entered = "the loss itself" if consumer is None else label(consumer)
        created = "in the first call" if node._sequence_nr() >= first_mark else "before the audit"
        chain = [] if consumer is None else search.chain(parent_key)
        path = tuple(label(x) for x in [*chain, node])
        if is_open_marker(node):
            fix = f"the block {node.block!r} is disabled here: enable it (it cuts the state)"
        else:
            fix = (f"cut the state where it enters ({entered}) before each step uses it: "
                   f"stop_gradient(state, name=...) or state.detach()")
        out.append(((key, nr), CarriedGraph(loss, shape, source, entered, path, created,
                                            counts[key], fix)))
    return out


def _outputs_of(node: Any) -> list[Any]:
    """The output metadata of ``node`` (one entry per output), or ``[]`` when unknown."""
    try:
        return list(node._input_metadata)
    except (AttributeError, RuntimeError):  # private API: optional
        return []
