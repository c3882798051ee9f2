"""The watch over a running script: the calls it makes, as they happen.

Hooks (installed by :mod:`~toolkit.audit.watch.hooks`) call :meth:`Watch.backward` before
every ``backward()``, :meth:`Watch.step` before every ``optimizer.step()`` and
:meth:`Watch.stepped` after it. An *iteration* ends where the script comes back to a
``backward()`` it already made (the same line, reached through the same calls) after an
optimizer stepped: the loop's body ran once. Gradient accumulation (several ``backward()`` at
one line before a step) stays one iteration.

In an audited iteration the watch reads each backward's graph before it runs and the ``.grad``
it writes, keeps a :class:`~toolkit.audit.watch.ledger.Ledger` of which loss's gradient
each tensor holds, and at each step says, in the order the script made its calls:

- ``leak``/``stale``: a stepped tensor's ``.grad`` holds gradient of a loss paired with another
  step (another optimizer's loss, or an earlier iteration's: no ``zero_grad`` between);
- ``wasted`` (information): gradient written and cleared before any step used it;
- ``cleared``, ``dead``: a stepped tensor with no gradient, because its loss's gradient was
  cleared before the step, or a cut (``.detach()``) or ``no_grad`` kept every loss from it;
- ``carried``: the graph reaches nodes made in the previous iteration (autograd numbers the
  nodes it makes; a node made then is carried, wherever the script kept it);
- ``unstepped``: gradient reaches tensors of a model whose other tensors an optimizer steps,
  and no optimizer steps them (a layer unfrozen after the optimizer was built);
- ``shared``: a tensor two optimizers step.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Sequence
from types import CodeType, FrameType
from typing import TypeVar

import torch
import torch.overrides
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes import script_edits as E
from toolkit.audit.record import syntax as S
from toolkit.audit.result import plural
from toolkit.audit.rules.targets import target_edges
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.audit.watch import kept_in_sync, zeroed
from toolkit.audit.watch.feedback import Feed, fed, feedbacks
from toolkit.audit.watch.frames import Site, is_user, site_of, user_frame
from toolkit.audit.watch.graph import (
    Graph,
    between,
    current_sequence,
    read_graph,
    sequence,
)
from toolkit.audit.watch.kept_in_sync import Constants, KeptInSync, swap_call, toward
from toolkit.audit.watch.ledger import Ledger, Source
from toolkit.audit.watch.tensors import nonzero, storage_of, tensors_in
from toolkit.audit.watch.zeroed import MadeAt, explain, zero_gradients
from toolkit.lens.backward_graph import ShortestPaths

__all__ = ["Stop", "Watch"]

_T = TypeVar("_T")

#: what to do with tensors an optimizer holds for nothing (a target, an EMA copy)
_HELD_FOR_NOTHING = "leave them out of the optimizer, or requires_grad_(False) where they are made"


class Stop(BaseException):
    """Raised into the script at its next ``backward()`` once its audited iterations are done
    (a ``BaseException``, as ``KeyboardInterrupt``: the script's ``except Exception`` does not
    catch it, its ``finally`` blocks run)."""


#: frames a torch function mode adds around a call (:class:`~toolkit.audit.watch.zeroed.MadeAt`,
#: :class:`~toolkit.audit.watch.kept_in_sync.Constants`, while entered): not part of where the
#: script called ``backward()``
_TRANSPARENT = frozenset(os.path.abspath(f) for f in (torch.overrides.__file__, zeroed.__file__,
                                                      kept_in_sync.__file__))


class _StackKeys:
    """Where a ``backward()`` was called, by the whole stack: each frame's code and line,
    flat, the code as a number (equal code objects the same number). Two costs of the plain
    ``(code, line)`` pairs, paid at every ``backward()``, are gone: hashing a code object
    hashes its constants (a module's hold the code of every function in it), and a frame's
    ``f_lineno`` scans its code's line table from the start (~50 us in a 3,000-line module);
    the line is read once per instruction offset (``f_lasti``) of each code."""

    def __init__(self) -> None:
        # id -> (the code, its number, left out?, the user's?, line by offset); the code is
        # held, so that its id stays its own
        self._by_id: dict[int, tuple[CodeType, int, bool, bool, dict[int, int]]] = {}
        self._by_value: dict[CodeType, int] = {}

    def _learn(self, code: CodeType) -> tuple[CodeType, int, bool, bool, dict[int, int]]:
        name = code.co_filename
        entry = self._by_id[id(code)] = (
            code, self._by_value.setdefault(code, len(self._by_value)),
            os.path.abspath(name) in _TRANSPARENT, is_user(name), {})
        return entry

    def __call__(self, frame: FrameType | None) -> tuple[int, ...]:
        """The key of the stack from ``frame`` outwards."""
        key: list[int] = []
        last: CodeType | None = None
        while frame is not None:
            code = frame.f_code
            entry = self._by_id.get(id(code)) or self._learn(code)
            _, number, skip, user, lines = entry
            # a mode's dispatch calls the same function again: its outer frame is left out
            if not skip and not (last is code and not user):
                line = lines.get(frame.f_lasti)
                if line is None:
                    line = lines[frame.f_lasti] = frame.f_lineno
                key.append(number)
                key.append(line)
                last = code
            frame = frame.f_back
        return tuple(key)


def _label(site: Site | None) -> str:
    """``errD_fake`` of ``errD_fake.backward()``: the loss as the user wrote it."""
    if site is None:
        return "a loss"
    found = S.call_at(site.path, site.span)
    if found is not None:
        call, text = found
        if isinstance(call.func, ast.Attribute) and call.func.attr == "backward":
            return f"`{S.segment(text, call.func.value)}`"
        if call.args:
            return f"`{S.segment(text, call.args[0])}`"
    return f"the loss at {site}"


def _bytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _kib(n: int) -> str:
    return f"{n / 1024:.3g} KiB" if n < 2**20 else f"{n / 2**20:.3g} MiB"


class Watch:
    """The state of one watched run (see the module's docstring)."""

    def __init__(self, steps: int = 2, every: int | None = None, record: bool = False,
                 on_finding=None, follow: int = 0) -> None:
        self.steps, self.every, self.record = steps, every, record
        # auditing the first ``steps`` iterations of each loop: how many iterations past the
        # last audited one the script may run on, looking for a later loop, before it stops
        self.follow = follow
        self.last_audited = steps - 1
        self.on_finding = on_finding
        self.pid = os.getpid()
        self.iteration = 0
        self.events = 0                 # backward calls and steps, in order
        self.step_events = 0
        self.backwards = 0
        self.grad_calls = 0
        self._stack_key = _StackKeys()
        self.site_events: dict[tuple, int] = {}
        self.last_step_event = -1
        self.start_seq: dict[int, int] = {}
        self.last_step_seq = 0
        self.ledger = Ledger()
        self.last_step_of: dict[int, int] = {}      # tensor id -> event of its last step
        # every iteration's, audited or not: what happened to .grad while nobody looked
        self.stepped_at: dict[int, int] = {}        # tensor id -> event of its last step
        self.cleared_at: dict[int, int] = {}        # tensor id -> event of its last zero_grad
        self.reached_at: dict[int, int] = {}        # tensor id -> last backward reaching it
        self.stepped_by: dict[int, dict[int, int]] = {}   # tensor id -> optimizer -> event
        self.written_at: dict[int, int] = {}   # tensor id -> the last backward writing its .grad
        self.optimizers: list[torch.optim.Optimizer] = []
        self.built_at: dict[int, Site | None] = {}
        self.findings: dict[tuple, ScriptFinding] = {}
        # every backward() call site seen (by its whole stack), and, watching, the iterations
        # audited because a new one began there (a main loop after a warm-up)
        self.sites_seen: set[tuple] = set()
        # module id -> the name a call used -> (with gradients?, the call's site, iteration)
        self.called_as: dict[int, dict[str, set[tuple[bool, Site, int]]]] = {}
        self.trainable_seen: set[int] = set()   # held with requires_grad at some step
        self.no_grad_out: dict[int, int] = {}   # storage of a no_grad call's output -> module
        self.feeds_trained: set[int] = set()    # modules whose no_grad output a network reads
        self.new_loops: set[int] = set()
        # dead findings wait for the next step: a tensor the script then moved itself (an EMA
        # or momentum copy) is not trained by its optimizer on purpose (see _settle)
        self.pending_dead: list[tuple[ScriptFinding, list[tuple[torch.Tensor, torch.Tensor]]]] = []
        self.hand_updated: set[int] = set()
        self.step_optimizer: dict[int, int] = {}    # step event -> optimizer index
        # tensors no optimizer steps between a loss and stepped ones -> those optimizers
        self.between: dict[int, set[int]] = {}
        self.grads: list[dict] = []     # per step event: {"iteration", "optimizer", "grads"}
        # recorded in audited iterations only
        self.roots: dict[int, tuple[nn.Module, str]] = {}
        self.holders: dict[int, tuple[nn.Module, str]] = {}   # networks the roots are part of
        self.calls: list[tuple[Site, int, bool, set[int]]] = []   # site, arg, is tensor, nodes
        self.call_outputs: list[tuple[object, Site, int]] = []    # output's node, site, event
        # a detach's input node, its site, where its values live, event
        self.detaches: list[tuple[object, Site, int, int]] = []
        # per audited backward: its event and the tensors its graph reaches
        self.reached_by: list[tuple[int, set[int]]] = []
        self.previous_step_event = -1
        # optimizer index -> (the tensors no optimizer holds that the losses of its step
        # reach, the keys of its own tensors, none of which they reach)
        self.misplaced: dict[int, tuple[set[int], tuple[str, ...]]] = {}
        self.trained_reads: dict[int, int] = {}
        self.passed_on: dict[int, set[int]] = {}   # a parameter-free call's output -> inputs
        # tensor id -> its values after its last audited step (what the script did to it
        # before the next step is its own doing)
        self.after_step: dict[int, torch.Tensor] = {}   # storage a network that trains read -> event
        # (module, its call's site, the user's (file, line) from there outwards, the graphs of
        # its inputs, event)
        self.no_grad_calls: list[tuple[nn.Module, Site, list[tuple[str, int]], list, int]] = []
        self.clears: list[tuple[Site, set[int]]] = []
        self.prev_audited = False
        self._cleared_sources: set[Source] = set()
        self.module_hook = None
        # reached with a gradient of exact zeros (see :mod:`~toolkit.audit.watch.zeroed`):
        # each audited backward's stack by its event, the suspects by the backward that
        # reached them, and the lines the next forward's operations run at
        self.backward_keys: dict[int, tuple] = {}
        self.zero_suspects: dict[tuple, dict[int, tuple[str, torch.Tensor]]] = {}
        self.made_at: MadeAt | None = None
        self.zero_judged: set[int] = set()
        # a prediction fed back (see :mod:`~toolkit.audit.watch.feedback`): each call output's
        # node -> (node, its module, the call's order, event), and the outputs calls read
        self.made_by: dict[int, tuple[object, int, int, int]] = {}
        self.feeds: list[tuple[Feed, int]] = []
        self.call_order = 0
        # a copy kept in sync and never read (see :mod:`~toolkit.audit.watch.kept_in_sync`):
        # the networks the script's namespaces hold, the constants no_grad calls make, and
        # the no_grad calls (module id, site) whose constants a loss's graph meets
        self.sync = KeptInSync()
        # on the mode stack where it is now: the modes the script enters nest inside it
        self.constants = Constants(torch._C._len_torch_function_stack())
        # (the first iteration and step event at which each was seen)
        self.fed_constants: dict[tuple, tuple[int, int]] = {}
        # what the user's source says at a site, read once per run (``ast``'s segment splits
        # the whole file again at every call), and the tensors' names while no script code
        # ran (see :meth:`_names`)
        self._said: dict[tuple, object] = {}
        self._names_now: dict[int, str] | None = None

    def here(self) -> bool:
        """Whether this is the process the watch began in (not a child the script forked)."""
        return os.getpid() == self.pid

    def _once(self, key: tuple, make: Callable[[], _T]) -> _T:
        """``make()``, computed once in this run for ``key`` (what the user's source says at a
        site: the files do not change while the script runs)."""
        try:
            return self._said[key]  # type: ignore[return-value]
        except KeyError:
            value = self._said[key] = make()
            return value

    def _loss_label(self, site: Site | None) -> str:
        """:func:`_label`, once per site."""
        return self._once(("label", site), lambda: _label(site))

    # --- which iterations ---------------------------------------------------------------
    def audited(self, iteration: int | None = None) -> bool:
        i = self.iteration if iteration is None else iteration
        if self.every is None:
            return i < self.steps or i in self.new_loops
        return i % self.every == 0 or i in self.new_loops

    def recording(self) -> bool:
        """Whether calls are recorded now: in an audited iteration, or in the one before it
        (what an iteration does before its first ``backward()`` counts as its own)."""
        return self.audited() or self.audited(self.iteration + 1)

    def done(self) -> bool:
        return self.every is None and self.iteration > self.last_audited + self.follow

    def _new_iteration(self) -> None:
        if self.audited():
            self._end_of_iteration()
        self.prev_audited = self.audited()
        self.iteration += 1
        self.site_events = {}
        self.start_seq[self.iteration] = self.last_step_seq
        # what the new iteration did before its first backward() was recorded after the last
        # step (each record filtered only when it holds any: in an iteration not recorded,
        # none does)
        keep = self.last_step_event
        if self.calls:
            self.calls = [c for c in self.calls if c[-1] >= keep]
        if self.call_outputs:
            self.call_outputs = [c for c in self.call_outputs if c[-1] >= keep]
        if self.made_by:
            self.made_by = {k: v for k, v in self.made_by.items() if v[-1] >= keep}
        if self.feeds:
            self.feeds = [f for f in self.feeds if f[-1] >= keep]
        if self.detaches:
            self.detaches = [d for d in self.detaches if d[-1] >= keep]
        if self.no_grad_calls:
            self.no_grad_calls = [c for c in self.no_grad_calls if c[-1] >= keep]
        if self.clears:
            self.clears = [c for c in self.clears if c[-1] >= keep]
        if self.trained_reads:
            self.trained_reads = {k: e for k, e in self.trained_reads.items() if e >= keep}
        if self.reached_by:
            self.reached_by = [r for r in self.reached_by if r[0] >= keep]
        if self.passed_on:
            self.passed_on = {}
        if not self.prev_audited and self.audited():
            self.ledger = Ledger()   # what happened unwatched is one unknown source
        self._want_module_hook()

    def _want_module_hook(self) -> None:
        want = not self.done() and self.recording()
        if want and self.module_hook is None:
            self.module_hook = nn.modules.module.register_module_forward_hook(self.module_called)
        elif not want and self.module_hook is not None:
            self.module_hook.remove()
            self.module_hook = None

    def close(self) -> None:
        """The script ended (or was stopped): the rules of the iteration it was in."""
        self._names_now = None
        if self.module_hook is not None:
            self.module_hook.remove()
            self.module_hook = None
        self._stop_lines()
        self.constants.clear()
        if self.audited() and self.step_events:
            self._end_of_iteration()
        self._settle(final=True)
        if self.step_events:
            self._snapshot()
            self._kept_in_sync()

    # --- the hooks ----------------------------------------------------------------------
    def optimizer_built(self, opt: torch.optim.Optimizer) -> None:
        self.optimizers.append(opt)
        frame = user_frame(2)
        self.built_at[id(opt)] = site_of(frame) if frame is not None else None

    def _index(self, opt: torch.optim.Optimizer) -> int:
        for i, o in enumerate(self.optimizers):
            if o is opt:
                return i
        self.optimizers.append(opt)
        self.built_at[id(opt)] = None
        return len(self.optimizers) - 1

    def module_called(self, module: nn.Module, args: tuple, output: object) -> None:
        if not self.recording() or not self.here():
            return
        frame = sys._getframe(1)
        # only calls made by the user's code itself: the caller is a user frame
        while frame is not None and frame.f_code.co_name in ("inner", "_call_impl",
                                                                  "_wrapped_call_impl"):
            frame = frame.f_back
        if frame is None:
            return
        caller = user_frame(1)
        if caller is not frame:
            return
        site = site_of(frame)
        outs = tensors_in(output)
        self.sync.saw(frame)
        if not torch.is_grad_enabled() and outs:
            self.constants.made(outs, (id(module), site))
            inputs = [t.grad_fn for a in args for t in tensors_in(a) if t.grad_fn is not None]
            self.no_grad_calls.append((module, site, _user_lines(frame), inputs,
                                       self.events))
            for t in outs:
                self.no_grad_out[storage_of(t)] = id(module)
        elif not isinstance(module, nn.modules.loss._Loss) and any(
                p.requires_grad for p in module.parameters(recurse=False)):
            # a network that trains reads what a no_grad call made: that call is on the path
            # of the prediction (a backbone under a head), not a target's
            for a in args:
                for t in tensors_in(a):
                    made = self.no_grad_out.get(storage_of(t))
                    if made is not None:
                        self.feeds_trained.add(made)
                    # or a value computed from it without a graph (a clone of an
                    # inference-mode output, a crop of the features)
                    for key in self.constants.sources.get(storage_of(t), ()):
                        self.feeds_trained.add(key[0])
        if torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters()):
            # what a network that trains reads (a detached value it reads is no target),
            # through the modules with no parameters on the way (a dropout, an activation)
            todo = [storage_of(t) for a in args for t in tensors_in(a)]
            while todo:
                key = todo.pop()
                if key not in self.trained_reads:
                    self.trained_reads[key] = self.events
                    todo.extend(self.passed_on.get(key, ()))
        elif torch.is_grad_enabled() and next(module.parameters(), None) is None:
            for t in outs:
                self.passed_on.setdefault(storage_of(t), set()).update(
                    storage_of(x) for a in args for x in tensors_in(a))
        if outs and 0 not in self.start_seq and any(t.grad_fn is not None for t in outs):
            self.start_seq[0] = min(sequence(t.grad_fn) for t in outs if t.grad_fn is not None)
        found = S.call_at(site.path, site.span)
        spelled = self._once(("called", site), lambda: S.segment(found[1], found[0].func)
                             if found else None)
        called = spelled if spelled is not None else type(module).__name__
        if id(module) not in self.roots:
            self.roots[id(module)] = (module, called)
            self._names_now = None
            if found is not None:
                self._holder(found[0].func, found[1], frame, module)
        # each name the user's code calls this network by, with or without gradients
        self.called_as.setdefault(id(module), {}).setdefault(called, set()).add(
            (torch.is_grad_enabled(), site, self.iteration))
        for t in outs:
            if t.grad_fn is not None:
                self.call_outputs.append((t.grad_fn, site, self.events))
        if torch.is_grad_enabled():
            self._feeds(module, args, outs, frame)
        for i, arg in enumerate(args):
            ts = tensors_in(arg)
            nodes = {id(t.grad_fn) for t in ts if t.grad_fn is not None}
            if nodes:
                self.calls.append((site, i, isinstance(arg, torch.Tensor), nodes, self.events))

    def _feeds(self, module: nn.Module, args: tuple, outs: list[torch.Tensor],
               frame: FrameType) -> None:
        """Each argument that is an earlier call's output (a feed, with the binding that
        passed it on), then this call's outputs by their node."""
        self.call_order += 1
        for t in (t for a in args for t in tensors_in(a)):
            made = self.made_by.get(id(t.grad_fn)) if t.grad_fn is not None else None
            if made is None or made[0] is not t.grad_fn or made[1] == id(module) or any(
                    f.node is t.grad_fn for f, _ in self.feeds):
                continue
            name, site, edit = fed(t, frame)
            self.feeds.append((Feed(t.grad_fn, t.output_nr, made[1], made[2], name, site, edit),
                               self.events))
        for t in outs:
            if t.grad_fn is not None and id(t.grad_fn) not in self.made_by:
                self.made_by[id(t.grad_fn)] = (t.grad_fn, id(module), self.call_order,
                                               self.events)

    def _fed_back(self, roots: Sequence[torch.Tensor], site: Site | None) -> None:
        """A prediction fed back: an output the loss compares, read by a later call of the
        network that made it without a cut (:func:`~toolkit.audit.watch.feedback.feedbacks`).
        The edit cuts it where the script passes it on."""
        outputs = {k: v[:3] for k, v in self.made_by.items()}
        for feed in feedbacks([t.grad_fn for t in roots], [f for f, _ in self.feeds], outputs):
            if feed.site is None:
                continue
            # the network it is part of, as the script calls it (the decoder, not its layer)
            maker = next((r for r in self._roots() if feed.maker in
                          {id(m) for m in r[0].modules()}), None)
            what = f"`{feed.name}`" if feed.name else "a prediction"
            self._add(ScriptFinding(
                "carried", self.iteration,
                f"{what}, an output of {maker[1] if maker else 'a network'} that "
                f"{self._loss_label(site)} (backward at {site}) compares with its target, is "
                f"fed back as the input of its next call without a cut: the loss of each later "
                f"prediction is also differentiated through every earlier one",
                (), (), (feed.site.shown(),) + ((site.shown(),) if site else ()),
                (feed.edit,) if feed.edit is not None else (),
                advice="cut the prediction where it is fed back (.detach()): the next step "
                       "reads its value, not its graph", step=self.step_events,
                concerned=("*",)))

    def detached(self, tensor: torch.Tensor) -> None:
        if tensor.grad_fn is None or not self.recording():
            return
        frame = user_frame(2)
        if frame is not None:
            self.detaches.append((tensor.grad_fn, site_of(frame), storage_of(tensor),
                                  self.events))

    def zero_grad(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            self.cleared_at[id(t)] = self.events
        if not self.recording():
            return
        frame = user_frame(2)
        if frame is not None:
            self.clears.append((site_of(frame), {id(t) for t in tensors}, self.events))

    def grad_called(self) -> None:
        self.grad_calls += 1

    def backward(self, tensors: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor] | None):
        """Before a ``backward()``: the iteration's bookkeeping, the stop, the graph read.
        Returns what :meth:`after_backward` needs, or ``None`` when not audited."""
        self._names_now = None
        frame = sys._getframe(2)
        key = self._stack_key(frame)
        last = self.site_events.get(key)
        # the loop's body ran once: back at a backward() after a step, or, in a script that
        # steps no torch optimizer (weights updated by hand), back at the same backward()
        if last is not None and (last < self.last_step_event or not self.optimizers):
            self._new_iteration()
        if self.done():
            raise Stop
        if key not in self.sites_seen:
            self.sites_seen.add(key)
            if self.iteration > 0:
                # a new loop (a main loop after a warm-up): its first whole iterations are
                # audited, one when watching, else as many as the first loop's
                first = self.iteration + 1
                self.new_loops.update(range(first, first + (1 if self.every else self.steps)))
                self.last_audited = max(self.last_audited, max(self.new_loops))
                self._want_module_hook()
        self.events += 1
        self.site_events[key] = self.events
        self.backwards += 1
        if not self.audited():
            return None
        self.backward_keys[self.events] = key
        caller = user_frame(2)
        site = site_of(caller) if caller is not None else None
        if key in self.zero_suspects and self.made_at is not None:
            # explained: the lines stop being kept at the next step (not here: this call
            # runs inside the mode's own dispatch of backward())
            self._zeroed(tensors, site, self.zero_suspects.pop(key))
        graph = read_graph(t.grad_fn for t in tensors)
        for key in self.constants.fed(graph.nodes):
            self.fed_constants.setdefault(key, (self.iteration, self.step_events))
        self._carried(graph, site)
        self._fed_back(tensors, site)
        held = self._stepped_map()
        self._targets(tensors, site, held)
        for key, optimizers in between(graph, held).items():
            self.between.setdefault(key, set()).update(optimizers)
        leaves = graph.leaves
        if inputs is not None:
            wanted = {id(t) for t in inputs}
            leaves = {k: v for k, v in leaves.items() if k in wanted}
        leaves = {k: v for k, v in leaves.items() if v.requires_grad}
        for k in leaves:
            self.reached_at[k] = self.events
        for t in leaves.values():
            self.ledger.observe(t, self.iteration, self.last_step_of, self.stepped_at,
                                self.cleared_at)
        self.reached_by.append((self.events, set(leaves)))
        source = Source(self.events, site, self._loss_label(site), self.iteration)
        return source, leaves, self.ledger.snapshot(leaves)

    def after_backward(self, state) -> None:
        source, leaves, before = state
        self.ledger.record(source, leaves, before)
        for key in source.wrote:
            self.written_at[key] = source.index

    # --- at a step ----------------------------------------------------------------------
    def step(self, opt: torch.optim.Optimizer) -> None:
        self._names_now = None
        index = self._index(opt)
        self.events += 1
        event = self.events
        self.step_events += 1
        if not self.zero_suspects and self.made_at is not None:
            self._stop_lines()
        self.previous_step_event = self.last_step_event
        self.last_step_event = event
        self.step_optimizer[event] = index
        if self.pending_dead:
            self._settle()
        self.constants.clear()
        if self.recording() and not self.done():
            self._snapshot()
        if not self.audited():
            for group in opt.param_groups:
                for p in group["params"]:
                    self.stepped_at[id(p)] = event
                    if p.requires_grad:
                        self.trainable_seen.add(id(p))
            return
        frame = user_frame(2)
        site = site_of(frame) if frame is not None else None
        stepped = [(k, p) for k, p in _keyed(index, opt) if p.requires_grad]
        for _, p in stepped:
            self.ledger.observe(p, self.iteration, self.last_step_of, self.stepped_at,
                                self.cleared_at)
        if self.record:
            self.grads.append({"iteration": self.iteration, "optimizer": index,
                               "event": self.step_events - 1,
                               "grads": {k: (p.grad.detach().clone() if p.grad is not None
                                             else None) for k, p in stepped}})
        self._followers(index, stepped)
        self._frozen(index, opt, site)
        self.trainable_seen.update(id(p) for _, p in stepped)
        self._shared(index, opt, stepped)
        self._leaks(index, event, site, stepped)
        self._dead(index, event, site, stepped)
        self._suspect_zeros(stepped)
        for _, p in stepped:
            self.last_step_of[id(p)] = self.stepped_at[id(p)] = event
            self.ledger.stepped(id(p))
        self._wasted()

    def stepped(self, opt: torch.optim.Optimizer) -> None:
        if self.audited() or self.audited(self.iteration + 1):
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.requires_grad:
                        self.after_step[id(p)] = p.detach().clone()
        # where iterations begin, in autograd's numbering: needed by the carried rule of the
        # next two iterations only
        if self.audited(self.iteration + 1) or self.audited(self.iteration + 2):
            self.last_step_seq = current_sequence()
        self._want_module_hook()
        if self.zero_suspects and self.made_at is None and not self.done() and (
                self.audited() or self.audited(self.iteration + 1)):
            self.made_at = MadeAt()
            self.made_at.__enter__()

    def _stop_lines(self) -> None:
        if self.made_at is not None:
            made, self.made_at = self.made_at, None
            made.__exit__(None, None, None)

    # --- the rules ------------------------------------------------------------------------
    def _roots(self) -> list[tuple[nn.Module, str]]:
        """The modules the user's code called, largest first."""
        order = list(self.roots.values())   # an outer call returns after the calls inside it
        return sorted(order, key=lambda r: (-sum(1 for _ in r[0].parameters()),
                                            -order.index(r)))

    def _holder(self, func: ast.expr, text: str, frame: FrameType, module: nn.Module) -> None:
        """The network a call's module is part of, as the script names it (``model`` of
        ``model[0](x)``, ``self.net`` of ``self.net.fc(h)``): its tensors are named from it."""
        base = func
        while isinstance(base, ast.Subscript | ast.Attribute):
            base = base.value
            if base is func or not isinstance(base, ast.Name | ast.Attribute):
                continue
            name = S.segment(text, base)
            head, _, rest = name.partition(".")
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] == head:
                return   # a method's receiver: the name its caller holds it by is elsewhere
            value = frame.f_locals.get(head, frame.f_globals.get(head))
            for part in rest.split(".") if rest else ():
                value = getattr(value, part, None)
            if isinstance(value, nn.Module) and value is not module and any(
                    m is module for m in value.modules()):
                if id(value) not in self.holders:
                    self.holders[id(value)] = (value, name)
                    self._names_now = None

    def _names(self) -> dict[int, str]:
        """Each tensor of the networks the script calls, by ``id``, named from the largest
        (``model.0.weight``). Kept until script code runs again (the hooks forget it when
        called): the rules of one step or backward() read it once. Read only."""
        if self._names_now is not None:
            return self._names_now
        names: dict[int, str] = {}
        holders = [h for k, h in self.holders.items() if k not in self.roots]
        order = sorted(holders + self._roots(), key=lambda r: -sum(1 for _ in r[0].parameters()))
        for module, root in order:
            for n, p in module.named_parameters():
                names.setdefault(id(p), f"{root}.{n}")
        self._names_now = names
        return names

    def _owner(self, key: int) -> nn.Module | None:
        for module, _ in self._roots():
            if any(id(p) == key for p in module.parameters()):
                return module
        return None

    def _add(self, finding: ScriptFinding) -> None:
        if finding.key in self.findings:
            return
        self.findings[finding.key] = finding
        if self.on_finding is not None:
            self.on_finding(finding)

    def _optimizer_text(self, index: int, site: Site | None) -> str | None:
        text = self._once(("receiver", site), lambda: S.receiver(site.path, site.span)
                          if site is not None else None)
        return f"`{text}`" if text else None

    def _leaks(self, index: int, event: int, site: Site | None, stepped) -> None:
        names = self._names()
        foreign: dict[Source, list[tuple[str, torch.Tensor]]] = {}
        own: list[Source] = []
        for key, p in stepped:
            for src in self.ledger.live.get(id(p), []):
                if src.step is None:
                    src.step = event
                if src.step == event:
                    if src not in own:
                        own.append(src)
                else:
                    foreign.setdefault(src, []).append((key, p))
        if not own:
            # one loss of this iteration whose gradient another optimizer stepped first, and
            # nothing else in .grad: the loss trains both (an encoder and a decoder, each with
            # its optimizer); a leak mixes another loss's gradient into a step's own
            foreign = {src: hit for src, hit in foreign.items()
                       if not (src.index >= 0 and src.iteration == self.iteration
                               and self.step_optimizer.get(src.step) != index)}
        opt_text = self._optimizer_text(index, site)
        first_own = min(own, key=lambda s: s.index) if own else None
        for src, hit in foreign.items():
            kind = "leak" if src.iteration == self.iteration and src.index >= 0 else "stale"
            what = (f"the gradient of {src.label} (backward at {src.site}) is in .grad of "
                    f"{len(hit)} tensors when {opt_text or 'the optimizer'} steps"
                    if kind == "leak" else
                    f"{len(hit)} tensors still hold gradient of an earlier iteration "
                    f"({src.label if src.index >= 0 else 'no zero_grad() cleared it'}) when "
                    f"{opt_text or 'the optimizer'} steps: it is added to this step's")
            at = tuple(s.shown() for s in (src.site, site) if s is not None)
            edits: tuple = ()
            if opt_text and first_own is not None and first_own.site is not None:
                e = E.insert_before(first_own.site.path, first_own.site.line,
                                    f"{opt_text.strip('`')}.zero_grad()")
                edits = (e,) if e is not None else ()
            self._add(ScriptFinding(
                kind, self.iteration, what + " (it changes the update)",
                tuple(k for k, _ in hit), tuple(names.get(id(p), k) for k, p in hit), at,
                edits, advice=f"call {(opt_text or 'the optimizer').strip('`')}.zero_grad() before this "
                              f"step's own backward()", step=self.step_events - 1,
                concerned=tuple(k for k, _ in hit), cost_bytes=_bytes([p for _, p in hit])))

    def _dead(self, index: int, event: int, site: Site | None, stepped) -> None:
        names = self._names()
        # a tensor a backward's graph reached, with a gradient of exactly zero (a recurrent
        # weight read against a zero first state), is not dead: only one no graph reached
        dead = [(k, p) for k, p in stepped if not self.ledger.live.get(id(p))
                and (self.reached_at.get(id(p), -1) <= self.last_step_of.get(id(p), -1)
                     or self.ledger.cleared.get(id(p)))]
        if not dead:
            return
        misplaced = self._misplaced(index, stepped, dead)
        read = self._read_by_training()
        targets = [(k, p) for k, p in dead if self._target_only(p, read)]
        if targets:
            dead = [(k, p) for k, p in dead if not any(p is q for _, q in targets)]
            self._add(ScriptFinding(
                "hand_updated", self.iteration,
                f"{plural(len(targets), 'tensor')} an optimizer steps get no gradient: they "
                f"compute a target cut off from the loss (under no_grad, or .detach()-ed), "
                f"whose output meets the prediction only in the loss (a teacher, a key "
                f"encoder): the optimizer does nothing with them",
                tuple(k for k, _ in targets), tuple(names.get(id(p), k) for k, p in targets),
                (site.shown(),) if site is not None else (),
                advice=_HELD_FOR_NOTHING, step=self.step_events - 1))
        if not dead:
            return
        groups: dict[tuple, list[tuple[str, torch.Tensor]]] = {}
        info: dict[tuple, tuple] = {}
        for key, p in dead:
            cleared = [s for s in self.ledger.cleared.get(id(p), []) if s.step is None
                       and s.index > self.last_step_of.get(id(p), -1)]
            if cleared:
                src = cleared[-1]
                clear = next((c for c in reversed(self.clears) if id(p) in c[1]), None)
                g = ("cleared", src.site, clear[0] if clear else None)
                info[g] = (src, clear)
            else:
                cut = self._cut_of(p)
                g = ("dead", cut, None)
            groups.setdefault(g, []).append((key, p))
        # tensors with no cut of their own, in a step where one edited cut starves others:
        # that cut is the likeliest (its input read under no_grad, not by a module), and the
        # edit's rerun proves it, or rejects it for a tensor that still gets nothing
        cut_groups = [g for g in groups if g[0] == "dead" and g[1] is not None and g[1][2]]
        if len(cut_groups) == 1:
            for g in [g for g in groups if g[0] == "dead" and g[1] is None]:
                groups[cut_groups[0]] = groups.pop(g) + groups[cut_groups[0]]
        for g, hit in groups.items():
            keys = tuple(k for k, _ in hit)
            shown = tuple(names.get(id(p), k) for k, p in hit)
            if g[0] == "cleared":
                src, clear = info[g]
                self._cleared_sources.add(src)
                clear_site = clear[0] if clear else None
                at = tuple(s.shown() for s in (src.site, clear_site, site) if s is not None)
                edits: tuple = ()
                if clear_site is not None and src.site is not None and \
                        clear_site.path == src.site.path:
                    edits = tuple(E.move_before(clear_site.path, clear_site.line,
                                                src.site.line))
                self._add(ScriptFinding(
                    "cleared", self.iteration,
                    f"{self._optimizer_text(index, site) or 'the optimizer'} steps {len(hit)} "
                    f"tensors with no gradient: the gradient of {src.label} (backward at "
                    f"{src.site}) was cleared"
                    + (f" by {clear_site.text()} at {clear_site}" if clear_site else "")
                    + " before the step", keys, shown, at, edits,
                    advice="clear gradients before backward(), not between backward() and "
                           "step()", step=self.step_events - 1, concerned=keys))
                continue
            _kind, cut = g[0], g[1]
            if cut is not None:
                cut_site, cut_what, edit = cut
                self._add_dead(hit, ScriptFinding(
                    "dead", self.iteration,
                    f"no loss reaches {len(hit)} tensors "
                    f"{self._optimizer_text(index, site) or 'the optimizer'} steps: {cut_what} "
                    f"at {cut_site} cuts them off", keys, shown,
                    (cut_site.shown(),) + ((site.shown(),) if site else ()), edit,
                    advice=f"remove the cut at {cut_site} if these tensors are meant to train "
                           f"from this loss", step=self.step_events - 1,
                    concerned=tuple(self._reached_keys(cut_site, stepped)) or keys,
                    extra={"misplaced": index} if misplaced else {}))
            else:
                self._add_dead(hit, ScriptFinding(
                    "dead", self.iteration,
                    f"no loss reaches {len(hit)} tensors "
                    f"{self._optimizer_text(index, site) or 'the optimizer'} steps "
                    f"(none of this iteration's backward() calls gave them a gradient)",
                    keys, shown, (site.shown(),) if site else (), (),
                    advice="use them in a loss, or leave them out of the optimizer if they "
                           "are meant to stay as they are", step=self.step_events - 1,
                    concerned=keys, extra={"misplaced": index} if misplaced else {}))

    def _suspect_zeros(self, stepped) -> None:
        """Stepped tensors this iteration's losses reached whose ``.grad`` is exactly zero:
        suspects, by the backward() that reached them, explained at its next audited call
        (:meth:`_zeroed`)."""
        since = {k: [e for e, leaves in self.reached_by
                     if id(p) in leaves and e > self.last_step_of.get(id(p), -1)]
                 for k, p in stepped}
        reached = [(k, p) for k, p in stepped if since[k] and id(p) not in self.zero_judged]
        for (k, p), zero in zip(reached, zero_gradients([p for _, p in reached])):
            if not zero:
                continue
            for event in since[k]:
                stack = self.backward_keys.get(event)
                if stack is not None:
                    self.zero_suspects.setdefault(stack, {})[id(p)] = (k, p)

    def _zeroed(self, roots: Sequence[torch.Tensor], site: Site | None,
                suspects: dict[int, tuple[str, torch.Tensor]]) -> None:
        """Dead in effect: tensors this backward() reached again with a gradient of exact
        zeros, because the gradients reaching them cancel or an operation on the way passes
        zero for any values; the edit passes the gradient straight through at the line that
        made the operation (:func:`~toolkit.audit.watch.zeroed.explain`)."""
        self.zero_judged.update(suspects)
        if self.made_at is None or len(roots) != 1 or roots[0].numel() != 1 or \
                roots[0].grad_fn is None:
            return
        try:
            found = explain(roots[0], {i: p for i, (_, p) in suspects.items()}, self.made_at)
        except RuntimeError:
            return
        names = self._names()
        for z in found:
            keys = tuple(suspects[i][0] for i in z.tensors)
            shown = tuple(names.get(i, suspects[i][0]) for i in z.tensors)
            at = tuple(s.shown() for s in (z.site, site) if s is not None)
            self._add(ScriptFinding(
                "dead", self.iteration,
                f"{self._loss_label(site)} (backward at {site}) reaches "
                f"{plural(len(keys), 'tensor')} an optimizer steps with a gradient of exact zeros: "
                + (f"at {z.site}, " if z.site is not None else "") + z.what,
                keys, shown, at, z.edits,
                advice="pass the gradient straight through where the value is made (a "
                       "straight-through estimator: x + (q(x) - x).detach(), the same values "
                       "forward, x's gradient back)", step=self.step_events, concerned=keys))

    def _misplaced(self, index: int, stepped, dead) -> bool:
        """Optimizer membership by role: the losses of this step (the backward() calls since
        the step before it) reach none of the tensors the optimizer holds, and reach tensors
        no optimizer holds (``optimizer_D`` built over the encoder, a line copied from the one
        above, while its loss trains the discriminator). Its argument is the wrong network:
        kept for the rule of tensors no optimizer steps (:meth:`_end_of_iteration`), whose
        edit replaces it."""
        if len(dead) != len(stepped):
            return False
        reached = set().union(*(r for e, r in self.reached_by
                                if e > self.previous_step_event)) - set(self._stepped_map())
        if not reached:
            return False
        self.misplaced[index] = (reached, tuple(k for k, _ in dead))
        return True

    def _read_by_training(self) -> set[str]:
        """The names the calls of networks that train read as arguments, with gradients on,
        at the user's lines."""
        read: set[str] = set()
        for key, by_name in self.called_as.items():
            module = self.roots[key][0]
            if any(q.requires_grad for q in module.parameters()):
                read |= {n for uses in by_name.values() for g, site, _ in uses if g
                         for n in S.argument_names(site.path, site.span)}
        return read

    def _target_only(self, p: torch.Tensor, read: set[str]) -> bool:
        """Whether every call under no_grad that reads ``p`` made a value that no network
        that trains reads (a target: it meets the prediction only in the loss), and there was
        one. What a ``with torch.no_grad():`` block assigns is matched to ``read`` (see
        :meth:`_read_by_training`); a value a network reads as it is (a view of the output)
        is matched by its storage."""
        calls = [(m, lines) for m, _, lines, _, _ in self.no_grad_calls
                 if any(q is p for q in m.parameters())]
        if not calls:
            return self._target_cut(p, read)
        if any(id(m) in self.feeds_trained for m, _ in calls):
            return False
        for _, lines in calls:
            made = next((names for path, line in lines
                         if (names := S.no_grad_block_names(path, line)) is not None), None)
            if made and made & read:
                return False
        return True

    def _target_cut(self, p: torch.Tensor, read: set[str]) -> bool:
        """Whether every ``.detach()`` whose input reaches ``p`` made a value that no network
        that trains reads, and there was one: the cut of a target, as a call under no_grad
        (see :meth:`_target_only`). The value is matched by its storage (read as it is, a
        backbone's features under a head) and by the names the detach's statement assigns."""
        cuts = [(site, storage, read_graph([node]).leaves) for node, site, storage, _
                in self.detaches]
        cuts = [(site, storage, leaves) for site, storage, leaves in cuts if id(p) in leaves]
        if not cuts:
            return False
        for site, storage, leaves in cuts:
            # a cut of a network some of whose tensors a loss trains (a value head on a shared
            # trunk) is on the prediction's side, not a separate target's
            if any(self.ledger.live.get(k) for k in leaves):
                return False
            if storage in self.trained_reads:
                return False
            if S.assigned_names(site.path, site.line) & read:
                return False
        return True

    def _add_dead(self, hit: list[tuple[str, torch.Tensor]], finding: ScriptFinding) -> None:
        """A dead finding, judged at the next step (or the end): see :meth:`_settle`."""
        if finding.key in self.findings:
            return
        self.pending_dead.append((finding, [(p, p.detach().clone()) for _, p in hit]))

    def _settle(self, final: bool = False) -> None:
        """The dead findings waiting since an earlier step: a tensor whose values changed
        though no gradient reached it was moved by the script itself (an EMA or momentum
        copy, a target network synced by hand): its optimizer holds it for nothing, which is
        information; the others are failures. At the end, a tensor seen moved before counts
        as moved."""
        if not self.pending_dead:
            return
        waiting = []
        for finding, values in self.pending_dead:
            moved = [id(p) for p, old in values
                     if p.shape != old.shape or not torch.equal(p.detach(), old)]
            self.hand_updated.update(moved)
            if not moved and not final and finding.iteration == self.iteration:
                waiting.append((finding, values))   # its own iteration's step: wait
                continue
            if moved or all(id(p) in self.hand_updated for p, _ in values):
                finding = ScriptFinding(
                    "hand_updated", finding.iteration,
                    f"{len(values)} tensors an optimizer steps get no gradient and the script "
                    f"moves them itself (an EMA or momentum copy): the optimizer does nothing "
                    f"with them", finding.tensors, finding.names, finding.at,
                    advice=_HELD_FOR_NOTHING, step=finding.step)
            self._add(finding)
        self.pending_dead = waiting

    def _cut_of(self, p: torch.Tensor):
        """The user's ``.detach()`` (or ``no_grad`` module call) that keeps ``p`` from the
        losses: a detach whose input's graph reaches ``p``."""
        for node, site, _, _ in reversed(self.detaches):
            graph: Graph = read_graph([node])
            if id(p) in graph.leaves:
                edit = E.remove_detach(site.path, site.span)
                self._reach_cache = (site, set(graph.leaves))
                return site, "`.detach()`", (edit,) if edit is not None else ()
        # the last call under no_grad that reads p, itself or through its inputs' graph: the
        # one whose output the loss reads
        for module, site, lines, inputs, _ in reversed(self.no_grad_calls):
            if any(q is p for q in module.parameters()) or (
                    inputs and id(p) in read_graph(inputs).leaves):
                for path, line in lines:
                    moved = E.out_of_no_grad(path, line)
                    if moved is not None:
                        at, edits = moved
                        cut = S.cutting_call(path, line) or "torch.no_grad()"
                        return (Site(path, at, None),
                                f"`{S.statement_text(path, at)}` under `with {cut}`",
                                tuple(edits))
                return site, f"a call of {type(module).__name__} under no_grad", ()
        return None

    def _reached_keys(self, cut_site: Site, stepped) -> list[str]:
        cache = getattr(self, "_reach_cache", None)
        if cache is None or cache[0] != cut_site:
            return []
        return [k for k, p in stepped if id(p) in cache[1]]

    def _carried(self, graph: Graph, site: Site | None) -> None:
        i = self.iteration
        if i < 1 or (i - 1) not in self.start_seq or i not in self.start_seq:
            return
        lo, hi = self.start_seq[i - 1], self.start_seq[i]
        old = [n for n in graph.nodes.values()
               if getattr(n, "variable", None) is None and lo <= sequence(n) < hi]
        if not old:
            return
        old_ids = {id(n) for n in old}
        entry = [(s, a, t) for s, a, t, nodes, _ in self.calls if nodes & old_ids]
        at: tuple[str, ...] = ()
        edits: tuple = ()
        if entry:
            s, a, is_tensor = entry[-1]   # the outermost call: hooks see inner ones first
            at = (s.shown(),)
            edits = tuple(E.cut_argument(s.path, s.span, a, is_tensor))
        self._add(ScriptFinding(
            "carried", i,
            f"the graph of {self._loss_label(site)} (backward at {site}) reaches {len(old)} nodes "
            f"made by the previous iteration: it grows every iteration, or the next backward() "
            f"fails 'a second time'", (), (), at + ((site.shown(),) if site else ()), edits,
            advice="cut the state kept between iterations where the next iteration reads it",
            step=self.step_events, concerned=("*",)))

    def _shared(self, index: int, opt: torch.optim.Optimizer, stepped) -> None:
        """A tensor another optimizer stepped with the gradient it holds now (no backward()
        wrote it since): the one gradient moves it twice. Two optimizers over it in two phases
        of the script (pre-training, then fine-tuning), each after its own backward(), are no
        finding."""
        for key, p in stepped:
            by = self.stepped_by.setdefault(id(p), {})
            before = [(i, event) for i, event in by.items() if i != index
                      and event > self.written_at.get(id(p), -1)]
            by[index] = self.events
            if before and p.grad is not None and nonzero(p.grad):
                others = sorted(i for i, _ in before)
                at = tuple(s.shown() for s in (self.built_at.get(id(self.optimizers[j]))
                                               for j in [*others, index]) if s is not None)
                self._add(ScriptFinding(
                    "shared", self.iteration,
                    f"a tensor is stepped by optimizers {others[0]} and {index} with one "
                    f"gradient (no backward() wrote it between the steps): it moves twice",
                    (key,), (self._names().get(id(p), key),), at,
                    advice="give each tensor to one optimizer", step=self.step_events - 1))

    def _wasted(self) -> None:
        names = self._names()
        groups: dict[Source, list[int]] = {}
        for src, key in self.ledger.wasted:
            groups.setdefault(src, []).append(key)
        self.ledger.wasted = []
        for src, keys in groups.items():
            if src.index < 0 or src in self._cleared_sources:
                continue
            ts = [self.ledger.tensors[k] for k in keys]
            cost = _bytes(ts)
            shown = tuple(names.get(k, "?") for k in keys)
            self._add(ScriptFinding(
                "wasted", src.iteration,
                f"{src.label} (backward at {src.site}) writes gradient into {len(keys)} tensors "
                f"that is cleared before any step uses it ({_kib(cost)} of gradient): harmless, "
                f"work done in vain", tuple(shown), shown,
                (src.site.shown(),) if src.site else (), cost_bytes=cost,
                advice="freeze them (requires_grad_(False)) or cut where this loss reads them, "
                       "if they are not meant to pass gradient on"))

    def _stepped_map(self) -> dict[int, int]:
        """Each tensor an optimizer holds, by ``id``, with that optimizer's index."""
        return {id(p): i for i, o in enumerate(self.optimizers) for g in o.param_groups
                for p in g["params"]}

    def _frozen(self, index: int, opt: torch.optim.Optimizer, site: Site | None) -> None:
        """Tensors an optimizer held with ``requires_grad`` at an earlier step, switched off
        since and still held: frozen mid-run (for another network's step, say) and never
        switched back on, the optimizer steps them with no gradient."""
        frozen = [(k, p) for k, p in _keyed(index, opt)
                  if not p.requires_grad and id(p) in self.trainable_seen]
        if not frozen:
            return
        names = self._names()
        owner = self._owner(id(frozen[0][1]))
        name = self.roots[id(owner)][1] if owner is not None else None
        fix = (E.unfreeze_before(site.path, name, site.line)
               if site is not None and name else None)
        at = ((Site(site.path, fix[0], None).shown(),) if fix is not None and site else ()) + (
            (site.shown(),) if site is not None else ())
        opt_text = self._optimizer_text(index, site) or "the optimizer"
        keys = tuple(k for k, _ in frozen)
        self._add(ScriptFinding(
            "frozen", self.iteration,
            f"{opt_text} steps {plural(len(frozen), 'tensor')} whose requires_grad was switched "
            f"off after an earlier step and not back on: they get no gradient and stay as "
            f"they are", keys, tuple(names.get(id(p), k) for k, p in frozen), at,
            (fix[1],) if fix is not None else (),
            advice=f"switch them back on ({name or 'the network'}.requires_grad_(True)) "
                   f"before the loss that trains them", step=self.step_events - 1,
            concerned=keys))

    def _targets(self, roots: Sequence[torch.Tensor], site: Site | None,
                 stepped: dict[int, int]) -> None:
        """A comparison in the head of the loss whose target side reaches tensors an optimizer
        steps (the step audit's rule, :func:`~toolkit.audit.rules.targets.target_edges`,
        on this backward's graph): a teacher's soft targets, a guessed label made by the
        model, computed with gradients; the loss trains those tensors through its target. The
        edit cuts the target where the user's code made it: each network call whose output
        the target side holds (the outermost), ``.detach()``-ed. ``stepped``: each tensor an
        optimizer holds, with its index."""
        outputs = [t for t in roots if t.grad_fn is not None]
        if not stepped or not outputs:
            return
        search = ShortestPaths(outputs)
        graph = StepGraph(search)
        for _, target in sorted(target_edges(graph, set(stepped))):
            met = graph.reach([target])
            reached = sorted({id(v) for k in met
                              if isinstance(v := getattr(search.nodes[k], "variable", None),
                                            torch.Tensor)} & set(stepped))
            if not reached:
                continue
            # the call that made each node (an inner network's call ends first: an outer
            # call handing the same output on is not where it was made)
            made: dict[int, Site] = {}
            for node, s, _ in self.call_outputs:
                if id(node) in met:
                    made.setdefault(id(node), s)
            inner = {k for key in made for k in graph.reach([key]) - {key}}
            sites = list(dict.fromkeys(s for key, s in made.items() if key not in inner))
            edits = tuple(e for s in sites if (e := E.detach_call(s.path, s.span)) is not None)
            names = self._names()
            held = {id(p): (k, p) for i, o in enumerate(self.optimizers)
                    for k, p in _keyed(i, o) if id(p) in set(reached)}
            keys = tuple(key for key, _ in held.values())
            tensors = [p for _, p in held.values()]
            self._add(ScriptFinding(
                "target", self.iteration,
                f"the target of {self._loss_label(site)} (backward at {site}) carries gradient to "
                f"{plural(len(tensors), 'tensor')} an optimizer steps: the loss trains them "
                f"through its own target (a teacher's soft targets, a label the model guessed)",
                keys, tuple(names.get(id(p), "?") for p in tensors),
                tuple(s.shown() for s in sites) + ((site.shown(),) if site else ()), edits,
                advice="compute the target under torch.no_grad(), or .detach() it where it is "
                       "made", step=self.step_events, concerned=keys, extra={"loses": True}))

    def _followers(self, index: int, stepped) -> None:
        """Tensors the script moved itself since their last step, along the line to another
        tensor an optimizer holds (``k <- m k + (1 - m) q``, a momentum or EMA copy, or a copy
        outright), that a loss's gradient reached: the copy the prediction is compared with
        (MoCo's key encoder) is trained by the loss through its own side of the comparison.
        The edit cuts the output of the call that made the copy's values (the outermost call
        reaching them and no other stepped tensor)."""
        held = [p for o in self.optimizers for g in o.param_groups for p in g["params"]]
        moved: dict[int, tuple[str, torch.Tensor]] = {}
        for key, p in stepped:
            old = self.after_step.pop(id(p), None)
            if old is None or old.shape != p.shape or not self.ledger.live.get(id(p)):
                continue
            if torch.equal(p.detach(), old):   # as exact as in double, without the copies
                continue
            now = p.detach().flatten().double()
            before = old.flatten().double()
            for q in held:
                # on the line to q (a clamp, a projection or a decay moves toward no other
                # tensor)
                if q is not p and q.shape == p.shape and toward(
                        before, now, q.detach().flatten().double()):
                    moved[id(p)] = (key, p)
                    break
        if not moved:
            return
        stepped_ids = {id(p) for p in held}
        reach: dict[int, set[int]] = {}
        sites: dict[int, Site] = {}
        for node, s, _ in self.call_outputs:
            leaves = set(read_graph([node]).leaves) & stepped_ids
            if leaves & set(moved) and leaves <= set(moved):
                reach[id(node)] = leaves
                sites[id(node)] = s
        # the outermost: a call whose output reaches more of them
        best = sorted(reach, key=lambda k: -len(reach[k]))
        chosen: list[Site] = []
        covered: set[int] = set()
        for k in best:
            if not reach[k] <= covered:
                chosen.append(sites[k])
                covered |= reach[k]
        edits = tuple(e for s in dict.fromkeys(chosen)
                      if (e := E.detach_call(s.path, s.span)) is not None)
        names = self._names()
        keys = tuple(k for k, _ in moved.values())
        tensors = [p for _, p in moved.values()]
        srcs = {s for p in tensors for s in self.ledger.live.get(id(p), []) if s.site}
        at = tuple(s.shown() for s in dict.fromkeys(chosen)) + tuple(
            sorted({s.site.shown() for s in srcs}))
        self._add(ScriptFinding(
            "target", self.iteration,
            f"{plural(len(tensors), 'tensor')} the script moves itself toward other tensors an "
            f"optimizer steps (a momentum or EMA copy) get gradient from the loss: the loss "
            f"trains the copy it compares with through the copy's own output",
            keys, tuple(names.get(id(p), "?") for p in tensors), at, edits,
            advice="compute the copy's output under torch.no_grad(), or .detach() it where it "
                   "is made", step=self.step_events - 1, concerned=keys,
            extra={"loses": True}))

    def _aliased(self) -> None:
        """One network called by two names, one only under no_grad (a target, an EMA or
        teacher copy read as a constant) and one with gradients, its tensors stepped: the
        target is the trained network itself (``ema = model`` for ``copy.deepcopy(model)``).
        One network read both ways by one name (FixMatch's pseudo-labels) is no finding."""
        stepped = self._stepped_map()
        names = self._names()
        for key, by_name in self.called_as.items():
            module = self.roots[key][0]
            params = [p for p in module.parameters() if id(p) in stepped]
            # in one iteration: one name only under no_grad, another with gradients; the same
            # attribute reached from two places (self.teacher, model.teacher) is one binding
            pairs = [(t, o) for t, t_uses in by_name.items() for o, o_uses in by_name.items()
                     if t.rpartition(".")[2] != o.rpartition(".")[2]
                     and not any(g for g, _, _ in t_uses)
                     and {i for _, _, i in t_uses} & {i for g, _, i in o_uses if g}]
            if not params or not pairs:
                continue
            target, trained = pairs[0]
            sites = [s for g, s, _ in by_name[target] if not g]
            fix = None
            for site in sites:
                fix = E.copy_at_alias(site.path, target.split("(")[0], trained)
                if fix is not None:
                    break
            line = (Site(sites[0].path, fix[0], None) if fix is not None and sites else None)
            at = ((line.shown(),) if line is not None else ()) + tuple(
                sorted({s.shown() for s in sites}))
            shown = tuple(names.get(id(p), "?") for p in params)
            self._add(ScriptFinding(
                "aliased", self.iteration,
                f"`{target}` and `{trained}` are one network: `{target}` is read under no_grad "
                f"as a target while `{trained}` trains, so the target is the trained network "
                f"itself", shown, shown, at, tuple(fix[1]) if fix is not None else (),
                advice=f"make `{target}` a copy: {target} = copy.deepcopy({trained})",
                step=self.step_events - 1, concerned=shown))

    def _snapshot(self) -> None:
        """The values of the networks the script holds and never calls (at each step and at
        the end): a copy kept in sync is one moved toward a stepped network."""
        online = [m for m, _ in self.roots.values()] + [m for m, _ in self.holders.values()]
        self.sync.snapshot(set(self.called_as), set(self._stepped_map()), online)

    def _kept_in_sync(self) -> None:
        """A network the script keeps in sync with a stepped one (a Polyak or EMA copy, a
        copy outright) and never reads, while that stepped network is called under no_grad
        where its output is a constant a loss's graph meets (a TD target, a teacher's
        targets): the constant was meant to come from the copy. The edit calls the copy
        there, by the name the script holds it by. A copy kept for evaluation only (no loss
        reads the stepped network's no_grad output) is no finding."""
        if not self.sync.copies:
            return
        stepped = self._stepped_map()
        names = self._names()
        for copy in self.sync.copies.values():
            online = copy.online
            fed = {s: when for (key, s), when in self.fed_constants.items()
                   if key == id(online)}
            if not fed:
                continue
            sites = list(fed)
            iteration, step = min(fed.values())
            spelled = {n for n, uses in self.called_as.get(id(online), {}).items()
                       for g, s, _ in uses if not g and s in sites}
            edits = []
            for site in dict.fromkeys(sites):
                for name in spelled:
                    e = swap_call(site, name.split("(")[0], copy.name)
                    if e is not None:
                        edits.append(e)
                        break
            held = {id(p): (k, p) for i, o in enumerate(self.optimizers)
                    for k, p in _keyed(i, o) if id(p) in stepped}
            params = [p for p in online.parameters() if id(p) in held]
            keys = tuple(held[id(p)][0] for p in params)
            shown = tuple(names.get(id(p), "?") for p in params)
            which = next(iter(spelled), "the trained network")
            self._add(ScriptFinding(
                "aliased", iteration,
                f"`{copy.name}` is kept in sync with `{which}` (moved toward it after its "
                f"steps) and never read, while `{which}` itself, called under no_grad, makes "
                f"the constant the loss compares with: the target is read from the trained "
                f"network instead of its copy",
                keys, shown, tuple(s.shown() for s in dict.fromkeys(sites)), tuple(edits),
                advice=f"read the target from `{copy.name}`, the copy kept for it",
                step=step, concerned=keys))

    def _end_of_iteration(self) -> None:
        """Gradient in tensors no optimizer steps. Between a loss and the tensors an optimizer
        steps (a predictor on a trained encoder, a head left out of its model's optimizer),
        or part of a model whose other tensors are stepped: the loss trains them and no step
        uses it, a failure at the optimizer's line, with the parameter group that adds them.
        Elsewhere (a backbone below a trained head, a target network read on data): wasted
        work, a note."""
        self._aliased()
        stepped = self._stepped_map()
        names = self._names()
        by_root: dict[int, list[int]] = {}
        for key, live in self.ledger.live.items():
            if key in stepped or not live:
                continue
            owner = self._owner(key)
            if owner is None:
                continue
            by_root.setdefault(id(owner), []).append(key)
        for root, keys in by_root.items():
            module, name = self.roots[root]
            trained = any(id(p) in stepped for p in module.parameters())
            inside = [k for k in keys if k in self.between]
            srcs = {s for k in keys for s in self.ledger.live[k] if s.site is not None}
            at = tuple(sorted({s.site.shown() for s in srcs}))
            order = {id(p): i for i, p in enumerate(module.parameters())}
            keys.sort(key=lambda k: order.get(k, len(order)))
            shown = tuple(names.get(k, "?") for k in keys)
            if not trained and not inside:
                self._add(ScriptFinding(
                    "wasted", self.iteration,
                    f"{len(keys)} tensors of {name} get gradient that no optimizer uses (below "
                    f"every trained tensor, so nothing else needs it): work done in vain",
                    shown, shown, at, advice=f"{name}.requires_grad_(False) if they are meant "
                                             f"to stay as they are; else add them to an "
                                             f"optimizer"))
                continue
            opts = sorted({i for k in inside for i in self.between[k]}) or sorted(
                {stepped[id(p)] for p in module.parameters() if id(p) in stepped})
            # an optimizer whose own loss reaches these tensors and none it holds: its
            # argument is replaced by them, and its dead finding is this one
            wrong = next((i for i, (reached, _) in sorted(self.misplaced.items())
                          if set(keys) <= reached), None)
            if wrong is not None:
                opts = [wrong]
            opt = self.optimizers[opts[0]] if opts else None
            built = self.built_at.get(id(opt)) if opt is not None else None
            edits: tuple = ()
            opt_name = S.assigned_name(built.path, built.line) if built is not None else None
            extra_concerned: tuple[str, ...] = ()
            what = ("no optimizer steps them, though the loss's gradient reaches the tensors "
                    "an optimizer steps through them" if inside else
                    f"no optimizer steps them, though an optimizer steps the rest of {name}")
            if wrong is not None and built is not None:
                e = E.replace_parameters(built.path, built.line,
                                         _parameters_text(module, name, set(keys)))
                if e is not None:
                    edits = (e,)
                    extra_concerned = self.misplaced[wrong][1]
                    self.pending_dead = [(f, v) for f, v in self.pending_dead
                                         if f.extra.get("misplaced") != wrong]
                    opt_text = f"`{opt_name}`" if opt_name else "the optimizer"
                    what = (f"the loss of {opt_text}'s step trains them and none of the tensors "
                            f"it holds: it is built over the wrong parameters")
            elif built is not None and opt_name:
                params = _parameters_text(module, name, set(keys))
                e = E.insert_after(built.path, built.line,
                                   f'{opt_name}.add_param_group({{"params": {params}}})')
                edits = (e,) if e is not None else ()
            self._add(ScriptFinding(
                "unstepped", self.iteration,
                f"{len(keys)} tensors of {name} get gradient and {what}",
                shown, shown, ((built.shown(),) if built is not None else ()) + at, edits,
                advice=f"add them to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
                       f" (optimizer.add_param_group({{'params': [...]}}), or in its "
                       f"constructor)", step=self.step_events - 1,
                concerned=tuple(shown) + extra_concerned))


def _parameters_text(module: nn.Module, name: str, keys: set[int]) -> str:
    """The parameters of ``module`` (called ``name`` in the user's code) whose ids are
    ``keys``, as the user would write them: ``name.parameters()`` when they are all of it, the
    largest submodules they fill whole (``[*model.fc22.parameters()]``), else each one
    (``model.fc22.weight``); a numbered child is indexed (``net[0]``)."""
    def attr(path: str) -> str:
        return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path.split(".") if p)

    every = {id(p) for p in module.parameters()}
    if every and every <= keys:
        return f"{name}.parameters()"
    parts, covered = [], set()
    for sub_name, sub in module.named_modules():
        ids = {id(p) for p in sub.parameters()}
        if sub_name and ids and ids <= keys and not ids <= covered:
            parts.append(f"*{name}{attr(sub_name)}.parameters()")
            covered |= ids
    for p_name, p in module.named_parameters():
        if id(p) in keys and id(p) not in covered:
            parts.append(f"{name}{attr(p_name)}")
    if len(parts) == 1 and parts[0].startswith("*"):
        return parts[0][1:]
    return "[" + ", ".join(parts) + "]"


def _keyed(index: int, opt: torch.optim.Optimizer) -> list[tuple[str, torch.Tensor]]:
    """Each tensor ``opt`` (the ``index``-th optimizer) holds, with its stable key
    ``opt<index>.<group>.<position>``."""
    return [(f"opt{index}.{g}.{k}", p) for g, group in enumerate(opt.param_groups)
            for k, p in enumerate(group["params"])]


def _user_lines(frame: FrameType | None) -> list[tuple[str, int]]:
    """The user's frames from ``frame`` outwards, as ``(file, line)``."""
    out = []
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            out.append((os.path.abspath(frame.f_code.co_filename), frame.f_lineno))
        frame = frame.f_back
    return out
