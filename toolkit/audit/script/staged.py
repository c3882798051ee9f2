"""The step audit's stages on a running script: each audited ``backward()`` is judged as a
recorded step (record -> truth -> rules -> fixes), as :func:`~toolkit.audit.audit_step` judges a
step function.

While the watch audits an iteration, a :class:`~toolkit.audit.record.recording.Recording` runs
under the script's own code, as it runs under a step: it names the modules the script holds,
marks cuts, notes in-place writes and maps module calls to their lines. It is paused around
every ``backward()`` and ``optimizer.step()`` (the watch's own work and the update are not the
script's forward) and resumed after them; a new *call* of the recording begins after each step.

At an audited ``backward()``, before it runs, its loss becomes a
:class:`~toolkit.audit.truth.recorded.RecordedStep`, paired with the optimizers whose tensors the
loss reaches (in a script, which optimizer steps a loss is known only after its backward), and
the step audit's rules for trained targets, carried graphs, held graphs and constant terms
judge it, each failure's fix written by the fixes stage in plain PyTorch. None of these rules
counts the real gradients (the leaks and dead rules do: a running script's are judged at its
step, by :mod:`toolkit.audit.rules.running`), so no second backward runs. The failures become
:class:`ScriptFinding` of the same kind, verified afterwards by rerunning the edited script like
every other finding of the script mode. Nodes made before the iteration began are what the
carried rule calls carried.

A failure of a kind the running rules report themselves at the same lines, or about the same
tensors, is theirs: :meth:`Staged.findings` leaves it out.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
from collections.abc import Container, Iterable, Mapping, Sequence
from types import FrameType
from typing import Any

import torch
from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ConstantTerm, CutKeys, ScriptFinding, UnrolledLoop, first_names
from toolkit.audit.fixes.edits import cut_as_seen, skeleton
from toolkit.audit.idiom import PLAIN_TORCH
from toolkit.audit.kinds import Kind
from toolkit.audit.record import syntax as S
from toolkit.audit.record.calls import CallWatch
from toolkit.audit.record.frames import is_user
from toolkit.audit.record.modes import remove_mode
from toolkit.audit.record.names import Names, held_in
from toolkit.audit.record.recording import Recording
from toolkit.audit.result import GROUPS, StepAudit
from toolkit.audit.rules import carried, constant, held, keys, targets, unrolled
from toolkit.audit.step import run_rules
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.audit.truth.proof import Prover
from toolkit.audit.truth.recorded import record_step

__all__ = ["Staged", "scope_of", "user_frames"]

#: the step audit's failures the script mode takes from one loss: what its own graph shows. Dead
#: and shared tensors are the running rules', judged at the step, from every backward the step
#: sums (two losses backwarded before one step train a tensor that either alone leaves dead); so
#: are tensors the loss reaches that no optimizer steps, judged by their role (on the
#: prediction's side unstepped, a failure; on a target's side wasted work, information).
_FAILURES = ("targets", "carried", "unrolled", "held", "constant_terms", "cut_keys")
#: their rules; none of them reads the truth (what a real ``autograd.grad`` reaches), which the
#: leaks and dead rules count, so no second backward is run
_RULES = (targets.check, carried.check, unrolled.check, held.check, constant.check, keys.check)


def updated_by_hand(leaves: Mapping[int, torch.Tensor]) -> list[torch.Tensor]:
    """Of the tensors a loss reaches (``leaves``, by ``id``), the parameters that require
    grad: in a loop no optimizer steps, those stand for the stepped ones."""
    return [t for t in leaves.values() if isinstance(t, nn.Parameter) and t.requires_grad]


def user_frames(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            out.append(frame)
        frame = frame.f_back
    return out


def scope_of(frames: Sequence[FrameType]) -> dict[str, Any]:
    """The names the user's ``frames`` (innermost first, as :func:`user_frames` gives them)
    hold, an inner frame's over an outer's, each frame's locals over its globals."""
    namespace: dict[str, Any] = {}
    for f in reversed(frames):
        namespace.update(f.f_globals)
        namespace.update(f.f_locals)
    return namespace


class Staged:
    """The recording under the script's audited iterations and what the step audit's rules
    found in each of its losses (see the module's docstring)."""

    def __init__(self) -> None:
        self.names = Names()
        self.rec: Recording | None = None
        self.entered = False
        # the recording's patches of classes, held from its first entry to :meth:`close`
        self._patches: contextlib.ExitStack | None = None
        # (iteration, step, the backward's index (its ledger source's), the loss's label, the
        # names the user's frames bind to tensors with a graph there, what the rules found)
        self.audits: list[tuple[int, int, int, str, frozenset[str], StepAudit]] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        # a cut's edit -> the forms of the value its expression held (fixes.edits.skeleton)
        self.seen: dict[Edit, set[str]] = {}

    # --- what the recording names -------------------------------------------------------
    def learn(self, frame: FrameType | None, optimizers: Sequence[torch.optim.Optimizer],
              by_hand: bool = False) -> None:
        """Name the modules the user's frames from ``frame`` outwards hold (their locals,
        then their globals, then the attributes of a method's ``self``), and watch every
        tensor of ``optimizers`` (``by_hand``: of those modules, which the script updates
        itself)."""
        before = len(self.names.objects)
        listed: list[tuple[str, nn.Module]] = []
        for f in user_frames(frame):
            scopes: list[Iterable[tuple[str, Any]]] = [f.f_locals.items()]
            receiver = f.f_locals.get("self") if f.f_code.co_argcount else None
            if receiver is not None and hasattr(receiver, "__dict__") and \
                    not isinstance(receiver, nn.Module):
                scopes.append((f"self.{k}", v) for k, v in vars(receiver).items())
            scopes.append(f.f_globals.items())
            for scope in scopes:
                for name, value in list(scope):
                    if name.startswith("_"):
                        continue
                    if isinstance(value, nn.Module):
                        self.names.add_module(name, value)
                    else:
                        listed.extend(held_in(name, value))
        # then the networks a plain list, tuple or dict holds (an ensemble's members, a
        # mixture's experts), by their place there, where no name the frames bind holds them
        for name, module in listed:
            self.names.add_module(name, module)
        new = [opt for opt in optimizers if not any(opt is o for o in self.optimizers)]
        self.optimizers.extend(new)
        tensors = [p for opt in new for g in opt.param_groups for p in g["params"]]
        if by_hand:
            tensors += [p for m in self.names.objects.values() if isinstance(m, nn.Module)
                        for p in m.parameters() if p.requires_grad]
        held = {id(p) for p in tensors}
        for f in user_frames(frame):   # a plain tensor an optimizer steps, by its name there
            for name, value in [*f.f_locals.items(), *f.f_globals.items()]:
                if isinstance(value, torch.Tensor) and id(value) in held and \
                        not name.startswith("_"):
                    self.names.add_tensor(name, value)
        if self.rec is None:
            watched = {**self.names.objects, **{id(p): p for p in tensors}}
            self.rec = Recording(self.names, watched, None, step_hooks=False)
            self.rec.next_call()
        elif len(self.names.objects) != before or tensors:
            self.rec.watch([*self.names.objects.values(), *tensors])

    # --- when it records ----------------------------------------------------------------
    def resume(self, new_call: bool = False) -> None:
        """Record again (after a backward or a step; ``new_call`` after a step)."""
        rec = self.rec
        if rec is None or (self.entered and not rec.suspended):
            return
        _drop_gone()
        if new_call:
            rec.next_call()
        if self.entered:
            rec.unsuspend()
        else:
            if self._patches is None:
                self._patches = rec.hold_patches()
            rec.__enter__()
            self.entered = True

    def pause(self) -> None:
        """Stop recording (before a backward or a step): the recording leaves the mode stack
        and its hooks pass every call through until :meth:`resume`."""
        if self.rec is not None and self.entered:
            self.rec.suspend()

    def leave(self) -> None:
        """Stop recording until an audited iteration comes: the recording's hooks go (an
        iteration not audited runs without them)."""
        if self.rec is not None and self.entered:
            self.entered = False
            self.rec.__exit__(None, None, None)

    def close(self) -> None:
        """Stop recording for good (the audited iterations are done)."""
        self.leave()
        if self._patches is not None:
            self._patches.close()
            self._patches = None
        self.rec = None
        _drop_gone()

    # --- the step audit of one backward -------------------------------------------------
    def judge(self, roots: Sequence[torch.Tensor], leaves: Mapping[int, torch.Tensor],
              frame: FrameType | None, iteration: int, step: int, marks: tuple[int, int],
              label: str, namespace: dict[str, Any], graph: StepGraph | None = None,
              index: int = -1) -> None:
        """Run the step audit's rules (:data:`_RULES`) on the loss ``roots`` (one scalar) that the
        script is about to differentiate, paired with the optimizers owning tensors among
        ``leaves`` (the leaves its graph reaches, by ``id``). ``marks``: autograd's sequence
        number where the previous iteration and this one began; ``namespace``: the names the
        user's frames hold there (:func:`scope_of`); ``graph``: the loss's graph, when the
        watch has read it; ``index``: the backward's (its ledger source's)."""
        rec = self.rec
        if rec is None or len(roots) != 1 or roots[0].numel() != 1 \
                or not roots[0].requires_grad:
            return
        # the optimizers of the tensors the graph reaches, and of those behind a scalar made
        # of cut outputs and added to it (a network run under no_grad whose own loss is a
        # constant term: its optimizer is one of this loss's, stepping nothing)
        reached = set(leaves).union(*(constant.cut_behind(cut)
                                      for call, cuts, *_ in rec.cut_added
                                      if call == rec.call for cut in cuts))
        paired = [opt for opt in self.optimizers
                  if any(id(p) in reached for g in opt.param_groups for p in g["params"])]
        rules = _RULES
        pairing: Any = paired[0] if len(paired) == 1 else [
            g for opt in paired for g in opt.param_groups]
        if not paired:
            # no optimizer holds a tensor the loss reaches: the update is written by hand (a
            # manual SGD, ``p.data.add_(p.grad, alpha=-lr)``), or there is none. The rules
            # that read the graph alone still hold (a graph carried from an earlier iteration,
            # or kept in a module's state), the parameters it reaches standing for the stepped
            by_hand = updated_by_hand(leaves)
            if not by_hand:
                return
            pairing, rules = [{"params": by_hand}], (targets.check, carried.check, held.check)
        losses = {"loss": roots[0]}
        pairings = {None: pairing}
        stepped = {None: {id(p): p for g in (pairing.param_groups if len(paired) == 1
                                             else pairing) for p in g["params"]}}
        rec.marks[:] = [marks[0], marks[1]]
        recorded = record_step(losses, pairings, stepped, rec, allow_pass_through=True,
                               allow_trained_target=False,
                               graphs=None if graph is None else {"loss": graph})
        recorded.removed = {name: targets.target_edges(graph, set(recorded.stepped[name]))
                            for name, graph in recorded.graphs.items()}
        recorded.prover = Prover(recorded)
        recorded.namespace = namespace
        if frame is not None:
            recorded.loss_at = (os.path.abspath(frame.f_code.co_filename), frame.f_lineno)
        plain = PLAIN_TORCH.set(True)   # the fixes' words in plain torch, as the script is
        try:
            audit = run_rules(recorded, rules)
        finally:
            PLAIN_TORCH.reset(plain)
        if not audit.ok:
            graphed = frozenset(n for n, v in namespace.items() if isinstance(v, torch.Tensor)
                                and (v.grad_fn is not None or v.requires_grad))
            self.audits.append((iteration, step, index, label, graphed, audit))
            self._see(audit, frame)

    def _see(self, audit: StepAudit, frame: FrameType | None) -> None:
        """What each cut of a failure's edits held, where it names a variable of the user's
        frame at its file: a tuple of states is cut item by item (``tuple(t.detach() for t
        in hidden)``), as the step audit writes it for what its step held."""
        frames = user_frames(frame)
        for group in _FAILURES:
            for found in getattr(audit, group):
                for edit in getattr(found, "edits", ()) or ():
                    if not edit.cut or not edit.old.isidentifier():
                        continue
                    for f in frames:
                        if os.path.abspath(f.f_code.co_filename) != os.path.abspath(edit.path):
                            continue
                        scope = f.f_locals if edit.old in f.f_locals else f.f_globals
                        if edit.old in scope:
                            self.seen.setdefault(edit, set()).add(
                                repr(skeleton(scope[edit.old])))
                        break

    # --- as the script mode reports it --------------------------------------------------
    def findings(self, theirs: Iterable[ScriptFinding], their_tensors: Iterable[int] = (),
                 used: Container[tuple[int, int]] | None = None) -> list[ScriptFinding]:
        """Each failure the rules found, once (its first iteration), as a
        :class:`ScriptFinding`, the tensors of one kind with the same lines and edits as one
        finding. One the running rules report (``theirs``, about the tensors whose ``id`` are
        ``their_tensors``) at one of its lines or about one of its tensors, failure or
        information, is theirs: it is left out. So is a ranked pair's cut side whose network
        no step trains with the loss's gradient (``used``: each (backward, tensor) whose
        gradient a step used; a relativistic generator's loss reaches the discriminator, whose
        optimizer clears that gradient before its step)."""
        theirs = list(theirs)
        taken_lines = {a.split(": ", 1)[0] for f in theirs for a in f.at}
        taken = set(their_tensors)
        by_name = {name: key for key, name in self.names.tensors.items()}
        out: dict[tuple, ScriptFinding] = {}
        for iteration, step, index, label, graphed, audit in self.audits:
            for group in _FAILURES:
                for found in getattr(audit, group):
                    if isinstance(found, CutKeys) and found.ranked and used is not None \
                            and not any((index, by_name.get(n)) in used for n in found.through):
                        continue
                    finding = _as_script(GROUPS[group], found, iteration, step, label,
                                         graphed)
                    if finding is None:
                        continue
                    finding = self._as_seen(finding)
                    lines = {a.split(": ", 1)[0] for a in finding.at}
                    # the watch has no rule of constant terms or cut keys: its findings about
                    # the same tensors are about something else
                    mine = {by_name.get(n) for n in finding.names} \
                        if finding.kind not in (Kind.CONSTANT_TERM, Kind.CUT_KEYS) else set()
                    if lines & taken_lines or mine & taken:
                        continue
                    key = (finding.kind, finding.at, finding.edits)
                    if key in out:
                        finding = _joined(out[key], finding, label)
                    out[key] = finding
        return list(out.values())

    def _as_seen(self, finding: ScriptFinding) -> ScriptFinding:
        """``finding`` with each cut written for the value it cuts (none when no plain form
        cuts it exactly: advice only)."""
        edits = []
        for edit in finding.edits:
            seen = self.seen.get(edit)
            written = cut_as_seen(edit, [ast.literal_eval(x) for x in seen]) if seen else edit
            if written is None:
                return dataclasses.replace(finding, edits=())
            edits.append(written)
        return dataclasses.replace(finding, edits=tuple(edits))


def _joined(first: ScriptFinding, more: ScriptFinding, label: str) -> ScriptFinding:
    """One finding for the tensors of both (the first's iteration, step and message, the
    message written again for the tensors of both when it names tensors)."""
    names = tuple(dict.fromkeys((*first.names, *more.names)))
    values = tuple(dict.fromkeys((*first.values, *more.values)))
    if names == first.names and values == first.values:
        return first
    concerned = tuple(dict.fromkeys((*first.concerned, *more.concerned)))
    return dataclasses.replace(first, names=names, tensors=names, concerned=concerned,
                               values=values,
                               message=_message(first.kind, None, label, names,
                                                first.extra.get("reason", "")))


def _drop_gone() -> None:
    """Take off the mode stack every recording mode paused while it dispatched a call (torch
    put it back after the call)."""
    for i in reversed(range(torch._C._len_torch_function_stack())):
        mode = torch._C._get_function_stack_at(i)
        if isinstance(mode, CallWatch) and mode.gone:
            remove_mode(mode)


def _names_of(found: Any) -> tuple[str, ...]:
    """The names of what ``found`` concerns."""
    if isinstance(found, ConstantTerm) and found.cut in ("self", ""):
        # the values (a gradient taken without create_graph: its name), what they train
        return (*found.tensors, *found.through)
    if isinstance(found, ConstantTerm | CutKeys) and found.cut:   # a cut: what it would train
        return found.through
    for attr in ("parameters", "tensors"):
        value = getattr(found, attr, None)
        if value:
            return tuple(value)
    for attr in ("parameter", "tensor"):
        value = getattr(found, attr, None)
        if isinstance(value, str):
            return (value,)
    return ()


def _values_of(found: Any, graphed: frozenset[str]) -> tuple[str, ...]:
    """Of a constant term's cut, the values the statements where its fix goes bind, as the
    script names them, but those the user's frames hold with a graph (``graphed``: a loss
    made with the cut value, not the value)."""
    if not (isinstance(found, ConstantTerm) and found.cut in ("no_grad", "detach")):
        return ()
    made = set().union(*(S.assigned_names(line.path, line.number)
                         for line in found.lines if line.path))
    return tuple(sorted(made - graphed))


def _as_script(kind: Kind, found: Any, iteration: int, step: int,
               label: str, graphed: frozenset[str] = frozenset()) -> ScriptFinding | None:
    """A step finding as the script mode reports it: its message, lines, fix and edits; the
    tensors by their names (stable across a rerun of the edited script)."""
    lines = tuple(str(line) for line in getattr(found, "lines", ()) or ())
    if not lines:
        return None
    names = _names_of(found) or _state_of(kind, found)
    fix = getattr(found, "fix", "") or ""
    # a dead tensor's fix gives it a gradient; a leak's cut changes no stepped gradient; a
    # target's or a carried graph's changes those of the tensors the loss trains
    concerned = names if kind is Kind.DEAD else () if kind is Kind.LEAK else ("*",)
    reason = ""
    if dataclasses.is_dataclass(found):
        reason = str(getattr(found, "reason", "") or getattr(found, "form", "") or "")
    return ScriptFinding(kind, iteration, _message(kind, found, label, names, reason), names,
                         names, lines,
                         tuple(getattr(found, "edits", ()) or ()), advice=fix, step=step,
                         concerned=concerned,
                         extra={"staged": True, "loses": kind is Kind.TARGET,
                                "reason": reason}, values=_values_of(found, graphed))


def _state_of(kind: Kind, found: Any) -> tuple[str, ...]:
    """What holds the graph of a carried or held finding, as the script names it: the state
    each cut reads (``hidden``, ``self.state``) and the module that made it; the module's
    buffer or attribute (``net.1.mean``)."""
    if kind is Kind.HELD:
        return (f"{found.module}.{found.name}",)
    if kind is not Kind.CARRIED:
        return ()
    cut = [e.old for e in getattr(found, "edits", ()) or () if e.cut]
    maker = str(found.source).removeprefix("the output of ").split("[")[0].split(" ")[0]
    return tuple(dict.fromkeys([*([found.container] if found.container else []), *cut,
                                *([maker] if maker and maker != str(found.source) else [])]))


def _message(kind: Kind, found: Any, label: str, names: Sequence[str], reason: str) -> str:
    what = first_names(list(names))
    if isinstance(found, UnrolledLoop):
        return f"{label} {found.what()}"
    if kind is Kind.CARRIED and found is not None:
        kept = f", kept in `{found.container}` beside this iteration's entries" \
            if found.container else ""
        return (f"the graph of {label} reaches {found.n_nodes} nodes made before its iteration "
                f"({found.source}{kept}, entering at {found.entered}): it grows every "
                f"iteration, or the next backward() fails 'a second time'")
    if kind in (Kind.CONSTANT_TERM, Kind.CUT_KEYS) and found is not None:
        return f"{label} {found.what()}"
    if kind is Kind.HELD and found is not None:
        return (f"{found.module}.{found.name} holds the graph of {label} after its step "
                f"({found.written}; {found.n_nodes} nodes): it grows every iteration")
    text = {Kind.LEAK: f"{label}'s gradient reaches {what}, which no optimizer of it steps",
            Kind.TARGET: f"{label} compares with a target that carries gradient into {what}",
            Kind.CARRIED: f"the graph of {label} reaches graph made before its iteration",
            Kind.HELD: f"the graph of {label} is kept after its step"}.get(kind, str(kind))
    return f"{text}{f' ({reason})' if reason else ''}"
