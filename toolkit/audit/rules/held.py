"""Graph held in module state: buffers, tensor attributes and parameters that still have a
``grad_fn`` after the step.

A BatchNorm written by hand, ``running_mean.mul_(1 - m).add_(m * x.mean(0))``, makes the
buffer a node of the step's graph: the buffer keeps that graph (and, through the previous value,
every earlier step's) alive, and memory grows without bound (bayesiains/nflows#10, fixed in
#11 by ``mean.detach()``; pytorch/pytorch#20275). The same holds for an attribute
(``self.last = out``), whether or not any loss ever reads it. After the step's second call the
audit looks at every buffer and tensor attribute of every module it named. A buffer with a
``grad_fn`` is always a finding; so is an attribute written in place or whose graph reaches an
earlier call's; so is a parameter that does not require grad, written in place from one that
does (an EMA teacher updated outside ``torch.no_grad()``: no leaf any more). An attribute
assigned a fresh tensor each call (``self.batch_mean = x.mean(0)``) keeps one step's graph
until the next step replaces it, and the step's backward frees what that graph saved: a note.

Not counted: a weight that a module recomputes from its stored parameters in every forward
(the ``spectral_norm`` / ``weight_norm`` hooks keep it as the attribute ``weight``): its graph
holds only parameters, and the next forward replaces it.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from toolkit.audit.findings import HeldGraph
from toolkit.audit.record.recording import Recording
from toolkit.audit.record.sites import Line
from toolkit.audit.rules.carried import (
    assigned_now,
    grows_or_fails,
    reader_ways,
    reads_own,
    reset_at,
    reset_text,
    state_assignable,
)
from toolkit.audit.rules.saved import saved_bytes
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.labels import Labeller
from toolkit.audit.truth.proof import AssignedAt, Site, WrittenAt
from toolkit.lens.backward_graph import is_cut_marker
from toolkit.lens.graph_walk import walk

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check", "find_held"]


class _Edge:
    def __init__(self, t: torch.Tensor) -> None:
        self.grad_fn, self.output_nr = t.grad_fn, t.output_nr


def find_held(rec: Recording, label: Labeller, region: set[int],
              step: RecordedStep | None = None
              ) -> tuple[list[Wanted[HeldGraph]], list[str]]:
    """Every buffer and tensor attribute of the named modules that holds a ``grad_fn``:
    ``(findings, notes)``, each finding with the ways to fix it (the first chosen is its fix:
    :class:`~toolkit.audit.rules.wanted.FirstOf`). An attribute the step *assigns* a fresh
    tensor each call, whose graph reaches nothing from an earlier call, only keeps this step's
    graph until the next step (its saved tensors are freed by the step's backward): a note, not
    a finding."""
    this_mark = rec.marks[-1]
    out, notes = [], []
    seen_modules: set[int] = set()
    for root in rec.names.roots:
        for module in root.modules():
            if id(module) in seen_modules:
                continue
            seen_modules.add(id(module))
            for name, t, kind in _state(module, rec.writes):
                if t.grad_fn is None or not _live(t.grad_fn) or (
                        kind != "parameter" and id(t.grad_fn) in region) \
                        or not grows_or_fails(t.grad_fn, rec.marks[0]):
                    continue  # (a tensor made once before the loop, saving nothing)
                wanted = _held(rec, label, module, name, t, kind, this_mark, step)
                held = wanted.finding
                if kind == "attribute" and held.older == 0 and id(t) not in rec.writes:
                    notes.append(f"{held.module}.{held.name} (an attribute) keeps this step's "
                                 f"graph until the next step replaces it ({held.written}; "
                                 f"{held.n_nodes} nodes); the step's backward frees what they "
                                 f"saved")
                else:
                    out.append(wanted)
    return out, notes


def _live(node: Any) -> bool:
    """Whether the graph behind ``node`` is graph in a plain run: it reaches a tensor that
    requires grad without passing a cut (the recording marks a ``stop_gradient`` with a node;
    a buffer written from the cut value has no ``grad_fn`` outside the audit)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen or is_cut_marker(n):
            continue
        seen.add(id(n))
        if getattr(n, "variable", None) is not None:
            return True
        stack.extend(child for child, _ in n.next_functions)
    return False


def _state(module: nn.Module, written: Container[int] = ()) -> list[tuple[str, torch.Tensor,
                                                                           str]]:
    found = [(n, t, "buffer") for n, t in module._buffers.items() if t is not None]
    # a parameter that does not require grad, written in place from one that does (an EMA
    # teacher updated outside torch.no_grad()), is no leaf any more: it holds the step's graph
    # (one a functional update put in its place, learn2learn's update_module, is not written)
    found += [(n, t, "parameter") for n, t in module._parameters.items()
              if t is not None and t.grad_fn is not None and id(t) in written]
    found += [(n, t, "attribute") for n, t in vars(module).items()
              if isinstance(t, torch.Tensor) and not isinstance(t, nn.Parameter)]
    return found


def _held(rec: Recording, label: Labeller, module: nn.Module, name: str, t: torch.Tensor,
          kind: str, this_mark: int, step: RecordedStep | None = None
          ) -> Wanted[HeldGraph]:
    owner = rec.names.modules.get(id(module), type(module).__name__)
    write = rec.writes.get(id(t))
    if write is not None:
        where = f"in the forward of {write.module}" if write.module else "by the step"
        written = f"{', '.join(dict.fromkeys(write.ops))} {where}"
        fix = (f"write it from detached values: .detach() (or torch.no_grad()) on what "
               f"{', '.join(dict.fromkeys(write.ops))} adds into {owner}.{name}")
    else:
        written = f"assigned a tensor made by {label(t.grad_fn)}"
        fix = f"assign {owner}.{name} a detached tensor (.detach() where it is computed)"
    seen: set[int] = set()
    size = n_new = n_old = 0
    for _, node, _, first in walk([_Edge(t)], expand=lambda n: not is_cut_marker(n)):
        if not first or getattr(node, "variable", None) is not None or is_cut_marker(node):
            continue
        if node._sequence_nr() >= this_mark:
            n_new += 1
            size += saved_bytes(node, seen)
        else:
            n_old += 1
    assign = rec.lines.get(("assign", id(module), name))
    line = (rec.lines.get(("write", id(t))) if write is not None
            else assign or rec.lines.get(("call", rec.call, owner)))
    finding = HeldGraph(module=owner, name=name, kind=kind, shape=tuple(t.shape),
                        written=written, graph_bytes=size, n_nodes=n_new, older=n_old, fix="")
    if write is not None:  # every write that added a graph, cut where it is written
        lines = rec.graph_writes.get(id(t), [])
        if lines:
            line = lines[0]
        options = [Option(tuple(WrittenAt(x) for x in lines), fix,
                          () if line is None else (line,))]
    elif assign is not None and step is not None:
        options = _assigned_options(step, module, name, owner, assign, fix)
    else:
        options = [Option(() if assign is None else (AssignedAt(assign),), fix,
                          () if line is None else (line,))]
    return Wanted(finding, FirstOf(tuple(options)))


def _assigned_options(step: RecordedStep, module: nn.Module, name: str, owner: str,
                      assign: Line, fix: str) -> list[Option]:
    """The ways to fix a graph the step assigns to ``owner.name`` at ``assign``, in the order
    they are tried: the reset of a memory made lazily (``None`` before the step first stored a
    tensor there) when no cut keeps each call's own gradient (this call stores nothing there:
    it reads a stale value; or every line that reads the old value also reads what this call
    stores); where this call's loss trains through what is stored, a cut of the previous
    call's value where it is read (each call keeps its own gradient), else advice to reset it
    each step; else the value cut where it is assigned (``fix``)."""
    reset = reset_at(step, module, name, owner)
    resetting = None if reset is None else Option(
        (reset,), f"no cut where it is stored or read keeps each call's own gradient: "
                  f"{reset_text(module, name, owner, first_none=True)}", (reset.line,))
    now = assigned_now(step, assign)
    if resetting is not None and not now:
        return [resetting]
    if state_assignable(step, assign):
        return [Option((AssignedAt(assign),), fix, (assign,))]
    options = []
    for lines, sites in _previous_readers(step, assign):
        if resetting is not None and reads_own(step, now, lines):
            options.append(Option(resetting.places, resetting.fix, resetting.lines, sites))
        else:
            options.append(Option(
                sites, f"this step's loss trains through {owner}.{name}: cut the previous "
                       f"step's value where it is read (.detach() there), which keeps each "
                       f"step's own gradient", (lines[0],), sites))
    options.append(Option((), f"this step's loss trains through {owner}.{name}, so no cut "
                              f"where it is stored keeps its gradient: "
                              f"{reset_text(module, name, owner)}", (assign,)))
    return options


def _previous_readers(step: RecordedStep, assign: Line
                      ) -> list[tuple[tuple[Line, ...], tuple[Site, ...]]]:
    """Where this call reads the value the previous call last assigned at ``assign``, and
    the expressions to cut there (:func:`~toolkit.audit.rules.carried.reader_ways`)."""
    before = [node for node, at in step.rec.assigned.values()
              if at == assign and at.span == assign.span
              and node._sequence_nr() < step.rec.marks[-1]]
    return reader_ways(step, max(before, key=lambda n: n._sequence_nr())) if before else []


def check(step: RecordedStep) -> Found:
    """The rule: buffers and tensor attributes holding a ``grad_fn`` after the step."""
    held, notes = find_held(step.rec, step.label, step.region, step)
    return {"held": held, "notes": notes}
