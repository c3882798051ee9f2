"""Where a fix goes in the user's code, proved on the recorded graph before it is proposed.

A leak's gradient path runs from the loss down to the leaking tensor. The places a user can
cut it are the tensors the step's own code holds: one an operation of the step made
(``target = r + gamma * q_next``), one an outermost module call returned (``q_next =
q_target(s2)``), or one the step handed to a module (``netD(fake)``). Each gives two cuts:

- **where it is made**: ``x.detach()`` (or ``torch.no_grad()``) on the line that made it: every
  reader of ``x`` stops passing gradient to what is behind it;
- **where it is read**: ``reader(x.detach())`` on the line of one reader (the operation that
  reads it, or the module call it is handed to): only that reader stops.

:func:`leak_cut` tries them from the leaking tensor outwards (a tensor closer to the leaking
network first; at each, where it is handed to a module before where it is made, and that
before where an operation reads it) and keeps the first that
:class:`~toolkit.audit.truth.proof.Prover` proves: the leak gone, every stepped tensor still
reached, their gradients unchanged. When one cut leaves another path, it adds the next proved
cut on that path (at most :data:`MAX_CUTS`). Nodes inside a module's forward are never
proposed: that code runs for every caller (the generator step too).
:func:`target_cut` does the same for a trained target, from the target side inwards.

The search only proves the cut: each cut it finds says which expression it cuts (a
:data:`~toolkit.audit.truth.proof.Site`); the fixes stage writes
those as edits of the user's code (:mod:`toolkit.audit.fixes.location`).
"""

from __future__ import annotations

import functools
import operator
from collections import deque
from typing import TYPE_CHECKING, Any

from toolkit.audit.record.recording import is_open_marker
from toolkit.audit.record.sites import Line
from toolkit.audit.truth.labels import SELECTIONS, shape_text
from toolkit.audit.truth.proof import Cut, HandedAt, MadeAt, Prover, ReadAt
from toolkit.audit.truth.readers import event_of
from toolkit.lens.backward_graph import node_label

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["MAX_CUTS", "first_outside", "leak_cut", "target_cut"]


#: the most cuts one fix may list (a tensor read on that many separate paths)
MAX_CUTS = 4


def _made_group(step: RecordedStep, node: Any, line: Line) -> frozenset[int]:
    """Every node the expression that made ``node`` makes at ``line`` (the same span of the
    line: every output of a module call, each pass of a loop, each call of a helper that runs
    the line). A cut of that expression cuts them all. Without spans: every node made at the
    line as ``node`` was (the same operation, or the output of the same module)."""
    def kind(n: Any) -> tuple[Any, Any]:
        entry = step.rec.outputs.get(id(n))
        return type(n), entry[2] if entry is not None and entry[0] is n else None

    def span(n: Any) -> Any:
        made = step.rec.made.get(id(n))
        return None if made is None or made[0] is not n else next(
            (x.span for x in made[1] if x == line), None)

    mine, where = kind(node), line.span
    return frozenset(id(n) for n in step.rec.made_at.get((line.path, line.number), ())
                     if step.rec.made.get(id(n), (None,))[0] is n
                     and (span(n) == where if where is not None else kind(n) == mine))


def _handed_group(step: RecordedStep, node: Any, line: Line) -> frozenset[tuple[int, int]]:
    """The edges by which every call whose frames pass ``line`` reads ``node``: a
    ``.detach()`` written there cuts the tensor for everything that call computes."""
    edges = set()
    for graph in step.graphs.values():
        for parent in graph.callers.get(id(node), ()):
            reader = graph.search.nodes[parent]
            made = step.rec.made.get(parent)
            if made is not None and made[0] is reader and made[2] == "op":
                continue  # made by the step's own code after the call (WGAN-GP's mix)
            event = event_of(step, reader, node, True)
            if event is not None and any(x.path == line.path and x.number == line.number
                                         for x in event[1]):
                edges.add((parent, id(node)))
    return frozenset(edges)


def _same_place(step: RecordedStep, node: Any) -> list[Any]:
    """Every node made as ``node`` was, by the step's own code: the same operation at the same
    place of its line (each pass of a loop, each call of a helper that runs the line), not
    another call on the line."""
    line = step.rec.made[id(node)][1][0]
    out = []
    for other in step.rec.made_at.get((line.path, line.number), ()):
        entry = step.rec.made.get(id(other))
        if type(other) is type(node) and entry is not None and entry[0] is other \
                and entry[1][0].span == line.span:
            out.append(other)
    return out


def _read_group(step: RecordedStep, reader: Any, node: Any) -> frozenset[tuple[int, int]]:
    """The edges of every node made as ``reader`` was (:func:`_same_place`), at ``node``'s
    input position, to what it reads there."""
    position = next(i for i, (n, _) in enumerate(reader.next_functions) if n is node)
    edges = set()
    for other in _same_place(step, reader):
        inputs = other.next_functions
        if len(inputs) > position and inputs[position][0] is not None:
            edges.add((id(other), id(inputs[position][0])))
    return frozenset(edges)


def _returned_line(step: RecordedStep, node: Any, reader: Any) -> Line | None:
    """The step's line that called the forward which made ``node``, when the step's own code
    reads ``node``: a tensor read outside the forward that made it was returned by it (or
    kept), so that line holds it (``q_next_values = q_next.forward(states_)``)."""
    made = step.rec.made.get(id(node))
    read = step.rec.made.get(id(reader))
    if made is None or made[0] is not node or made[2] != "inner":
        return None
    if read is None or read[0] is not reader or read[2] != "op":
        return None
    return next((x for x in made[1] if not x.inside), None)


def _returned_group(step: RecordedStep, node: Any, line: Line) -> frozenset[int]:
    """Every node the call at the step's ``line`` returned, as ``node`` was (a forward called
    by hand, ``q_next.forward(s)``, that made its outputs inside, read by the step's own
    operations): a cut of the call's value cuts them all."""
    found = {id(node)}
    for key, (_, stack, kind) in step.rec.made.items():
        if kind != "inner" or not any(x == line and x.span == line.span for x in stack
                                      if not x.inside):
            continue
        for graph in step.graphs.values():
            if any(step.rec.made.get(c, (None, (), ""))[2] == "op"
                   for c in graph.callers.get(key, ())):
                found.add(key)
    return frozenset(found)


def _candidates(step: RecordedStep, chain: list[Any], first: int, outwards: bool,
                inner: bool) -> list[Cut]:
    """The cuts the code can make on ``chain`` (loss -> … -> leaf), at positions from
    ``first`` on: from the leaf outwards (``outwards=True``) or from ``first`` inwards;
    ``inner``: also lines inside a module's forward (every caller of it runs them). Each cut
    is a line of the user's code and covers everything that line does (every pass of a loop,
    every call of a helper that runs it), so that its proof holds for the line as written."""
    found, leaves = [], []
    positions = range(len(chain) - 1, first - 1, -1) if outwards else range(first, len(chain))
    for k in positions:
        node = chain[k]
        if k == 0 or is_open_marker(node):
            continue  # a disabled block: leak_cut proposes enabling it
        reader = chain[k - 1]
        what, shape = step.label.tensor(node, reader)
        what = f"{what}{shape_text(shape)}"
        if (variable := getattr(node, "variable", None)) is not None:  # read by the step
            what = f"{step.rec.names.name(variable)}{shape_text(tuple(variable.shape))}"
            leaves += [c for c in [_read_cut(step, reader, node, what)] if c is not None]
            continue
        handed = []  # handed to a module (netD(fake)): each line that led to that call
        event = event_of(step, reader, node, inner)
        if event is not None:
            for level, line in enumerate(event[1]):
                if line.inside and not inner:
                    continue
                edges = _handed_group(step, node, line)
                to = event[0] if level == 0 else (
                    f"{event[1][level - 1].function}(), which hands it to {event[0]}")
                if edges:
                    handed.append(Cut(edges=edges, lines=(line,), what=(what,), texts=(
                        f"detach {what} where it is handed to {to}",), sites=(
                        HandedAt(line, step.rec.arguments.get(
                            (id(node), line.path, line.number, line.span))),)))
        made = None
        entry = step.rec.made.get(id(node))
        if entry is not None and entry[0] is node and (inner or entry[2] != "inner"):
            made = Cut(dead=_made_group(step, node, entry[1][0]), lines=(entry[1][0],),
                       what=(what,), texts=(f"detach {what} where it is made",),
                       sites=(MadeAt(entry[1][0]),))
        elif not inner and (returned := _returned_line(step, node, reader)) is not None:
            made = Cut(dead=_returned_group(step, node, returned), lines=(returned,),
                       what=(what,), texts=(f"detach {what} where it is made",),
                       sites=(MadeAt(returned),))
        read = _read_cut(step, reader, node, what)
        # handed to a module: cut there, for the reader this loss alone runs; else where it
        # is made, then where an operation reads it
        found += [*handed, *(c for c in (made, read) if c is not None)]
    return [*found, *leaves]  # a tensor itself cut where it is read: when nothing else is


def _read_cut(step: RecordedStep, reader: Any, node: Any, what: str) -> Cut | None:
    """``reader(node.detach())`` on the line of the step's own code that made ``reader`` (or
    that called the torch function inside which ``reader`` read ``node``:
    :func:`_call_read_cut`), or ``None`` when no such line made it."""
    entry = step.rec.made.get(id(reader))
    if entry is None or entry[0] is not reader:
        return _call_read_cut(step, reader, node, what) if entry is None else None
    if entry[2] != "op":
        return None
    position = next(i for i, (n, _) in enumerate(reader.next_functions) if n is node)
    return Cut(edges=_read_group(step, reader, node), lines=(entry[1][0],), what=(what,),
               texts=(f"detach {what} where it is read",),
               sites=(ReadAt(entry[1][0], position),))


def _call_of(step: RecordedStep, reader: Any, node: Any) -> tuple[Any, int] | None:
    """The output node of the step's own torch call inside which ``reader`` read ``node``
    (``F.cosine_similarity(p, z)`` reads ``z`` in nodes of its own), and the position of the
    argument ``node`` came in by; ``None`` when no such call is known."""
    graphs = step.graphs.values()
    seen, todo = {id(reader)}, [reader]
    while todo:
        current = todo.pop(0)
        operands = step.rec.operands.get(id(current))
        made = step.rec.made.get(id(current))
        if operands is not None and made is not None and made[0] is current:
            places = [i for i, n in enumerate(operands) if n is node]
            return (current, places[0]) if len(places) == 1 else None
        if made is not None and current is not reader:
            return None   # made by another line of the step: not inside one call
        for graph in graphs:
            for parent in graph.callers.get(id(current), ()):
                if parent not in seen:
                    seen.add(parent)
                    todo.append(graph.search.nodes[parent])
    return None


def _inside(step: RecordedStep, out: Any) -> set[int]:
    """The nodes one torch call made under its output ``out`` (none of them recorded as made
    by a line of the step), ``out`` included."""
    found, todo = {id(out)}, [out]
    while todo:
        for child, _ in todo.pop().next_functions:
            if child is not None and id(child) not in found and \
                    id(child) not in step.rec.made and not hasattr(child, "variable"):
                found.add(id(child))
                todo.append(child)
    return found


def _call_read_cut(step: RecordedStep, reader: Any, node: Any, what: str) -> Cut | None:
    """``f(…, node.detach(), …)`` at the line of the step's own torch call ``f`` inside
    which ``reader`` read ``node``: every read of that argument inside each call the line
    makes (every pass of a loop, each call of a helper that runs it)."""
    found = _call_of(step, reader, node)
    if found is None:
        return None
    out, position = found
    line = step.rec.made[id(out)][1][0]
    edges = set()
    for other in _same_place(step, out):
        operands = step.rec.operands.get(id(other))
        if operands is None or len(operands) <= position or operands[position] is None:
            continue
        argument, inside = operands[position], _inside(step, other)
        for graph in step.graphs.values():
            edges |= {(p, id(argument)) for p in graph.callers.get(id(argument), ())
                      if p in inside}
    if not edges:
        return None
    return Cut(edges=frozenset(edges), lines=(line,), what=(what,),
               texts=(f"detach {what} where it is read",), sites=(HandedAt(line, position),))


def _shortest(graph: Any, starts: list[int], goals: set[int], cut: Cut | None = None
              ) -> list[int] | None:
    """Node ids of the shortest chain from one of ``starts`` to one of ``goals`` through no cut
    (a dead node is not passed), or ``None``."""
    cut = Cut() if cut is None else cut
    parent: dict[int, int | None] = {}
    queue = deque()
    for start in dict.fromkeys(starts):
        parent[start] = None
        queue.append(start)
    while queue:
        key = queue.popleft()
        if key in goals:
            out = []
            at: int | None = key
            while at is not None:
                out.append(at)
                at = parent[at]
            return out[::-1]
        if key in cut.dead:
            continue
        for child in graph.children.get(key, ()):
            if child not in parent and (key, child) not in cut.edges:
                parent[child] = key
                queue.append(child)
    return None


def _chain(step: RecordedStep, loss: str, leaf: int, cut: Cut) -> list[Any] | None:
    """The shortest chain of nodes from ``loss`` to the node ``leaf`` through no cut."""
    graph = step.graphs[loss]
    keys = _shortest(graph, graph.roots, {leaf}, cut)
    return None if keys is None else [graph.search.nodes[k] for k in keys]


def first_outside(chain: list[Any], legit: set[int]) -> int:
    """The index of the first node of ``chain`` on no legitimate path (the last when all are)."""
    return next((i for i, node in enumerate(chain) if id(node) not in legit), len(chain) - 1)


def leak_cut(step: RecordedStep, prover: Prover, loss: str, leaf: int, legit: set[int],
             known: list[Cut]) -> Cut | None:
    """The proved cut (one or several) that removes ``loss``'s gradient to the leaf node
    ``leaf``, or ``None``; ``legit``: the nodes on legitimate paths to stepped tensors (never
    cut); ``known``: cuts proved for other leaks of the same loss, tried first."""
    for cut in known:
        if not prover.reaches(loss, leaf, cut):
            return cut
    chain = _chain(step, loss, leaf, Cut())
    first = 0 if chain is None else first_outside(chain, legit)
    for node in (chain or [])[max(first, 1):]:  # a disabled block on the way: enable it
        if is_open_marker(node):
            entry = step.rec.made.get(id(node))
            line = entry[1][0] if entry is not None and entry[0] is node else None
            block = Cut(dead=frozenset({id(node)}), lines=() if line is None else (line,),
                        what=(f"block {node.block!r}",),
                        texts=(f"the block {node.block!r} is disabled here: enable it (it cuts "
                               f"this path)",), block=True)
            if not prover.reaches(loss, leaf, block) and prover.keeps_training(block):
                return block
    for inner in (False, True):  # the step's own lines first, then lines in a forward
        found = _leak_cut(step, prover, loss, leaf, legit, inner)
        if found is not None:
            return found
    return None


def _leak_cut(step: RecordedStep, prover: Prover, loss: str, leaf: int, legit: set[int],
              inner: bool) -> Cut | None:
    parts: list[Cut] = []
    for _ in range(MAX_CUTS):
        cut = functools.reduce(operator.or_, parts, Cut())
        chain = _chain(step, loss, leaf, cut)
        if chain is None:
            return _fewest(prover, loss, leaf, parts)
        first = first_outside(chain, legit)
        for candidate in _candidates(step, chain, max(first, 1), True, inner):
            if candidate.edges <= cut.edges and candidate.dead <= cut.dead:
                continue  # already cut: this chain passes by it
            trial = cut | candidate
            if prover.keeps_training(trial) and prover.spares_gradients(trial):
                parts.append(candidate)
                break
        else:
            return None
    cut = functools.reduce(operator.or_, parts, Cut())
    return None if prover.reaches(loss, leaf, cut) else _fewest(prover, loss, leaf, parts)


def _fewest(prover: Prover, loss: str, leaf: int, parts: list[Cut]) -> Cut:
    """The union of ``parts`` without each one the others make needless (a cut where a value
    is made, found for a second path, also cuts the first path's cut where it is read)."""
    kept = list(parts)
    for part in parts:
        rest = [p for p in kept if p is not part]
        if rest and not prover.reaches(loss, leaf, functools.reduce(operator.or_, rest)):
            kept = rest
    return functools.reduce(operator.or_, kept, Cut())


def _selected_from_elsewhere(step: RecordedStep, node: Any, below: Any) -> bool:
    """Whether ``node`` only selects from or rearranges ``below`` (``targets[mask]``), and the
    user's code made ``below`` on another line: the target is what that line computes, and is
    cut where it is made, not where a part of it is read."""
    if node_label(node) not in SELECTIONS:
        return False
    mine, theirs = step.rec.made.get(id(node)), step.rec.made.get(id(below))
    return (mine is not None and theirs is not None and mine[0] is node and theirs[0] is below
            and theirs[2] == "op" and mine[1][0] != theirs[1][0])


def target_cut(step: RecordedStep, prover: Prover, loss: str, compare: Any, target: Any,
               shared: set[int], taken: Cut | None = None) -> Cut | None:
    """The proved cut that stops the target side ``target`` of ``loss``'s comparison node
    ``compare`` from reaching the stepped tensors ``shared`` (ids), tried from the target
    inwards, or ``None``. ``taken``: the cuts already chosen for the loss's other targets; the
    proof holds for all of them together (SimSiam's two terms each cut one view: cutting each
    view where the encoder makes it would leave the encoder untrained)."""
    taken = Cut() if taken is None else taken
    search = step.searches[loss]
    leaves = {search.leaf_node[i] for i in shared if i in search.leaf_node}
    graph = step.graphs[loss]
    if not leaves or id(target) not in search.nodes:
        return None
    below = _shortest(graph, [id(target)], leaves)
    if below is None:
        return None
    chain = [compare, *(search.nodes[k] for k in below)]
    first = 1
    while first < len(chain) - 1 and _selected_from_elsewhere(step, chain[first],
                                                                chain[first + 1]):
        first += 1
    for inner in (False, True):
        for candidate in _candidates(step, chain, first, False, inner):
            if not prover.keeps_training(candidate | taken) or \
                    not prover.spares_training(candidate):
                continue
            if id(target) in candidate.dead or (id(compare), id(target)) in candidate.edges \
                    or not prover.reach(loss, [id(target)], candidate) & leaves:
                return candidate
    return None
