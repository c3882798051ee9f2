"""Audit a whole training step against its optimizers: what each loss's gradient reaches, and
what the step leaves behind.

The lens (:func:`~toolkit.lens.gradient_path`, :func:`~toolkit.lens.assert_no_gradient`)
answers questions one already knows to ask. :func:`audit_step` asks them all at once, for a
step written as a function that returns its loss (or a dict of losses) and the optimizers that
will step each loss's parameters. Failures (``audit.ok`` is ``False``):

- **leaks**: tensors a loss's gradient reaches that its optimizer does not step, where a cut
  can remove that gradient without cutting a stepped tensor off the loss (a DQN target
  network, a generator in the discriminator's step, an EMA or distillation teacher), or that
  the optimizer steps while the step also writes them in place from other trained tensors
  (updated twice; a clamp or a mask only constrains them: a note); each with its
  shortest path, the gradient's bytes and the cut that removes it;
- **trained targets**: a regression, TD, soft-target or score-function loss whose target
  reaches the parameters the same optimizer trains (see :mod:`toolkit.audit.rules.targets`);
- **dead parameters**: what an optimizer steps, requiring grad, that none of its losses
  reaches, with the cut that stops it (a named block, ``detach``, ``no_grad``, never read);
- **carried graphs**: the step's graph reaching graph made by its previous call (a recurrent
  state kept without a cut: memory grows every step, or backward fails "a second time");
- **held graphs**: a buffer or tensor attribute of a module that holds a ``grad_fn`` after the
  step (running statistics written from a batch mean with its graph), or a list, dict, global
  or closure variable that keeps the graph of both calls (``history.append(loss)``, a replay
  buffer of samples kept with their graph);
- **constant terms**: a term added to a loss, made from a gradient ``torch.autograd.grad``
  took without ``create_graph=True``: a constant that trains nothing (a gradient penalty
  written without a graph; see :mod:`toolkit.audit.rules.constant`);
- **shared tensors**: tensors held by two distinct optimizer objects given, stepped twice
  per iteration (one finding per pair, with the lines that build both; losses paired with
  param groups of one optimizer step nothing twice).

Every fix is proved on the recorded graph before it is printed (:mod:`toolkit.audit.truth.proof`)
and names the line of the user's code where it goes (:mod:`toolkit.audit.truth.cuts`), where the
fixes stage writes it (:mod:`toolkit.audit.fixes.location`).
Each kind of finding is one rule, a function of the recorded step, listed in :data:`RULES`.

Information: **pass-through** (tensors the gradient must pass to reach the stepped ones: the
discriminator in a generator step; *proved*, see :mod:`toolkit.audit.rules.leaks`), **frozen**
tensors in an optimizer (``requires_grad=False``, skipped by every torch optimizer), in-place
writes (an average, a copy). :mod:`toolkit.audit.result` documents every field.

Nothing is differentiated: the audit walks the backward graph from each loss's ``grad_fn``
(``AccumulateGrad`` nodes identify the leaves), never calls ``backward()`` or
``optimizer.step()`` and never reads or writes ``.grad``.

What it cannot know: what the code does between steps (``zero_grad`` forgotten, the order of
``step()`` calls, gradient accumulation, ``clip_grad_norm_``); which loss trains what when one
optimizer steps everything and the losses are summed (a network in the optimizer is taken as
meant to be trained, so a target network stepped by the same optimizer is trained, not
leaking, unless a recognised target form exposes it); whether a target read through a form it
does not recognise (cosine similarity, a margin) is meant to carry gradient; what runs in
other threads (``nn.DataParallel``): the threads and the line that started each are named in a
note and ``threads``, and carried graphs are then not checked (autograd numbers each thread's
nodes apart); graphs built by custom autograd functions that hide their inputs.
A reentrant ``torch.utils.checkpoint`` (``use_reentrant=True``) is one such function: the
tensors its function reads count as reached when its node is, with no path to show, and a
tensor outside the optimizer read there is not seen to leak.

References:
    PyTorch, "Autograd mechanics", https://pytorch.org/docs/stable/notes/autograd.html ;
    ``torch.autograd.graph.Node``, https://pytorch.org/docs/stable/autograd.html#autograd-graph
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from toolkit.audit.arguments import losses_of, pair_losses, pairings_of, stepped_of
from toolkit.audit.fixes.built import built_line, function_of
from toolkit.audit.fixes.chosen import first_written
from toolkit.audit.fixes.location import cut_edits
from toolkit.audit.fixes.optimizer_edits import leave_out_of_first, rebuild_fix
from toolkit.audit.record.names import Names, find_modules
from toolkit.audit.record.recording import Recording
from toolkit.audit.record.sites import STOP_CODES, caller_frame
from toolkit.audit.record.state import StateSnapshot
from toolkit.audit.result import StepAudit, listing
from toolkit.audit.rules import (
    carried,
    constant,
    dead,
    held,
    kept,
    keys,
    leaks,
    shared,
    targets,
    unrolled,
)
from toolkit.audit.rules.notes import notes_of
from toolkit.audit.rules.wanted import BuildAfter, CutAt, FirstOf, Wanted
from toolkit.audit.truth.proof import Prover
from toolkit.audit.truth.recorded import Found, RecordedStep, record_step
from toolkit.audit.truth.truth import real_gradients
from toolkit.audit.verify.in_process import VERIFYING, verified
from toolkit.lens.flow import GradientLeakError

__all__ = ["RULES", "assert_clean_step", "audit_step"]

#: The audit's rules, run in this order on the recorded step: each returns its findings by
#: ``StepAudit`` field (see :mod:`toolkit.audit.findings`), a finding whose fix the fixes stage
#: writes wrapped in :class:`~toolkit.audit.rules.wanted.Wanted` (see :func:`run_rules`).
RULES: tuple[Callable[[RecordedStep], Found], ...] = (
    leaks.check, targets.check, dead.check, carried.check, unrolled.check, held.check, kept.check,
    constant.check, keys.check, shared.check)


# One audit at a time in a process: the recording's hooks (the torch-function mode, the global
# module hooks) see every thread's calls, and CPython's ast module keeps global state that two
# threads parsing and compiling at once corrupt ("AST constructor recursion depth mismatch").
# Reentrant: the verification of an audit's fixes audits the edited step in the same thread.
_ONE_AT_A_TIME = threading.RLock()


def _one_at_a_time(audit: Callable[..., StepAudit]) -> Callable[..., StepAudit]:
    @functools.wraps(audit)
    def serialised(*args: Any, **kwargs: Any) -> StepAudit:
        with _ONE_AT_A_TIME:
            return audit(*args, **kwargs)
    return serialised


def _refuse_meta(tensors: Any, what: str, where: str) -> None:
    """A meta tensor holds no values, and the audit's truth is a real backward: one line."""
    if any(isinstance(t, torch.Tensor) and t.is_meta for t in tensors):
        raise ValueError(f"{where}: {what} on the meta device, which holds no values; the "
                         f"audit's truth is a real backward: run the step on a real device "
                         f"(a tiny batch on the CPU is enough)")


@_one_at_a_time
def audit_step(step: Callable[[], Any], optimizers: Any, *,
               modules: nn.Module | Mapping[str, nn.Module] | None = None,
               restore_state: bool = True, allow_pass_through: bool = True,
               allow_trained_target: bool = False) -> StepAudit:
    """Audit one training step: leaks, trained targets, dead parameters, carried and held
    graphs, with nothing stepped and no ``.grad`` written.

    ``step()`` computes the loss of one training step (or a dict name → loss) and returns it,
    best without ``backward`` or ``optimizer.step()``; a step that calls them itself is
    audited the same (its graph is read after its backward) and its updates are put back. The
    audit calls it **twice**, inside a recording that names modules, marks cuts and notes
    in-place writes (see :mod:`toolkit.audit.record.recording`). What each loss's gradient
    reaches, and what it leaves at exactly zero, comes from one real ``torch.autograd.grad``
    per loss of the second call (and of the first, for what the second leaves at zero):
    :mod:`toolkit.audit.truth.truth`; the walk of the backward graph says along which path,
    where the cut goes and at which line (what each finding means: :class:`StepAudit` and
    :mod:`toolkit.audit.result`). Called with gradients off (``torch.no_grad()``,
    ``torch.inference_mode()``), it runs the step with them on, as training does, and says so;
    a complex loss is an error, as it is for ``backward()``.

    Running the step twice has the effects of two steps on everything the step touches: a
    BatchNorm's running statistics move twice, ``num_batches_tracked`` grows by 2, the random
    generators advance, an EMA update inside the step is applied twice, a data iterator or a
    replay buffer yields two batches. With ``restore_state=True`` (the default) the audit saves
    the parameters, buffers, ``.grad``, train/eval and ``requires_grad`` flags and plain
    numbers (a step counter) of every module it names, the optimizers' parameters, the state
    of every optimizer the step steps itself (Adam's step count and moments), the
    ``state_dict()`` of a ``GradScaler`` it updates and of a learning-rate scheduler it steps,
    and the ``random``, numpy and torch (CPU and CUDA) generators, and puts back whatever the
    two calls changed (a buffer that took a ``grad_fn`` is detached again), and the items of
    the lists, dicts and deques the step reaches and its closure cells (a recurrent state or a
    memory kept outside modules). What lives elsewhere (an iterator's position) is not
    restored.

    Modules are named from ``modules`` (an ``nn.Module`` or a dict name → module), then from
    what the step refers to: its closure, its bound ``self``, ``functools.partial``
    arguments and the globals its code reads (``q_target.2.bias``). Parameters found only in an
    optimizer are named by position (``opt.param_groups[0][3]``). Toolkit cuts
    (``stop_gradient(x, name=...)``, ``as_constant``) and disabled blocks appear by name in
    every path.

    Args:
        step: zero-argument callable returning a loss tensor or a dict name → loss.
        optimizers: the optimizer of the step's loss; or a dict with the same names as the
            losses. A value may also be one param group of an optimizer, a list of them, an
            ``nn.Module`` or tensors: what that loss is meant to train (one optimizer shared by
            several losses, each with its own param group). Or a zero-argument callable
            returning one of these, called after the step's first call, when only running the
            step tells which optimizer steps which loss (Lightning's manual optimization:
            :mod:`toolkit.integrations.lightning`); tensors found only through it are watched
            from the second call on.
        modules: modules to name first (e.g. ones the step reaches only through other objects).
        restore_state: put module state and random generators back after the two calls.
        allow_pass_through: report tensors the gradient passes through on its way to stepped
            ones (which no cut can spare) as information (the default); ``False`` is the
            strict mode: they count as leaks.
        allow_trained_target: accept a target that carries gradient into the parameters being
            trained (residual-gradient TD, a consistency loss meant to train both sides).

    Audits in several threads run one at a time. A step on the ``meta`` device (no values) is
    refused with a ``ValueError``: the truth is a real backward.

    Returns:
        :class:`StepAudit` with ``ok``, the findings by kind and a readable ``str``.

    >>> import copy, torch
    >>> from torch import nn
    >>> from toolkit import audit_step
    >>> q = nn.Linear(3, 2)
    >>> q_target = copy.deepcopy(q)
    >>> opt = torch.optim.SGD(q.parameters(), lr=0.1)
    >>> s, s2 = torch.ones(4, 3), torch.zeros(4, 3)
    >>> def td_step():   # the target is computed with gradients: a leak into q_target
    ...     return (q(s).max(1).values - 0.9 * q_target(s2).max(1).values).pow(2).mean()
    >>> audit = audit_step(td_step, opt)
    >>> audit.ok, sorted(leak.parameter for leak in audit.leaks)
    (False, ['q_target.bias', 'q_target.weight'])
    >>> print(audit.leaks[0].fix)
    detach the output of q_target (shape (4, 2)) where it is made (behind it: q_target): .detach(), torch.no_grad() or stop_gradient(x, name=...)
    >>> print(audit.leaks[0].lines[0].text)  # the line of td_step where the fix goes
    return (q(s).max(1).values - 0.9 * q_target(s2).max(1).values).pow(2).mean()
    """
    where = "audit_step"
    if not callable(step):
        raise TypeError(f"{where}: step must be a zero-argument callable returning the loss, got "
                        f"{type(step).__name__}")
    for flag, value in (("restore_state", restore_state),
                        ("allow_pass_through", allow_pass_through),
                        ("allow_trained_target", allow_trained_target)):
        if not isinstance(value, bool):
            raise TypeError(f"{where}: {flag} must be a bool, got {type(value).__name__}")
    # the user's frame that called the audit: where the optimizers were built (fixes that are
    # not cuts); let go when the audit returns
    caller = [caller_frame()]
    late = callable(optimizers) and not isinstance(optimizers, nn.Module)
    pairings = {} if late else pairings_of(optimizers, where)
    names = _names(step, modules, where)
    stepped = stepped_of(pairings, names, where)
    _refuse_meta((p for group in stepped.values() for p in group.values()),
                 "the optimizers' tensors are", where)
    watched = {**names.objects, **{i: p for group in stepped.values() for i, p in group.items()}}
    snapshot = (StateSnapshot(names.roots, list(watched.values()), names.tensors)
                if restore_state else None)
    recording = Recording(names, watched, snapshot)
    containers = kept.KeptState(step) if restore_state else None  # lists, dicts, cells
    # called with gradients off (an evaluation loop, torch.inference_mode()): the step runs with
    # them on, as training runs it; the step's own no_grad blocks still switch them off
    grad_off = ("torch.inference_mode()" if torch.is_inference_mode_enabled()
                else "torch.no_grad()" if not torch.is_grad_enabled() else None)
    try:
        with recording, torch.inference_mode(False), torch.enable_grad():
            recording.next_call()
            first = losses_of(_call(step, where), where)
            if late:  # the pairing is known once the step has run (manual optimization)
                pairings = pairings_of(optimizers(), where)
                stepped = stepped_of(pairings, names, where)
                recording.watch([p for group in stepped.values() for p in group.values()])
            first = pair_losses(first, pairings, where)
            recording.next_call()
            losses = pair_losses(losses_of(_call(step, where), where), pairings, where)
        _refuse_meta([*first.values(), *losses.values()], "the step's loss is", where)
        recorded = record_step(losses, pairings, stepped, recording,
                               allow_pass_through=allow_pass_through,
                               allow_trained_target=allow_trained_target)
        recorded.removed = {name: targets.target_edges(graph, set(recorded.stepped[name]))
                            for name, graph in recorded.graphs.items()}
        recorded.prover = Prover(recorded)
        recorded.truth = real_gradients(losses, first, recorded.searches, recorded.stepped)
        recorded.built = functools.cache(lambda opt: built_line(opt, step, caller[0]))
        recorded.namespace = _namespace(step, caller[0])
        recorded.function = function_of(step)
        recorded.step = step
        audit = run_rules(recorded)
    finally:
        caller.clear()
        restored, lost = snapshot.restore() if snapshot is not None else ([], [])
        if containers is not None:
            containers.restore()
    checking = VERIFYING.get()
    if checking is not None:  # an edited step, audited to check an edit: its truth is read
        checking.append(recorded.truth)
    elif restore_state:  # each edit run from the state put back, before it is printed
        audit = verified(audit, step, recorded.rec.names.name, recorded.truth.values,
                         recorded.truth.losses, recorded.stepped, lambda edited: audit_step(
                             edited, optimizers, modules=modules,
                             allow_pass_through=allow_pass_through,
                             allow_trained_target=allow_trained_target))
    if checking is None:
        recorded.truth.values.clear()  # the gradients are let go with the audit
    notes = [*audit.notes]
    if grad_off is not None:
        notes.append(f"audit_step was called inside {grad_off}: the step ran with gradients "
                     f"on, as a training step runs")
    # one note per line: an inner optimizer built anew in each call steps from the same line
    for name, line in dict.fromkeys(recording.optimizer_steps.values()):
        where = "" if line is None else f" (at {line.file}:{line.number})"
        done = ("the audit put back the tensors it stepped, its state and .grad" if restore_state
                else "restore_state=False: the two calls stepped it twice")
        notes.append(f"the step calls {name}.step() itself{where}: the audit reads the graph, "
                     f"not the update; {done}")
    if restored:
        notes.append(f"restored what the two calls changed: {listing(restored, 4)}")
    if lost:
        notes.append(f"could not restore {listing(lost, 4)}: written where the recording "
                     f"does not see it")
    return dataclasses.replace(audit, notes=tuple(notes))


def _namespace(step: Callable[[], Any], caller: Any) -> dict[str, Any]:
    """The names the line that built an optimizer may read: the audit's caller's globals and
    locals, then the step's globals and closure (a step defined next to its optimizer)."""
    fn = function_of(step)
    found: dict[str, Any] = {}
    if caller is not None:
        found.update(caller.f_globals)
        found.update(caller.f_locals)
    code = getattr(fn, "__code__", None)
    if code is not None:
        found.update(getattr(fn, "__globals__", {}))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                found[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
    return found


def _call(step: Callable[[], Any], where: str) -> Any:
    """``step()``; a tensor made inside ``torch.inference_mode()`` that the step differentiates
    through is an error that says so."""
    try:
        return step()
    except RuntimeError as err:
        if "Inference tensors" not in str(err):
            raise
        raise RuntimeError(f"{where}: the step reads a tensor made inside "
                           f"torch.inference_mode(), which autograd cannot record ({err}); make "
                           f"it outside inference_mode (or .clone() it there)") from err


def _names(step: Callable[[], Any], modules: Any, where: str) -> Names:
    """Name the modules given first, then what the step refers to."""
    names = Names()
    if modules is not None:
        if isinstance(modules, nn.Module):
            names.add_module("", modules)
        elif isinstance(modules, Mapping) and all(isinstance(m, nn.Module)
                                                  for m in modules.values()):
            for key, module in modules.items():
                names.add_module(str(key), module)
        else:
            bad = next(((k, m) for k, m in modules.items() if not isinstance(m, nn.Module)),
                       None) if isinstance(modules, Mapping) else None
            got = (f"a dict whose entry {bad[0]!r} is a {type(bad[1]).__name__} (a tensor is "
                   f"named by the module that holds it)" if bad is not None
                   else type(modules).__name__)
            raise TypeError(f"{where}: modules must be an nn.Module or a dict name -> nn.Module, "
                            f"got {got}")
    for path, obj in find_modules(step):
        if isinstance(obj, nn.Module):
            names.add_module(path, obj)
        else:
            names.add_tensor(path, obj)
    return names


def run_rules(recorded: RecordedStep,
              rules: tuple[Callable[[RecordedStep], Found], ...] = RULES) -> StepAudit:
    """Run ``rules`` (every rule of :data:`RULES`) on the recorded step, each finding's wanted
    fix written as edits right after its rule (:func:`_written`); the notes come
    last (they name what the rules found frozen)."""
    found: dict[str, list[Any]] = {}
    for rule in rules:
        for kind, items in rule(recorded).items():  # the fixes a rule wants, written
            found.setdefault(kind, []).extend(_written(recorded, item) for item in items)
    # a loss that reaches none of its optimizer's tensors: its leaks are fixed where the dead
    # finding says (the no_grad block, the detach), not by a cut or another pairing
    for i, leak in enumerate(found.get("leaks", ())):
        if leak.kind == "no_target" and not leak.lines:
            lines = tuple(dict.fromkeys(x for d in found.get("dead", ())
                                        if leak.loss in d.losses for x in d.lines))
            found["leaks"][i] = dataclasses.replace(leak, lines=lines)
    frozen = {f.parameter for f in found.get("frozen", ())}
    notes = [*notes_of(recorded.rec, recorded.searches, recorded.all_stepped, frozen,
                       recorded.twice), *found.pop("notes", ())]
    return StepAudit(losses=tuple(recorded.losses), n_stepped=len(recorded.all_stepped),
                     notes=tuple(notes), **{k: tuple(v) for k, v in found.items()},
                     threads=tuple(dict.fromkeys(t for call in recorded.rec.threads.values()
                                                 for t in call)))


def _written(recorded: RecordedStep, found: Any) -> Any:
    """``found`` as the audit reports it: a :class:`~toolkit.audit.rules.wanted.Wanted`
    finding with the edits the fixes stage writes for its fix (its proof then settled from
    them, unless the rule states one), and for a fix chosen among options
    (:class:`~toolkit.audit.rules.wanted.FirstOf`) or an optimizer's statement moved
    (:class:`~toolkit.audit.rules.wanted.BuildAfter`) the fix text and lines that go with it;
    anything else as it is."""
    if not isinstance(found, Wanted):
        return found
    if isinstance(found.fix, FirstOf):
        options = found.fix.options
        k, lines, edits = first_written([(o.needs, o.places) for o in options],
                                        recorded.namespace)
        chosen = options[k]
        if not chosen.proved:
            lines, edits = (), ()
        elif chosen.lines is not None:
            lines = chosen.lines
        return dataclasses.replace(found.finding, fix=chosen.fix, lines=lines, edits=edits,
                                   proof=chosen.proof)
    if isinstance(found.fix, BuildAfter):
        fix, lines, edits = rebuild_fix(recorded, found.fix.loss, found.fix.owner)
        return dataclasses.replace(found.finding, fix=fix, lines=lines, edits=edits,
                                   proof=found.fix.proof)
    if isinstance(found.fix, CutAt):
        edits = cut_edits(found.fix.terms)
    else:
        edits = leave_out_of_first(found.fix.optimizers, recorded.namespace, found.fix.tensors)
    return dataclasses.replace(found.finding, edits=edits, proof=None)


STOP_CODES.add(id(audit_step.__code__))  # the frames of the user's code end at the step


def assert_clean_step(step: Callable[[], Any], optimizers: Any, **kwargs: Any) -> StepAudit:
    """:func:`audit_step`, raising :class:`~toolkit.lens.GradientLeakError` unless it is clean.

    The error's message is ``str(audit)``; ``err.paths`` maps each leaking tensor to its path
    and ``err.audit`` is the :class:`StepAudit`. Returns the audit when clean. Keyword arguments
    go to :func:`audit_step`. Also available in pytest as the ``clean_step`` fixture; pytest
    shows the report, not this function's frame.

    >>> import torch
    >>> from toolkit import assert_clean_step
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> assert_clean_step(lambda: (w * 2).sum(), torch.optim.SGD([w], lr=0.1)).ok
    True
    """
    __tracebackhide__ = True  # pytest: the failure shows the report, not this frame
    audit = audit_step(step, optimizers, **kwargs)
    if not audit.ok:
        err = GradientLeakError(str(audit), {leak.parameter: list(leak.path)
                                             for leak in audit.leaks})
        err.audit = audit  # type: ignore[attr-defined]
        raise err
    return audit
