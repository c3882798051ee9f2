"""Carried graphs: nodes of the second call's graph that autograd numbered before the call
began (``Node._sequence_nr``), i.e. graph kept from the first call or from before the audit,
one finding per carried tensor (an LSTM's ``h`` and ``c`` apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.lens.audit.findings import CarriedGraph
from toolkit.lens.audit.labels import Labeller, node_shape, outputs_of
from toolkit.lens.audit.record import Recording, is_open_marker
from toolkit.lens.backward_graph import ShortestPaths, is_cut_marker
from toolkit.lens.graph_walk import closure

if TYPE_CHECKING:
    from toolkit.lens.audit.recorded import Found, RecordedStep

__all__ = ["check", "find_carried"]


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
        shape = node_shape(node, nr)
        entry = label.rec.outputs.get(id(node))
        where = entry[4] if module and entry is not None and entry[0] is node else ""
        source = f"the output of {module}{where}" if module else f"the output of {label(node)}"
        if len(outputs_of(node)) > 1:
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


def check(step: RecordedStep) -> Found:
    """The rule: graph carried into the second call, one finding per entry into the old graph
    (shared by every loss that reaches it)."""
    carried: dict[tuple[int, int], CarriedGraph] = {}
    for name, search in step.searches.items():
        for key, found in find_carried(name, search, step.rec, step.label):
            carried.setdefault(key, found)
    return {"carried": list(carried.values())}
