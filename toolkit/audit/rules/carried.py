"""Carried graphs: nodes of the second call's graph that autograd numbered before the call
began (``Node._sequence_nr``), i.e. graph kept from the first call or from before the audit,
one finding per carried tensor (an LSTM's ``h`` and ``c`` apart).

Provenance decides, not where the tensor was kept: a module's attribute, a list (a replay
buffer), a dict, a global or a closure cell all carry the same node numbers. A carried node
is reported only when it matters in a training loop:

- the old graph behind it holds nodes **made by the first call**: each call's graph then
  reaches the previous one's, and the graph grows from call to call (a recurrent state kept
  without a cut, samples kept in a list with their graph);
- or it holds **tensors saved for backward** (``ExpBackward``'s result, a product's operands):
  the first ``backward()`` frees them, and the next one fails "a second time".

A tensor computed once before the loop from a leaf (``torch.tensor(x, requires_grad=True)
.float()``: one ``ToCopy`` node that saves nothing) neither grows nor fails: no finding.

A list, deque or dict that keeps the old tensor beside the call's own entries (REINFORCE's
``saved_log_probs`` never emptied) has no cut that keeps the call's gradient: it is emptied
with the loop's other containers (:func:`_kept_past_its_pass`).
"""

from __future__ import annotations

import collections
import itertools
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn

from toolkit.audit.findings import CarriedGraph
from toolkit.audit.idiom import toolkit_only
from toolkit.audit.record.emptied import emptyings
from toolkit.audit.record.recording import is_open_marker
from toolkit.audit.record.sites import Line
from toolkit.audit.record.start import step_start
from toolkit.audit.rules.kept import stores_reaching
from toolkit.audit.rules.saved import holds_saved
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.labels import node_shape, outputs_of
from toolkit.audit.truth.proof import (
    AssignedAt,
    Cut,
    EmptiedAt,
    HandedAt,
    Place,
    ReadAt,
    ResetAt,
    Site,
    StoredAt,
)
from toolkit.audit.truth.readers import reader_line
from toolkit.lens.backward_graph import is_cut_marker
from toolkit.lens.graph_walk import closure

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check", "find_carried", "grows_or_fails", "made_of_cuts", "reader_ways", "reset_at"]


def _or_cut() -> str:
    """The toolkit's cut, offered beside ``state.detach()`` where the step is the toolkit's."""
    return toolkit_only(" (or the toolkit's stop_gradient(state, name=...))")


def find_carried(step: RecordedStep, loss: str
                 ) -> list[tuple[tuple[int, int], Wanted[CarriedGraph]]]:
    """Tensors of this call's graph made before the call began (see :class:`CarriedGraph`):
    one per ``(node, output)`` through which the new graph enters the old one, with that
    ``(id(node), output)`` as its key. Its fix names every line where the step's new graph
    reads the old tensor (two readers of one memory need two cuts), proved: with all of them
    cut, the loss no longer reaches the old node."""
    search, rec, label = step.searches[loss], step.rec, step.label
    first_mark, this_mark = rec.marks[0], rec.marks[-1]
    cuts: dict[int, bool] = {}
    old = {key for key, node in search.nodes.items()  # a cut is no graph in a plain run
           if getattr(node, "variable", None) is None and not is_cut_marker(node)
           and node._sequence_nr() < this_mark and not made_of_cuts(node, cuts)}
    if not old:
        return []
    entries: dict[tuple[int, int], int] = {}  # (old node, output) -> the new node reading it
    for (key, nr), parent in search.edge_parent.items():
        if key in old and parent is not None and parent not in old:
            entries.setdefault((key, nr), parent)
        elif key in old and parent is None:
            entries.setdefault((key, nr), -1)
    behind = {key: closure([key], lambda k: [id(n) for n, _ in search.nodes[k].next_functions
                                             if n is not None and id(n) in old])
              for key in {k for k, _ in entries}}
    counts = {key: len(found) for key, found in behind.items()}
    out = []
    for (key, nr), parent_key in entries.items():
        node = search.nodes[key]
        if not any(search.nodes[k]._sequence_nr() >= first_mark or holds_saved(search.nodes[k])
                   for k in behind[key]):
            continue  # made once before the calls, saving nothing: it neither grows nor fails
        consumer = None if parent_key == -1 else search.nodes[parent_key]
        module = label.module_of(node, outer=True)
        shape = node_shape(node, nr)
        entry = label.rec.outputs.get(id(node))
        where = entry[4] if module and entry is not None and entry[0] is node else ""
        source = f"the output of {module}{where}" if module else f"the output of {label(node)}"
        if len(outputs_of(node)) > 1:
            source += f" (output {nr} of its node)"
        passed = label.rec.inputs_now.get((label.rec.call, id(node)))  # where it enters now
        if passed is not None and passed[0] is node:
            entered = f"the input of {passed[1]}"
        else:
            entered = "the loss itself" if consumer is None else label(consumer)
        created = "in the first call" if node._sequence_nr() >= first_mark else "before the audit"
        chain = [] if consumer is None else search.chain(parent_key)
        path = tuple(label(x) for x in [*chain, node])
        ways = _readers(step, loss, key, old)
        stored = _stored(step, node)
        unproved = None  # whether the loss still reaches the old node with every reader cut
        options = []
        kept, emptied, emptying = _kept_past_its_pass(step, node, this_mark)
        if emptied:
            # no cut keeps this pass's entries' gradient and drops the earlier ones': the
            # container is to be emptied each pass, with the loop's other containers (where
            # its own emptying runs too seldom, where it should run only the method says)
            fix = (f"{kept[0]} keeps the entries of earlier passes beside this pass's: empty "
                   f"it each pass once its loss has used them (del {kept[0]}[:], where the "
                   f"loop empties its other containers), or make it inside the loop")
            if emptying is not None:
                options.append(Option((emptying,), fix, emptied, (emptying,)))
            options.append(Option((), fix, emptied))
        for way in ways:
            if is_open_marker(node):
                fix = f"the block {node.block!r} is disabled here: enable it (it cuts the state)"
            elif way.how == "stored":
                fix = ("cut it where it is stored (this call's loss trains nothing through the "
                       "value stored): value.detach() in the assignment")
            elif way.how == "kept":
                fix = (f"cut it where the step stores it for the next call, not where it enters "
                       f"({entered}): value.detach() in what it stores")
            elif way.how == "reset" and stored is not None:
                fix = (f"no cut where it is read keeps each call's own gradient: "
                       f"{reset_text(*stored, first_none=bool(way.places))}")
            elif len(way.lines or ()) > 1:
                fix = (f"cut the state at each of its {len(way.lines or ())} readers before the "
                       f"step uses it: state.detach(){_or_cut()}")
            else:
                fix = (f"cut the state where it enters ({entered}) before each step uses it: "
                       f"state.detach(){_or_cut()}")
            if way.edges and unproved is None:
                unproved = step.prover.reaches(loss, key, Cut(edges=way.edges))
            options.append(Option(way.places, fix, way.lines, way.needs,
                                  proved=not (way.edges and unproved)))
        out.append(((key, nr), Wanted(CarriedGraph(
            loss=loss, shape=shape, source=source, entered=entered, path=path,
            created=created, n_nodes=counts[key], fix="", container=kept[0] if kept else ""),
            FirstOf(tuple(options)))))
    return out


#: what a loop collects a pass's tensors in
_CONTAINERS = (list, collections.deque, dict)
#: the entries of one container looked at (a dataset held as a list is no pass's collection)
_MOST_ENTRIES = 100_000


def _kept_past_its_pass(step: RecordedStep, node: Any, mark: int
                        ) -> tuple[tuple[str, ...], tuple[Line, ...], EmptiedAt | None]:
    """The container (a list, a deque, a dict; a name of the user's code or a module's
    attribute: ``policy.saved_log_probs``) that holds the old tensor ``node`` made beside a
    tensor this call made (``Node._sequence_nr() >= mark``): entries kept past the pass they
    were collected for. Returns the names bound to it, and the statements of the user's
    source where the fix belongs: those that make, empty or drop it; where none empties it,
    also those that empty, or make again, the containers made with it or held by the same
    module (what the loop drops each pass: with none, no line, as a bank kept on purpose
    has none); and the edit that empties it: where a name of it is dropped (``del saved``),
    or with the first statement that empties another of them, else that makes another again
    (``None``: its own emptying is there, but runs too seldom). ``((), (), None)``: none."""
    candidates: list[tuple[str, Any, tuple[str, ...]]] = []
    for name, value in list(step.namespace.items()):
        if name.startswith("__"):
            continue
        if isinstance(value, nn.Module):
            held = [(f"{name}.{attr}", v) for attr, v in vars(value).items()
                    if not attr.startswith("_") and isinstance(v, _CONTAINERS)]
            candidates += [(n, v, tuple(m for m, _ in held if m != n)) for n, v in held]
        elif isinstance(value, _CONTAINERS):
            candidates.append((name, value, ()))
    hit = next((v for _, v, _ in candidates if _holds_old_and_new(v, node, mark)), None)
    if hit is None:
        return (), (), None
    names = tuple(dict.fromkeys(n for n, v, _ in candidates if v is hit))
    owned = {s for n, v, siblings in candidates if v is hit for s in siblings}
    path = step.namespace.get("__file__")
    found = emptyings(path) if isinstance(path, str) else ()
    own = [e for e in found if e.container in names]
    lines = [e.line for e in own]
    place = None
    drops = [e for e in own if e.how == "drops"]
    if drops:
        place = EmptiedAt(drops[0].line, drops[0].container)
    elif not any(e.how == "empties" for e in own):
        siblings = owned | {c for e in own for c in e.together}
        made = {e.line.number for e in own}
        # what the loop empties, or makes again, each pass
        theirs = [e for e in found if e.container in siblings
                  and (e.how != "makes" or e.line.number not in made)]
        if not theirs:
            # nothing says the loop drops what it collects: a bank kept on purpose (a queue
            # of earlier batches' features) is cut where it is stored, not emptied
            return names, (), None
        lines += [e.line for e in theirs]
        other = next((e for e in theirs if e.how == "empties"), theirs[0])
        # the name its statement can read: beside a module's attribute, the module's
        owner = other.container.rpartition(".")[0]
        name = next((n for n in names if n.rpartition(".")[0] == owner), names[0])
        place = EmptiedAt(other.line, name)
    return names, tuple(dict.fromkeys(sorted(lines, key=lambda x: x.number))), place


def _holds_old_and_new(container: Any, node: Any, mark: int) -> bool:
    """Whether ``container`` holds, as an entry or an item of a tuple entry (a named tuple of
    a log-probability and a value), the tensor ``node`` made and a tensor made from ``mark``
    on."""
    entries = container.values() if isinstance(container, dict) else container
    old = new = False
    for entry in itertools.islice(entries, _MOST_ENTRIES):
        for t in entry if isinstance(entry, tuple | list) else (entry,):
            fn = t.grad_fn if isinstance(t, torch.Tensor) else None
            if fn is node:
                old = True
            elif fn is not None and fn._sequence_nr() >= mark:
                new = True
        if old and new:
            return True
    return False


def made_of_cuts(node: Any, memo: dict[int, bool]) -> bool:
    """Whether every path from ``node`` down to a leaf passes a cut: in a plain run, where a
    cut is a ``detach``, no graph is made there (``buffer[i] = stop_gradient(x)`` into a
    tensor kept between calls). ``memo``: what is known, by ``id`` of node."""
    stack = [node]
    while stack:
        n = stack[-1]
        if id(n) in memo:
            stack.pop()
            continue
        kids = [c for c, _ in n.next_functions if c is not None and not is_cut_marker(c)]
        if any(getattr(c, "variable", None) is not None or memo.get(id(c)) is False
               for c in kids):
            memo[id(n)] = False
            stack.pop()
            continue
        pending = [c for c in kids if id(c) not in memo]
        if pending:
            stack.extend(pending)
            continue
        # every input is a cut or made of cuts (a node of no input at all is no cut's)
        memo[id(n)] = bool(kids) or any(is_cut_marker(c) for c, _ in n.next_functions)
        stack.pop()
    return memo[id(node)]


def grows_or_fails(node: Any, first_mark: int) -> bool:
    """Whether the graph behind ``node`` matters in a training loop: it holds a node made by
    the audit's calls (``Node._sequence_nr() >= first_mark``), or one that saved tensors a
    backward frees. Graph made once before the calls that saves nothing (a cast of a leaf)
    neither grows nor fails."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen or getattr(n, "variable", None) is not None:
            continue
        seen.add(id(n))
        if n._sequence_nr() >= first_mark or holds_saved(n):
            return True
        stack.extend(child for child, _ in n.next_functions)
    return False


class Way(NamedTuple):
    """One way to fix a carried state, as :func:`_readers` gives it: ``how`` (``"stored"``,
    ``"kept"``, ``"read"`` or ``"reset"``), the places it writes, the finding's lines when it
    is chosen (``None``: those its edits are written at), what must be written for it to be
    chosen (``None``: nothing) and the edges of the recorded graph it cuts."""

    how: str
    places: tuple[Place, ...]
    lines: tuple[Line, ...] | None
    needs: tuple[Place, ...] | None
    edges: frozenset[tuple[int, int]]


def _readers(step: RecordedStep, loss: str, key: int, old: set[int]) -> list[Way]:
    """The ways to cut the state (old node ``key``) that keep this call's own gradients, in
    the order they are tried (the first whose edits can be written is the fix): where the
    previous call assigned it to a module's attribute (``self.memory = …``) when this call's
    loss does not need the gradient of what it assigns there; where the step stores it outside
    modules (a list, a dict, a closure: ``memory.append(feats)``, ``state.update(h=h)``),
    whatever this call's loss reads of it, as a graph carried to the next call is cut where it
    is stored; else each line of the step's own code that hands it to a module (``model(x,
    hidden)``), or each operation that reads it (``0.9 * self.avg``), each cut of every edge
    by which this call's graph reads it; else no edit: the state is to be reset (a memory made
    lazily: its reset is written) or recomputed each step."""
    rec, graph = step.rec, step.graphs[loss]
    node = graph.search.nodes[key]
    edges = frozenset((parent, key) for parent in graph.callers.get(key, ())
                      if parent not in old)
    assigned = rec.assigned.get(key)
    stored = assigned is not None and assigned[0] is node
    now = assigned_now(step, assigned[1]) if stored else frozenset()
    found = _stored(step, node) if stored else None
    reset = None if found is None else reset_at(step, *found)
    resetting = None if reset is None else Way("reset", (reset,), (reset.line,), None,
                                               frozenset())
    if resetting is not None and not now:  # a memory made once, read stale: reset it
        return [resetting]
    if stored and now and state_assignable(step, assigned[1]):
        return [Way("stored", (AssignedAt(assigned[1]),), (assigned[1],), None, edges)]
    ways: list[Way] = []
    if not stored and step.step is not None:
        # kept by the step outside modules: cut where it stores it for the next call (proved
        # by running it: the stores cut every path into the old graph at once)
        stores = tuple(StoredAt(*at) for at in stores_reaching(step.step, node, rec.marks[-1]))
        ways.append(Way("kept", stores, None, stores, frozenset()))
    for lines, sites in reader_ways(step, node):
        if resetting is not None and reads_own(step, now, lines):
            # each cut at a reader also cuts what this call stores there: reset it instead
            ways.append(resetting._replace(needs=sites))
        else:
            ways.append(Way("read", sites, lines, sites, edges))
    if resetting is not None:
        ways.append(resetting)
    elif stored:
        ways.append(Way("reset", (), (assigned[1],), None, edges))
    else:
        at: list[Line] = []
        for parent, _ in edges:
            reader = graph.search.nodes[parent]
            where = reader_line(step, reader, node, False) or reader_line(step, reader, node)
            if where is not None and where[0] not in at:
                at.append(where[0])
        ways.append(Way("reset", (), tuple(at), None, edges))
    return ways


def assigned_now(step: RecordedStep, line: Line) -> frozenset[int]:
    """The nodes this call assigned at ``line`` (where a state is stored on a module)."""
    return frozenset(key for key, (node, at) in step.rec.assigned.items()
                     if at == line and at.span == line.span
                     and node._sequence_nr() >= step.rec.marks[-1])


def reads_own(step: RecordedStep, now: frozenset[int], lines: tuple[Line, ...]) -> bool:
    """Whether a line of ``lines`` also hands a module what this call stored (``now``): a
    cut written there cuts the call's own state too (an alignment kept between decoding
    steps)."""
    for key in now:
        for entry in step.rec.handed.get(key, ()):
            if entry[2] and entry[2][0] in lines:
                return True
    return False


def reset_at(step: RecordedStep, module: Any, name: str, owner: str) -> ResetAt | None:
    """The reset of the attribute ``name`` of ``module`` (named ``owner`` in the step's code)
    back to ``None`` at the start of the step, when it was ``None`` before the step first
    stored a graph there (a memory made lazily: each call then runs as the first did) and the
    step's code can name its module."""
    if not step.rec.first_none.get((id(module), name)):
        return None
    start = step_start(step.function, step.namespace, owner, module)
    return None if start is None else ResetAt(start[0], start[1], owner, name)


def state_assignable(step: RecordedStep, line: Line) -> bool:
    """Whether cutting the value assigned at ``line`` (a state stored on a module) in this
    call changes no gradient of what the optimizers step: this call's losses do not train
    anything through it."""
    now = assigned_now(step, line)
    cut = Cut(dead=now)
    return step.prover.keeps_training(cut) and step.prover.spares_gradients(cut)


def reader_ways(step: RecordedStep, node: Any) -> list[tuple[tuple[Line, ...],
                                                               tuple[Site, ...]]]:
    """The lines that read the state ``node`` made by an earlier call, with the expressions
    to cut there (each call's own gradients kept), in the order they are tried (the first
    whose every cut can be written): the step's own lines that hand it to a module, then every
    operation that reads it (when each one's operand is known)."""
    rec = step.rec
    ways: list[tuple[tuple[Line, ...], tuple[Site, ...]]] = []
    reads = rec.old_reads.get(id(node))
    lines = list(reads[1]) if reads is not None and reads[0] is node else []
    if lines:
        ways.append((tuple(lines), tuple(
            HandedAt(line, rec.arguments.get((id(node), line.path, line.number, line.span)))
            for line in lines)))
    readers = rec.old_readers.get(id(node))
    if readers is None or readers[0] is not node or not readers[1] \
            or any(at is None for _, at in readers[1]):
        return ways
    ways.append((tuple(dict.fromkeys(line for line, _ in readers[1])),
                 tuple(ReadAt(line, at) for line, at in readers[1])))  # type: ignore[arg-type]
    return ways


def reset_text(module: Any, name: str, owner: str, *, first_none: bool = False) -> str:
    """``reset or recompute model.attention.key each step (model.attention.reset_mem())``;
    ``first_none``: with the reset the edit writes (it was ``None`` before the first call)."""
    methods = sorted(m for m in dir(type(module)) if m.startswith("reset")
                     and callable(getattr(type(module), m, None)))
    how = f" ({', '.join(f'{owner}.{m}()' for m in methods)})" if methods else ""
    text = f"reset or recompute {owner}.{name} at the start of each step{how}"
    if first_none:
        text += (f"; it was None before the first call, so {owner}.{name} = None as the "
                 f"step's first line runs each call as the first ran")
    return text


def _stored(step: RecordedStep, node: Any) -> tuple[Any, str, str] | None:
    """``(module, attribute, module's name)`` where the previous call stored ``node``."""
    entry = step.rec.assigned.get(id(node))
    if entry is None or entry[0] is not node:
        return None
    modules = {id(m): m for root in step.rec.names.roots for m in root.modules()}
    for key, at in step.rec.lines.items():
        if key[0] == "assign" and at == entry[1] and key[1] in modules:
            module = modules[key[1]]
            return module, key[2], step.rec.names.modules.get(key[1], type(module).__name__)
    return None


def check(step: RecordedStep) -> Found:
    """The rule: graph carried into the second call, one finding per entry into the old graph
    (shared by every loss that reaches it)."""
    carried: dict[tuple[int, int], Wanted[CarriedGraph]] = {}
    if step.rec.threads:
        return {"carried": []}  # numbered by another thread's counter: not checked (a note)
    for name in step.searches:
        for key, found in find_carried(step, name):
            carried.setdefault(key, found)
    return {"carried": list(carried.values())}
