"""Carried graphs: nodes of the second call's graph that autograd numbered before the call
began (``Node._sequence_nr``), i.e. graph kept from the first call or from before the audit,
one finding per carried tensor (an LSTM's ``h`` and ``c`` apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.lens.audit.findings import CarriedGraph
from toolkit.lens.audit.labels import node_shape, outputs_of
from toolkit.lens.audit.location import reader_line
from toolkit.lens.audit.proof import Cut
from toolkit.lens.audit.record import is_open_marker
from toolkit.lens.audit.sites import Line
from toolkit.lens.backward_graph import is_cut_marker
from toolkit.lens.graph_walk import closure

if TYPE_CHECKING:
    from toolkit.lens.audit.recorded import Found, RecordedStep

__all__ = ["check", "find_carried"]


def find_carried(step: RecordedStep, loss: str) -> list[tuple[tuple[int, int], CarriedGraph]]:
    """Tensors of this call's graph made before the call began (see :class:`CarriedGraph`):
    one per ``(node, output)`` through which the new graph enters the old one, with that
    ``(id(node), output)`` as its key. Its fix names every line where the step's new graph
    reads the old tensor (two readers of one memory need two cuts), proved: with all of them
    cut, the loss no longer reaches the old node."""
    search, rec, label = step.searches[loss], step.rec, step.label
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
        lines, cut = _readers(step, loss, key, old)
        if is_open_marker(node):
            fix = f"the block {node.block!r} is disabled here: enable it (it cuts the state)"
        elif len(cut.lines) > 1:
            fix = (f"cut the state at each of its {len(cut.lines)} readers before the step "
                   f"uses it: stop_gradient(state, name=...) or state.detach()")
        else:
            fix = (f"cut the state where it enters ({entered}) before each step uses it: "
                   f"stop_gradient(state, name=...) or state.detach()")
        if cut.edges and step.prover.reaches(loss, key, cut):
            lines = ()  # not proved: the old graph is still reached
        out.append(((key, nr), CarriedGraph(
            loss=loss, shape=shape, source=source, entered=entered, path=path,
            created=created, n_nodes=counts[key], fix=fix, lines=lines)))
    return out


def _readers(step: RecordedStep, loss: str, key: int, old: set[int]
             ) -> tuple[tuple[Line, ...], Cut]:
    """The lines where the state (old node ``key``) enters the step, and the cut of every
    edge by which this call's graph reads it: where the previous call assigned it to a
    module's attribute (``self.memory = …``), else each line of the step's own code that read
    it, else the module call it was handed to."""
    rec, graph = step.rec, step.graphs[loss]
    node = graph.search.nodes[key]
    edges = {(parent, key) for parent in graph.callers.get(key, ()) if parent not in old}
    assigned = rec.assigned.get(key)
    if assigned is not None and assigned[0] is node:
        return (assigned[1],), Cut(edges=frozenset(edges), lines=(assigned[1],))
    reads = rec.old_reads.get(key)
    lines = list(reads[1]) if reads is not None and reads[0] is node else []
    if not lines:
        for parent, _ in edges:
            reader = graph.search.nodes[parent]
            found = reader_line(step, reader, node, False) or reader_line(step, reader, node)
            if found is not None and found[0] not in lines:
                lines.append(found[0])
    return tuple(lines), Cut(edges=frozenset(edges), lines=tuple(lines))


def check(step: RecordedStep) -> Found:
    """The rule: graph carried into the second call, one finding per entry into the old graph
    (shared by every loss that reaches it)."""
    carried: dict[tuple[int, int], CarriedGraph] = {}
    for name in step.searches:
        for key, found in find_carried(step, name):
            carried.setdefault(key, found)
    return {"carried": list(carried.values())}
