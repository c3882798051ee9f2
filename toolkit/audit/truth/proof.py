"""The proof of a fix: the proposed cut applied to the recorded graph before it is printed.

A :class:`Cut` makes some nodes constants (``x.detach()`` where ``x`` is made: nothing behind
the node is reached through it, by any loss) and removes some edges (``netD(fake.detach())``:
only that reader stops passing gradient to ``fake``). :class:`Prover` answers, on the graphs the
audit recorded, without running anything:

- :meth:`Prover.keeps_training`: every tensor each loss's optimizer steps is still reached by
  that loss on a path through no target (the cut stops nothing from training as it should: a
  cut that leaves a network trained only through its own target is no fix of it);
- :meth:`Prover.spares_gradients`: no stepped tensor of any loss is reached *through* the cut,
  so the gradients of everything the optimizers step are exactly what they were (a leak's fix
  only removes the leak);
- :meth:`Prover.reaches`: whether a tensor (or node) is still reached from a loss.

A fix of a leak is printed only when the leak is gone and both hold; a fix of a trained target
when its target side no longer reaches the stepped tensors and every stepped tensor is still
reached.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolkit.audit.idiom import PLAIN_TORCH
from toolkit.audit.record.sites import Line

if TYPE_CHECKING:
    from toolkit.audit.record.unregistered import Unregistered
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["ArgumentAt", "AssignedAt", "BuiltAt", "CopiedAt", "Cut", "DetachedAt", "HandedAt",
           "IntegerAt", "JoinedAt", "KeywordAt", "MadeAt", "ModeAt", "NoGradAt", "Place", "Prover",
           "ReadAt", "RecomputedAt", "RegisteredAt", "ResetAt", "Site", "StoredAt", "WrittenAt",
           "ZeroDerivativeAt"]


@dataclass(frozen=True)
class MadeAt:
    """Cut the value the expression at ``line`` makes (the call or operation there)."""

    line: Line


@dataclass(frozen=True)
class HandedAt:
    """Cut the argument the call at ``line`` is handed at ``position`` (an index, a keyword;
    ``None`` when it is not known)."""

    line: Line
    position: int | str | None


@dataclass(frozen=True)
class ReadAt:
    """Cut the operand ``position`` of the operation at ``line``."""

    line: Line
    position: int


#: the expression one cut cuts in the user's code
Site = MadeAt | HandedAt | ReadAt


@dataclass(frozen=True)
class AssignedAt:
    """Cut the value of the assignment whose target runs at ``line`` (where a state is stored
    on a module: ``self.memory = ...``)."""

    line: Line


@dataclass(frozen=True)
class CutBefore:
    """Insert before ``line`` (indented by ``indent``) the statement that cuts the name
    ``state``: ``state = state.detach()``; with ``leaf``, as a tensor that requires grad by
    itself (``.detach().requires_grad_()``); with ``start``, the gradient handed on to the
    expression the state began as, as if what ran between were the identity
    (``state.detach() + start - start.detach()``)."""

    line: Line
    indent: str
    state: str
    leaf: bool = False
    start: str | None = None

    @property
    def statement(self) -> str:
        """The statement inserted (without its indent)."""
        s = self.state
        value = f"{s}.detach() + {self.start} - {self.start}.detach()" if self.start else \
            f"{s}.detach().requires_grad_()" if self.leaf else f"{s}.detach()"
        return f"{s} = {value}"


@dataclass(frozen=True)
class WrittenAt:
    """Cut what the in-place write at ``line`` writes into a buffer or an attribute."""

    line: Line


@dataclass(frozen=True)
class StoredAt:
    """Cut what the statements at ``line`` store into the container ``container`` (as the
    source writes it), at its item ``key`` when it is known (``None``: any)."""

    line: Line
    container: str
    key: object = None


@dataclass(frozen=True)
class EmptiedAt:
    """Empty the container ``container`` (as the source names it there) with the statement at
    ``line``: where it drops that name (``del saved``), its items instead (``del saved[:]``);
    where it deletes the items of other containers (``del rewards[:]``), those of this one
    too (``del rewards[:], container[:]``); else ``container.clear()`` after it."""

    line: Line
    container: str


@dataclass(frozen=True)
class ResetAt:
    """Set ``<owner>.<name>`` back to ``None`` before ``line``, the first statement of the
    step's function, written after ``indent`` (:func:`~toolkit.audit.record.start.step_start`)."""

    line: Line
    indent: str
    owner: str
    name: str


@dataclass(frozen=True)
class DetachedAt:
    """Remove the ``.detach()`` at ``line`` (``x.detach()`` back to ``x``)."""

    line: Line


@dataclass(frozen=True)
class NoGradAt:
    """Compute the ``torch.no_grad()`` block around ``line`` with gradients; where ``call``
    (a network called in that block) is its last statement, that statement alone, moved
    after the block."""

    line: Line
    call: Line | None = None


@dataclass(frozen=True)
class CopiedAt:
    """Write ``torch.tensor([...])`` of trained values at ``line`` as ``torch.stack``."""

    line: Line


@dataclass(frozen=True)
class IntegerAt:
    """Give the float value made from the integer result at ``line`` the gradient of what
    the integer was computed from (straight through)."""

    line: Line


@dataclass(frozen=True)
class ZeroDerivativeAt:
    """Give the zero-derivative operation at ``line`` the identity's gradient (straight
    through)."""

    line: Line


@dataclass(frozen=True)
class ModeAt:
    """Set the mode keyword of the call at ``line`` back to the function's default."""

    line: Line


@dataclass(frozen=True)
class KeywordAt:
    """Pass ``argument=value`` (``value`` as the source writes it) to the call of
    ``function`` at ``line``."""

    line: Line
    function: str
    argument: str
    value: str


@dataclass(frozen=True)
class ArgumentAt:
    """Add the expressions ``extra`` to the argument ``argument`` of the call of ``function``
    at ``line``."""

    line: Line
    function: str
    argument: str
    extra: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class BuiltAt:
    """Leave ``tensors`` out of ``optimizer`` at ``line``, the line that builds it."""

    line: Line
    optimizer: object
    tensors: tuple[object, ...]


@dataclass(frozen=True)
class RecomputedAt:
    """Write operand ``position`` of the operation at ``line`` as the expression at ``made``
    that computed it (that reader keeps the value as it was made when ``made`` changes)."""

    line: Line
    position: int
    made: Line


@dataclass(frozen=True, eq=False)
class JoinedAt:
    """Add the tensors ``joining`` (each by the name it is read by in ``names``) to
    ``optimizer`` at ``line``, the line that builds it."""

    line: Line
    optimizer: object
    names: dict[str, object]
    joining: dict[str, object]


@dataclass(frozen=True, eq=False)
class RegisteredAt:
    """Register the tensors ``found`` kept or made unregistered
    (:func:`~toolkit.audit.record.unregistered.unregistered`) on the model ``optimizer``, built
    at ``line``, steps."""

    line: Line
    optimizer: object
    found: Unregistered


#: a place in the user's code where a fix writes: a cut expression (a :data:`Site`), a value
#: assigned, written or stored, a reset at the start of the step, a cut removed or a
#: ``no_grad`` block opened, a value written with a gradient (a stack, straight through), a
#: call's argument, an optimizer built without some tensors or with more, an operand written
#: as the expression that made it, or tensors registered on the model
Place = (Site | AssignedAt | CutBefore | WrittenAt | StoredAt | ResetAt | DetachedAt | NoGradAt
         | CopiedAt | IntegerAt | ZeroDerivativeAt | ModeAt | KeywordAt | ArgumentAt | BuiltAt
         | RecomputedAt | JoinedAt | RegisteredAt | EmptiedAt)


@dataclass(frozen=True)
class Cut:
    """Cuts in the recorded graph, with where each goes in the user's code.

    ``dead``: node ids made constants; ``edges``: ``(reader, node)`` ids removed; ``lines``: the
    user's lines, one per cut; ``texts``: each cut in words (``"detach the output of q_next
    (shape (5, 3)) where it is made"``); ``what``: the tensor each cut, in words; ``sites``:
    each cut found by the search of :mod:`toolkit.audit.truth.cuts`, as the expression it cuts
    (a :data:`Site`), which the fixes stage writes as an edit
    (:func:`toolkit.audit.fixes.location.edit_of`); ``block``: the first cut enables a disabled toolkit block (the cut is in the user's
    code already).
    """

    dead: frozenset[int] = frozenset()
    edges: frozenset[tuple[int, int]] = frozenset()
    lines: tuple[Line, ...] = ()
    texts: tuple[str, ...] = ()
    what: tuple[str, ...] = field(default=())
    block: bool = False
    sites: tuple[Site, ...] = ()

    def __or__(self, other: Cut) -> Cut:
        return Cut(self.dead | other.dead, self.edges | other.edges,
                   (*self.lines, *other.lines), (*self.texts, *other.texts),
                   (*self.what, *other.what),
                   self.block if self.what else other.block, (*self.sites, *other.sites))

    def __bool__(self) -> bool:
        return bool(self.dead or self.edges)

    @property
    def options(self) -> str:
        """How each cut can be written: ``torch.no_grad()`` only where every cut is of a
        value where it is made (around a line that reads or hands on a value it would also
        stop the gradient of everything else that line computes)."""
        made = bool(self.texts) and all(t.endswith("where it is made") for t in self.texts)
        if PLAIN_TORCH.get():   # a plain torch script's user is offered plain torch only
            return ".detach() or torch.no_grad()" if made else ".detach() of that value"
        return (".detach(), torch.no_grad() or stop_gradient(x, name=...)" if made
                else ".detach() or stop_gradient(x, name=...) of that value")


class Prover:
    """Reachability in the recorded losses' graphs with a :class:`Cut` applied."""

    def __init__(self, step: RecordedStep) -> None:
        self.step = step
        self._before: dict[str, set[int]] = {}
        self._target_reads: dict[str, frozenset[tuple[int, int]]] = {}
        self._trains: dict[str, set[int]] = {}

    def target_reads(self, loss: str) -> frozenset[tuple[int, int]]:
        """The edges by which ``loss`` reads its targets (``step.removed``: a comparison's
        target side, a log-probability's weight), with every other read of such a target by a
        node the same torch call made around it (no line of the step made that node) whose
        other inputs reach no stepped tensor: ``F.kl_div`` reads its target in ``t * log t``
        too, ``F.cosine_similarity`` in the norm it divides by. Gradient by these edges goes
        to the target alone."""
        if loss not in self._target_reads:
            graph, step = self.step.graphs[loss], self.step
            removed = set(step.removed.get(loss, ()))
            stepped = {graph.search.leaf_node[i] for i in step.stepped[loss]
                       if i in graph.search.leaf_node}
            for target in {c for _, c in removed}:
                for reader in graph.callers.get(target, ()):
                    if (reader, target) in removed or reader in step.rec.made:
                        continue
                    others = [c for c in graph.children.get(reader, ()) if c != target]
                    if not graph.reach(others, removed) & stepped:
                        removed.add((reader, target))
            self._target_reads[loss] = frozenset(removed)
        return self._target_reads[loss]

    def reach(self, loss: str, starts: list[int], cut: Cut) -> set[int]:
        """Node ids of ``loss``'s graph reached from ``starts`` through no cut (a dead start
        is reached and not expanded)."""
        graph = self.step.graphs[loss]
        seen: set[int] = set()
        queue = deque(k for k in starts if k in graph.search.nodes)
        while queue:
            key = queue.popleft()
            if key in seen:
                continue
            seen.add(key)
            if key in cut.dead:
                continue
            queue.extend(c for c in graph.children.get(key, ())
                         if (key, c) not in cut.edges and c not in seen)
        return seen

    def stepped_reached(self, loss: str, cut: Cut | None = None) -> set[int]:
        """``id`` of the tensors ``loss``'s optimizer steps that ``loss`` reaches (through
        ``cut``) without passing a target side or a log-probability's weight
        (``step.removed``): what it trains as it should. A tensor trained only through its own
        target (a teacher stepped with its student) is none of them, and a tensor the loss
        reaches only through its target is not kept trained by that path."""
        if cut is None and loss in self._before:
            return self._before[loss]
        search = self.step.searches[loss]
        untargeted = Cut(edges=self.target_reads(loss))
        met = self.reach(loss, self.step.graphs[loss].roots, (cut or Cut()) | untargeted)
        found = {i for i in self.step.stepped[loss]
                 if i in search.leaf_node and search.leaf_node[i] in met}
        for node, reads in self.step.rec.checkpoints.values():  # a reentrant checkpoint
            if id(node) in met:
                found |= reads & set(self.step.stepped[loss])
        if cut is None:
            self._before[loss] = found
        return found

    def reaches(self, loss: str, node: int, cut: Cut, starts: list[int] | None = None) -> bool:
        """Whether ``loss`` (or ``starts`` in its graph) still reaches the node ``node``."""
        roots = self.step.graphs[loss].roots if starts is None else starts
        return node in self.reach(loss, roots, cut)

    def keeps_training(self, cut: Cut) -> bool:
        """Every loss still reaches, through no target, every tensor its optimizer steps that it
        reached so before (:meth:`stepped_reached`)."""
        return all(self.stepped_reached(loss) <= self.stepped_reached(loss, cut)
                   for loss in self.step.losses)

    def spares_training(self, cut: Cut) -> bool:
        """The cut is on no path by which a loss trains what it should (a path through no
        target side nor a log-probability's weight): a trained target is cut where only the
        target passes (``F.cosine_similarity(p, z.detach())``, not where the encoder makes
        ``z`` when ``h(z)`` is the prediction)."""
        for loss, graph in self.step.graphs.items():
            removed = self.target_reads(loss)
            if loss not in self._trains:  # the same for every cut tried
                self._trains[loss] = self.reach(loss, graph.roots, Cut(edges=removed))
            trains = self._trains[loss]
            if any(k in trains for k in cut.dead) or any(
                    p in trains and (p, c) not in removed for p, c in cut.edges):
                return False
        return True

    def spares_gradients(self, cut: Cut) -> bool:
        """No stepped tensor of any loss is reached through the cut: the gradients of what the
        optimizers step do not change (except through the edge into a target or into the
        weight of a log-probability: gradient no stepped tensor should get)."""
        for loss, graph in self.step.graphs.items():
            mine = {self.step.searches[loss].leaf_node[i] for i in self.step.stepped[loss]
                    if i in self.step.searches[loss].leaf_node}
            starts = [k for k in cut.dead if k in graph.search.nodes]
            # a cut of a target's or a log-probability weight's edge only removes gradient
            # that no stepped tensor should get (the trained target it also fixes)
            starts += [c for p, c in cut.edges if p in graph.search.nodes
                       and (p, c) not in self.step.removed[loss]]
            if starts and graph.reach(starts) & mine:
                return False
        return True
