"""The watch over a running script: the calls it makes, as they happen.

Hooks (installed by :mod:`~toolkit.audit.script.hooks`) call :meth:`Watch.backward` before
every ``backward()``, :meth:`Watch.step` before every ``optimizer.step()`` and
:meth:`Watch.stepped` after it. An *iteration* ends where the script comes back to a
``backward()`` it already made (the same line, reached through the same calls) after an
optimizer stepped: the loop's body ran once. Gradient accumulation (several ``backward()`` at
one line before a step) stays one iteration.

In an audited iteration the watch reads each backward's graph before it runs and the ``.grad``
it writes, keeps a :class:`~toolkit.audit.record.ledger.Ledger` of which loss's gradient
each tensor holds, and at each step says, in the order the script made its calls:

- ``leak``/``stale``: a stepped tensor's ``.grad`` holds gradient of a loss paired with another
  step (another optimizer's loss, or an earlier iteration's: no ``zero_grad`` between);
- ``wasted`` (information): gradient written and cleared before any step used it;
- ``cleared``, ``dead``: a stepped tensor with no gradient, because its loss's gradient was
  cleared before the step, or a cut (``.detach()``) or ``no_grad`` kept every loss from it;
  ``cleared`` too: gradient cleared before any step or the script's code read it, while the
  step uses a later backward's (a ``zero_grad()`` inside a gradient-accumulation loop);
- ``dead`` for one loss term: a network reads a hard value (a comparison, ``argmax`` and its
  one-hot) made from another network's output without its straight-through term
  (:mod:`~toolkit.audit.rules.running.hard_values`);
- ``carried``: a network's own estimate fed back within the iteration without a cut
  (self-conditioning, recycling: :mod:`~toolkit.audit.rules.running.recycling`);
- ``unstepped``: gradient reaches tensors of a model whose other tensors an optimizer steps,
  and no optimizer steps them (a layer unfrozen after the optimizer was built, a learned
  tensor the model holds as a plain tensor that requires grad, not an ``nn.Parameter``);
- ``shared``: a tensor two optimizers step.

Each audited ``backward()`` is also judged by the step audit's own stages
(:mod:`~toolkit.audit.script.staged`): a recording under the iteration, its truth, and the rules
of :func:`~toolkit.audit.audit_step` for trained targets, graph carried from before the
iteration (autograd numbers the nodes it makes; a node made then is carried, wherever the script
kept it) and graph held by module state, each failure's edit written by the fixes stage.
"""

from __future__ import annotations

import os
import runpy
import sys
import types
import weakref
from collections.abc import Callable, Sequence
from types import CodeType, FrameType
from typing import TypeVar

import torch
import torch.overrides
from torch import nn

from toolkit.audit.fixes import running as running_fixes
from toolkit.audit.record import calls as record_calls
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import (
    beside,
    between,
    current_sequence,
    read_graph,
    toward,
)
from toolkit.audit.record.frames import is_user, site_of, user_file_lines, user_frame
from toolkit.audit.record.handed import arg_count
from toolkit.audit.record.ledger import Ledger, Source
from toolkit.audit.record.reversal import Reversals
from toolkit.audit.record.tensors import keyed
from toolkit.audit.rules.running import (
    at_step,
    carried,
    clipped,
    copies,
    cut_terms,
    dead,
    drawn,
    hard,
    hard_values,
    kept_in_sync,
    leak_cause,
    lost,
    masks,
    meant,
    never_trained,
    recycled,
    replaced,
    summed,
    targets,
    truncated,
    unread_cut,
    unstepped,
    weighed,
    zero_gradient,
    zeroed,
)
from toolkit.audit.rules.running.state import ShallowCopy
from toolkit.audit.rules.running.zeroed import MadeAt
from toolkit.audit.script.gradient_access import GradientAccess
from toolkit.audit.script.module_calls import ModuleCalls
from toolkit.audit.script.staged import Staged, scope_of, updated_by_hand, user_frames
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.lens.backward_graph import ShortestPaths

__all__ = ["Stop", "Watch"]

_T = TypeVar("_T")


class Stop(BaseException):
    """Raised into the script at its next ``backward()`` once its audited iterations are done
    (a ``BaseException``, as ``KeyboardInterrupt``: the script's ``except Exception`` does not
    catch it, its ``finally`` blocks run)."""


#: frames a torch function mode adds around a call
#: (:class:`~toolkit.audit.rules.running.zeroed.MadeAt`,
#: :class:`~toolkit.audit.rules.running.kept_in_sync.Constants`, the recording's
#: :class:`~toolkit.audit.record.calls.CallWatch`, while entered) and the hooks' wrappers: not
#: part of where the script called ``backward()``
_TRANSPARENT = frozenset(os.path.abspath(f) for f in (
    torch.overrides.__file__, zeroed.__file__, kept_in_sync.__file__, hard_values.__file__,
    record_calls.__file__, os.path.join(os.path.dirname(__file__), "hooks.py")))
#: the code that runs a script as ``__main__`` (``runpy.run_path``): the frames outside it (the
#: command's own, the same for every ``backward()`` of the script) end a stack's key
_RUNS_SCRIPT = getattr(getattr(runpy, "_run_code", None), "__code__", None)


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

    def code(self, number: int) -> CodeType | None:
        """The code numbered ``number`` by :meth:`__call__`."""
        return next((c for c, n in self._by_value.items() if n == number), None)

    def __call__(self, frame: FrameType | None) -> tuple[int, ...]:
        """The key of the stack from ``frame`` outwards, to the frame that runs the script."""
        key: list[int] = []
        last: CodeType | None = None
        while frame is not None:
            code = frame.f_code
            if code is _RUNS_SCRIPT:
                break
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


class Watch(ModuleCalls, GradientAccess):
    """One watched run (see the module's docstring): its state (:class:`WatchState`), the hooks
    that record it (a module call's: :class:`~toolkit.audit.script.module_calls.ModuleCalls`;
    the gradients' outside ``backward()``:
    :class:`~toolkit.audit.script.gradient_access.GradientAccess`),
    and the rules (:mod:`toolkit.audit.rules.running`) called at each event, which write their
    fixes through the fixes stage (:mod:`toolkit.audit.fixes.running`)."""

    fixes = running_fixes

    def __init__(self, steps: int = 2, every: int | None = None, record: bool = False,
                 on_finding=None, follow: int = 0) -> None:
        super().__init__(steps, every, record, on_finding, follow)
        self._stack_key = _StackKeys()
        self._loops: dict[tuple[int, int], tuple[int, int] | None] = {}
        # the step audit's stages on each audited backward (:mod:`~toolkit.audit.script.staged`)
        self.staged = Staged()
        self._judging = False

    # --- which iterations ---------------------------------------------------------------


    def _new_iteration(self) -> None:
        self.prev_audited = self.audited()
        if self.prev_audited:
            unstepped.end_of_iteration(self)
        by_hand = self._no_step_yet()
        if by_hand:
            # no optimizer stepped in the iteration that ended (an update by hand, as the
            # word language model's pre-training writes it): it ended at its last backward()
            self.last_step_seq = self.backward_seq
            self._updated_by_hand()
        self.updated_by_hand, self.hand_grads, self.hand_judged = by_hand, {}, False
        self.iteration += 1
        self.site_events = {}
        self.steps_at_start = self.step_events
        self.start_seq[self.iteration] = self.last_step_seq
        self.iteration_began[self.iteration] = self.last_step_event
        # what the new iteration did before its first backward() was recorded after the last
        # step (each record filtered only when it holds any: in an iteration not recorded,
        # none does)
        keep = self.last_step_event
        if self.call_outputs:
            self.call_outputs = [c for c in self.call_outputs if c[-1] >= keep]
        if self.trained_outputs:
            self.trained_outputs = set()
        if self.made_by:
            self.made_by = {k: v for k, v in self.made_by.items() if v[-1] >= keep}
        if self.feeds:
            self.feeds = [f for f in self.feeds if f[-1] >= keep]
        self.recycling.new_iteration(keep)
        if self.drawn_met:
            self.drawn_met = []
        if self.detaches:
            self.detaches = [d for d in self.detaches if d[-1] >= keep]
        if self.no_grad_calls:
            self.no_grad_calls = [c for c in self.no_grad_calls if c[-1] >= keep]
        if self.no_grad_out:
            self.no_grad_out = {k: v for k, v in self.no_grad_out.items() if v[-1] >= keep}
        if self.clears:
            self.clears = [c for c in self.clears if c[-1] >= keep]
        if self.trained_reads:
            self.trained_reads = {k: v for k, v in self.trained_reads.items() if v[0] >= keep}
        if self.reached_by:
            self.reached_by = [r for r in self.reached_by if r[0] >= keep]
        if self.passed_on:
            self.passed_on = {}
        if self.scheduled:
            self.scheduled = set()
        if self.audited() and not self.prev_audited:
            self.ledger = Ledger()   # what happened unwatched is one unknown source
        self._want_recording_hooks()

    def _no_step_yet(self) -> bool:
        """Whether this iteration ran a backward() and no optimizer has stepped in it: where it
        ends so, the script updated the weights by hand."""
        return self.step_events == self.steps_at_start and bool(self.backward_seq)

    def _by_hand(self, graph) -> dict[int, int]:
        """Where no optimizer exists: each parameter ``graph`` reaches that requires grad, by
        ``id``, with the index ``-1`` (no optimizer's); none otherwise."""
        if self.optimizers:
            return {}
        return {id(t): -1 for t in updated_by_hand(graph.leaves)}

    def _updated_by_hand(self) -> None:
        """The iteration ends with no optimizer stepped: its gradients read twice are judged
        (as at a step), and what its backward() calls left is recorded as its update's."""
        summed.flush(self)
        if self.record and self.hand_grads:
            self.grads.append({"iteration": self.iteration, "optimizer": None, "hand": True,
                               "judged": self.hand_judged, "grads": self.hand_grads,
                               "names": {k: k for k in self.hand_grads}, "idle": []})

    def _want_recording_hooks(self, want: bool | None = None) -> None:
        """The hooks that record calls (the module hook, ``Tensor.grad`` as the user's code
        reads, clears or writes it) on while an iteration is recorded, off between (``want``:
        whether it is, where the caller knows)."""
        if want is None:
            want = not self.done() and self.recording()
        if self.grad_property is not None:
            present = vars(torch.Tensor).get("grad")
            if want and present is not self.grad_property:
                torch.Tensor.grad = self.grad_property  # type: ignore[method-assign]
            elif not want and present is self.grad_property:
                del torch.Tensor.grad
        if want and self.module_hook is None:
            self.module_hook = nn.modules.module.register_module_forward_hook(self.module_called)
        elif not want and self.module_hook is not None:
            self.module_hook.remove()
            self.module_hook = None

    def close(self) -> None:
        """The script ended (or was stopped): the rules of the iteration it was in."""
        self.forget_names()
        self.staged.close()
        if self.module_hook is not None:
            self.module_hook.remove()
            self.module_hook = None
        self._stop_lines()
        if self.hard is not None:
            self.hard.leave()
        self.constants.clear()
        if self.audited() and self.step_events:
            unstepped.end_of_iteration(self)
        if self._no_step_yet():
            self._updated_by_hand()   # the last iteration, updated by hand
        dead.settle(self, final=True)
        at_step.settle(self)
        summed.flush(self)
        targets.settle(self)
        never_trained.check(self)
        unstepped.never_stepped(self)
        if self.step_events:
            copies.snapshot(self)
            copies.kept_in_sync(self)
            copies.shallow(self)
            copies.shared(self)
            if self.staged.rec is not None:
                copies.recorded(self, self.staged.rec)
        # the step audit's findings the watch did not make (by line, or by tensor: the watch
        # names a network's tensors, or the network), nor withdrew (a target whose gradient
        # was cleared before a step used it, as a perturbation's attack loss leaves it in the
        # model's .grad: the step audit sees the target, not the clear)
        named = self.names()
        by_name = {name: key for key, name in named.items()}
        made = [*self.findings.values(), *(f for f, _ in self.withdrawn.values())]
        theirs = set()
        for f in made:
            for name in f.names:
                theirs.update([by_name[name]] if name in by_name else
                              (k for k, n in named.items() if n.startswith(f"{name}.")))
        for finding in self.staged.findings(made, theirs, self.ledger.used_ever):
            self.add(finding)

    def in_constant_terms(self) -> set[str]:
        """The tensors (by name) that a term of a loss, computed as a constant, was meant to
        train: the step audit's constant terms so far (a network's own loss computed under
        ``no_grad``). That finding names them; they compute no target."""
        return {n for *_, audit in self.staged.audits for term in audit.constant_terms
                for n in term.through}

    # --- the hooks ----------------------------------------------------------------------
    def optimizer_built(self, opt: torch.optim.Optimizer) -> None:
        self.optimizers.append(opt)
        self.on_at_build[len(self.optimizers) - 1] = {
            id(p) for g in opt.param_groups for p in g["params"] if p.requires_grad}
        frame = user_frame(2)
        # an optimizer class of the script's own (K-FAC's, a sharpness-aware wrapper) is built
        # where the script calls it, not in its ``__init__``'s call of ``super().__init__``
        while frame is not None and frame.f_locals.get("self") is opt:
            frame = frame.f_back
            while frame is not None and not is_user(frame.f_code.co_filename):
                frame = frame.f_back
        self.built_event[id(opt)] = self.events
        self.built_at[id(opt)] = site_of(frame) if frame is not None else None
        if frame is not None:
            self.built_in[id(opt)] = (os.path.abspath(frame.f_code.co_filename),
                                      frame.f_code.co_firstlineno)
        self.built_groups[id(opt)] = [
            (tuple(p.ndim for p in g["params"]), {k: v for k, v in g.items() if k != "params"})
            for g in opt.param_groups]
        # the names the building line sees (its model, read again by the unstepped rule)
        self.built_scope[id(opt)] = {} if frame is None else {**frame.f_globals,
                                                               **frame.f_locals}
        copies.rebound(self, opt, self.built_at[id(opt)], self.built_scope[id(opt)])
        if self.audited() and not self.done():
            self.staged.learn(frame, self.optimizers)
            self.staged.resume()

    def parameter_registered(self, module: nn.Module, name: str, param: object) -> None:
        self.forget_sizes()
        replaced.noted(self, module, name, param)
        copies.registered(self, param)

    def module_registered(self, module: nn.Module, name: str, submodule: object) -> None:
        self.forget_sizes()
        if self.optimizers:
            replaced.noted_module(self, module, name, submodule)
        copies.registered(self, submodule)

    def leaf_made(self, tensor: torch.Tensor) -> None:
        replaced.made(self, tensor)

    def switched_off(self, tensor: torch.Tensor) -> None:
        """The script's code (or a module's ``requires_grad_(False)`` it called) froze
        ``tensor``: noted by where, while recorded (:mod:`~.rules.never_trained`)."""
        frame = user_frame(2) if self.recording() else None
        if frame is not None:
            self.switching.setdefault(tuple(user_file_lines(frame)), set()).add(id(tensor))

    def _index(self, opt: torch.optim.Optimizer) -> int:
        for i, o in enumerate(self.optimizers):
            if o is opt:
                return i
        self.optimizers.append(opt)
        self.built_at[id(opt)] = None
        return len(self.optimizers) - 1

    def copied(self, source: object, copy: object) -> None:
        """``copy = copy.copy(source)`` ran: where the user's code made it, the networks with
        tensors that it shares with ``source`` (:func:`~.rules.copies.shallow` judges them at
        the end, by the steps that came after)."""
        caller = sys._getframe(2)
        if not is_user(caller.f_code.co_filename):
            return
        networks = [(k, m) for k, m in _networks(source) if any(True for _ in m.parameters())]
        if not networks:
            return
        made = ShallowCopy(site_of(caller), networks, self.events, self.iteration,
                           self.step_events, tensors=frozenset(
                               id(p) for _, m in networks for p in m.parameters()))
        if isinstance(copy, nn.Module):
            made.module = weakref.ref(copy)
            self.copies_by_id[id(copy)] = made
        self.shallow_copies.append(made)

    def detached(self, tensor: torch.Tensor, out: torch.Tensor) -> None:
        """``out = tensor.detach()`` ran: noted with ``out``, held (where the values live: a
        later tensor could take a freed storage's address)."""
        if tensor.grad_fn is None or not self.recording() or self._judging:
            return
        frame = user_frame(2)
        if frame is not None:
            self.detaches.append((tensor.grad_fn, site_of(frame), out, self.events))

    def sampled(self, dist: object, out: torch.Tensor) -> None:
        """``out = dist.sample()`` ran (:mod:`~toolkit.audit.rules.running.drawn`)."""
        if not self.recording() or self._judging or not torch.is_grad_enabled():
            return
        frame = user_frame(2)
        if frame is not None:
            drawn.note(self, dist, out, site_of(frame))

    def log_prob_read(self, value: object) -> None:
        """A distribution's ``log_prob`` read ``value``."""
        if self.draws:
            drawn.scored(self, value)

    def backward(self, tensors: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor] | None):
        """Before a ``backward()``: the iteration's bookkeeping, the stop, the graph read.
        Returns what :meth:`after_backward` needs, or ``None`` when not audited."""
        self.forget_names()
        self.staged.pause()
        frame = sys._getframe(2)
        key = self._stack_key(frame)
        began = key not in self.site_events and self._loop_began(key)
        if began or self._body_ran(key):
            self._new_iteration()
        if not self.site_events:
            self.first_site = key
        if self.done():
            self.staged.close()
            self.stopped = True
            raise Stop
        if key not in self.sites_seen:
            self.sites_seen.add(key)
            if self.iteration > 0:
                # a new loop (a main loop after a warm-up): its first whole iterations are
                # audited, one when watching, else as many as the first loop's
                first = self.iteration + (0 if began else 1)
                self.new_loops.update(range(first, first + (1 if self.every else self.steps)))
                self.last_audited = max(self.last_audited, max(self.new_loops))
                if self.loop_began_in != self.iteration:
                    # the loop's first backward(), not a later one of its first pass (ADDA's
                    # target loss after its critic's, each at a line not seen before): the
                    # steps between them are the new loop's
                    self.loop_began = self.events + 1
                    self.loop_began_in = self.iteration
                self._want_recording_hooks()
        self.events += 1
        self.site_events[key] = self.events
        self.backwards += 1
        now = self.audited()
        if now or self.audited(self.iteration + 1):
            self.backward_seq = current_sequence()
        if not now:
            return None
        self.backward_keys[self.events] = key
        caller = user_frame(2)
        site = site_of(caller) if caller is not None else None
        frames = user_frames(caller)
        self.scope = scope_of(frames)
        self.handed = {name for f in frames
                       for name in f.f_code.co_varnames[:arg_count(f.f_code)]}
        for f in frames:
            path = os.path.abspath(f.f_code.co_filename)
            self.user_paths[os.path.basename(path)] = path
        if key in self.zero_suspects and self.made_at is not None:
            # explained: the lines stop being kept at the next step (not here: this call
            # runs inside the mode's own dispatch of backward())
            zero_gradient.explained(self, tensors, site, self.zero_suspects.pop(key))
        graph = read_graph(t.grad_fn for t in tensors)
        # the loss's graph as the step audit reads it, read once for its rules and the watch's
        outputs = [t for t in tensors if t.grad_fn is not None]
        searched = StepGraph(ShortestPaths(outputs)) if outputs else None
        self._judge(tensors, graph.leaves, caller, site, searched)
        hard.reached(self, graph, site)
        for made in self.constants.fed(graph.nodes):
            if isinstance(made, drawn.Drawn):
                drawn.fed(self, made, site)
            else:
                self.fed_constants.setdefault(made, (self.iteration, self.step_events))
        carried.fed_back(self, tensors, site)
        recycled.recycled(self, tensors, site)
        held = self.stepped_map()
        meant.note(self, graph.leaves, held)
        truncated.truncated(self, graph.nodes, site, tensors)
        masks.note(self, graph)
        weighed.note(self, list(tensors), graph)
        unread_cut.unread(self, graph.nodes, held, site)
        step = caller.f_code.co_name if caller is not None else ""
        # in a script that steps no optimizer (weights updated by hand), the parameters the
        # loss reaches stand for the stepped ones, as they do for the step audit's rules
        untargeted = targets.targets(self, searched, site, held or self._by_hand(graph), step) \
            if searched is not None else None
        if searched is not None:
            leak_cause.note(self, searched, set(held), step)
        # between the loss and stepped tensors, or in a term of the loss beside them
        besides = beside(graph, held)
        self.beside.update(besides)
        for leaf, optimizers in [*between(graph, held).items(), *besides.items()]:
            node = None if untargeted is None or searched is None else \
                searched.search.leaf_node.get(leaf)
            if node is not None and node not in untargeted:
                self.target_side.add(leaf)  # through a target alone: work in vain, not left out
                continue
            self.between.setdefault(leaf, set()).update(optimizers)
        leaves = graph.leaves
        kept_out: set[int] = set()
        if inputs is not None:
            wanted = {id(t) for t in inputs}
            kept_out = {k for k, v in leaves.items() if k not in wanted and k in held
                        and v.requires_grad}
            leaves = {k: v for k, v in leaves.items() if k in wanted}
        leaves = {k: v for k, v in leaves.items() if v.requires_grad}
        self.site_optimizers[key] = frozenset(held[k] for k in leaves if k in held)
        for k, t in leaves.items():
            self.reached_at[k] = self.events
            self.reached_in[k] = (self.reached_in.get(k, (self.iteration,))[0], self.iteration)
            if k not in self.plain_values and (not isinstance(t, nn.Parameter) or k not in held):
                self.plain_values[k] = (t, t.detach().clone())
        for t in leaves.values():
            self.ledger.observe(t, self.iteration, self.last_step_of, self.stepped_at,
                                self.cleared_at)
        self.reached_by.append((self.events, set(leaves)))
        source = Source(self.events, site, self.loss_label(site), self.iteration,
                        names=_optimizer_names(caller), kept_out=kept_out)
        self.kept_to = [s for s in self.kept_to if s.iteration == self.iteration]
        source.meets = [s for s in self.kept_to if not s.toward.isdisjoint(graph.nodes)]
        if kept_out:
            source.toward = toward(graph, set(leaves))
            self.kept_to.append(source)
        # values the script cut at another read in this iteration, read here whole
        cut = [node for node, _, _, _ in self.detaches if id(node) in graph.nodes]
        if cut:
            source.uncut = set(read_graph(cut).leaves)
        cut_terms.note(self, list(tensors), graph, source)
        return source, leaves, self.ledger.snapshot(leaves), Reversals(graph)

    def _body_ran(self, key: tuple) -> bool:
        """Whether the loop's body ran once before this ``backward()`` at site ``key``. The
        iteration's first site (the pass's first loss) back after any step begins the next
        pass, whichever optimizer stepped (an actor's every other pass, or a new optimizer a
        new phase builds over the same network). Another site begins one only when an
        optimizer holding tensors it writes stepped since its last call: another optimizer's
        step between two backward() calls of one pass, the discriminator's before the
        generator's loss, begins nothing (with gradient accumulation the generator's site
        comes back after it while its own window goes on). In a script that steps no torch
        optimizer (weights updated by hand), a site back at all begins one."""
        last = self.site_events.get(key)
        if last is None:
            return False
        if not self.optimizers:
            return True
        mine = self.site_optimizers.get(key)
        if key == self.first_site or not mine:   # or not audited yet, or it writes no tensor
            return last < self.last_step_event  # an optimizer holds
        return any(self.optimizer_stepped.get(i, -1) > last for i in mine)

    def _loop_began(self, key: tuple) -> bool:
        """Whether the ``backward()`` at site ``key``, not seen in this iteration, is the first
        of a loop other than the one whose pass the iteration's first site began, after a step
        since that site's last call (a main loop's first pass after its warm-up's last: a pass
        of its own, not the end of the warm-up's; or a loop that comes back, ENAS's shared
        steps after its controller's, each epoch). The first site's loop is the innermost one
        around its stack's lines, from its own frame outwards: a loop the two stacks share
        (one pass's backward() calls in a method the loop calls) holds both, and one below the
        frame where they part, or at it without the new line, holds the first alone."""
        first = self.first_site
        if first is None or (self.optimizers and
                             self.site_events.get(first, -1) >= self.last_step_event):
            return False
        outer_first = list(zip(first[-2::-2], first[-1::-2]))
        outer_key = list(zip(key[-2::-2], key[-1::-2]))
        parted = next((i for i, (a, b) in enumerate(zip(outer_first, outer_key, strict=False))
                       if a != b), None)
        if parted is None:
            return False
        for depth in range(len(outer_first) - 1, -1, -1):
            loop = self._loop_at(*outer_first[depth])
            if loop is None:
                continue
            if depth != parted:
                return depth > parted
            other = outer_key[parted]
            return other[0] != outer_first[parted][0] or not loop[0] <= other[1] <= loop[1]
        return False

    def _loop_at(self, number: int, line: int) -> tuple[int, int] | None:
        """The lines of the innermost loop around ``line`` of the code numbered ``number``
        (:func:`~toolkit.audit.record.syntax.loop_around`), read once per line: a pass of two
        losses asks at each of its iterations."""
        where = (number, line)
        if where not in self._loops:
            code = self._stack_key.code(number)
            self._loops[where] = None if code is None else S.loop_around(code.co_filename,
                                                                         line)
        return self._loops[where]

    def _judge(self, tensors: Sequence[torch.Tensor], leaves: dict, caller: FrameType | None,
               site, graph: StepGraph | None) -> None:
        """The step audit's truth and rules on this backward's loss (see
        :mod:`~toolkit.audit.script.staged`)."""
        i = self.iteration
        marks = ((self.start_seq.get(i - 1, 0), self.start_seq.get(i, 0)) if i >= 1
                 else (0, 0))
        # the rules see a loss only once the recording runs: in a loop updated by hand, from
        # the second iteration on (no optimizer's construction began it)
        self.hand_judged = self.staged.rec is not None
        self._judging = True
        try:
            self.staged.judge(tensors, leaves, caller, i, self.step_events, marks,
                              self.loss_label(site), self.scope, graph, index=self.events)
        finally:
            self._judging = False

    def after_backward(self, state, by_hand: bool = False) -> None:
        """After the backward :meth:`backward` saw; ``by_hand``: a ``torch.autograd.grad``
        of the script's, which writes no ``.grad`` (the script may write its result)."""
        source, leaves, before, reversals = state
        source.reversed = reversals.below()
        self.ledger.record(source, leaves, before)
        self.last_backward = source.index
        if self.record and not by_hand and (not self.optimizers or self.updated_by_hand):
            # what an update by hand would read, should no optimizer step in this iteration
            for key in source.wrote:
                t = leaves.get(key)
                name = None if t is None or t.grad is None else self.name_of(t)
                if name is not None:
                    self.hand_grads[name] = t.grad.detach().clone()
        if by_hand:
            self.by_hand.append((source, dict(leaves), before))
        else:   # what this backward wrote is its own, not a gradient taken by hand before it
            for _, taken, _ in self.by_hand:
                for key in source.wrote:
                    taken.pop(key, None)
        for key in source.wrote:
            self.written_at[key] = source.index
        if self.stepping is not None:   # a closure's: the step reads it when the closure returns
            self.read_sources.add(source.index)
        if not self.optimizers and self.staged.rec is None and self.recording() and \
                not self.done():
            # no optimizer yet: the script updates by hand (a manual SGD), and no optimizer's
            # construction or step begins the recording of the step audit's stages: the first
            # backward does, for the next iteration's forward
            self.staged.learn(user_frame(2), self.optimizers, by_hand=True)
        if self.recording() and not self.done():
            if not self.optimizers and self.target_lines:
                self._start_lines()   # for a target waiting to be cut, as after a step
            # with no optimizer, what follows a backward() is the next iteration's forward: a
            # new call, as after a step
            self.staged.resume(new_call=not self.optimizers)
        else:
            self.staged.leave()

    # --- at a step ----------------------------------------------------------------------
    def step(self, opt: torch.optim.Optimizer, closure: Callable | None = None) -> None:
        """``opt.step()`` is about to run (``closure``: the one it was handed, which writes the
        gradient it reads inside the call)."""
        self.forget_names()
        self.staged.pause()
        index = self._index(opt)
        self.events += 1
        event = self.events
        self.step_events += 1
        if not self.zero_suspects and not self.target_lines and self.made_at is not None:
            self._stop_lines()
        if self.hard is not None:
            hard.leave(self)
        self.previous_step_event = self.last_step_event
        self.last_step_event = event
        if self.by_hand:
            self._written_by_hand()
        for made in self.shallow_copies:
            if made.first_step is None and any(
                    id(p) in made.tensors for g in opt.param_groups for p in g["params"]):
                made.first_step = event
        self.step_optimizer[event] = index
        self.optimizer_stepped[index] = event
        self.stepping = index
        if self.pending_dead:
            dead.settle(self)
        cut_terms.keep_draws(self)
        self.constants.clear()
        if self.draws or self.log_prob_reads:
            self.draws, self.log_prob_reads = {}, {}
        if self.recording() and not self.done():
            copies.snapshot(self)
        if not self.audited():
            # every iteration pays this, in proportion to the tensors stepped: one pass in C
            # over their ids, a look at each tensor only until each was seen once
            params = [p for group in opt.param_groups for p in group["params"]]
            ids = [id(p) for p in params]
            self.stepped_at.update(dict.fromkeys(ids, event))
            mine = self.trainable_by.setdefault(index, set())
            if not mine.issuperset(ids):
                on = {id(p) for p in params if p.requires_grad}
                mine |= on
                self.trainable_seen |= on
            if not self.stepped_with_grad.issuperset(ids):
                self.stepped_with_grad.update(id(p) for p in params if p.grad is not None)
            return
        frame = user_frame(2)
        site = site_of(frame) if frame is not None else None
        stepped = [(k, p) for k, p in keyed(index, opt) if p.requires_grad]
        self.stepped_with_grad.update(id(p) for _, p in stepped if p.grad is not None)
        for _, p in stepped:
            self.ledger.observe(p, self.iteration, self.last_step_of, self.stepped_at,
                                self.cleared_at)
        if self.record:
            named, owners = self.names(), dead.parameter_modules(self)
            self.grads.append({"iteration": self.iteration, "optimizer": index,
                               "event": self.step_events - 1,
                               "grads": {k: (p.grad.detach().clone() if p.grad is not None
                                             else None) for k, p in stepped},
                               "names": {k: named.get(id(p), k) for k, p in stepped},
                               "idle": [k for k, p in stepped if dead.is_idle(self, p, owners)]})
        targets.followers(self, index, stepped)
        at_step.frozen(self, index, opt, site)
        masks.trained(self, index, stepped)
        self.trainable_seen.update(id(p) for _, p in stepped)
        self.trainable_by.setdefault(index, set()).update(id(p) for _, p in stepped)
        if closure is not None:
            self.closure_step = (index, opt, stepped, event, closure)
        else:
            at_step.shared(self, index, opt, stepped)
        at_step.views(self, index, stepped)
        summed.flush(self)
        at_step.leaks(self, index, event, site, stepped)
        at_step.for_an_input(self, index, site, stepped)
        clipped.unclipped(self, index, site, stepped)
        self.retained_reads.clear()
        at_step.moved(self, index, event, stepped)
        if self.staged.rec is not None:
            copies.recorded(self, self.staged.rec)
        if self.scheduled:
            # a freeze is a clear the step sees: a tensor a later backward() wrote into again
            # reaches it with part of the gradient of its update, the rest lost to the clear
            self.scheduled -= {id(p) for _, p in stepped if self.ledger.live.get(id(p))}
        dead.dead(self, index, event, site, stepped)
        zero_gradient.suspect_zeros(self, stepped)
        for _, p in stepped:
            if self.ledger.live.get(id(p)):
                self.trained_by[id(p)] = (self.iteration, index)
            self.last_step_of[id(p)] = self.stepped_at[id(p)] = event
            self.ledger.stepped(id(p))
        lost.lost(self, index, site)
        at_step.wasted(self)

    def stepped(self, opt: torch.optim.Optimizer) -> None:
        self.stepping = None
        if self.closure_step is not None:
            pending, self.closure_step = self.closure_step, None
            at_step.shared(self, *pending)
        # which of this iteration and the next two are audited, asked once (every step pays
        # this, audited or not)
        i = self.iteration
        now, next_ = self.audited(), self.audited(i + 1)
        recording = (now or next_) and not self.done()
        if now or next_:
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.requires_grad:
                        self.after_step[id(p)] = (self.last_step_event, p.detach().clone())
        # where iterations begin, in autograd's numbering: needed by the carried rule of the
        # next two iterations only
        if next_ or self.audited(i + 2):
            self.last_step_seq = current_sequence()
        self._want_recording_hooks(recording)
        if self.hard_suspects and self.hard is None:
            hard.enter(self)
        if self.made_at is not None and not recording:
            # no audited forward ahead: what waits for one waits off the mode stack, which
            # costs a Python dispatch on every operation of every iteration not audited
            self._stop_lines()
        if (self.zero_suspects or self.target_lines) and recording:
            self._start_lines()
        # recorded last (innermost on the mode stack), paused first at the next event
        if recording:
            self.staged.learn(user_frame(2), self.optimizers)
            self.staged.resume(new_call=True)
        else:
            self.staged.leave()

    def _start_lines(self) -> None:
        """Follow the lines of the next audited forward (:class:`MadeAt`), once."""
        if self.made_at is None:
            self.made_at = MadeAt()
            self.made_at.__enter__()

    def _stop_lines(self) -> None:
        if self.made_at is not None:
            made, self.made_at = self.made_at, None
            made.__exit__(None, None, None)

    # --- the rules ------------------------------------------------------------------------


def _optimizer_names(frame: FrameType | None) -> dict[int, str]:
    """The torch optimizers ``frame`` can name (its locals, then its module's globals), by
    ``id``: the first name each is bound to, else an attribute of an object it names
    (``optimizer.base_optimizer``, the optimizer a wrapper such as SAM steps)."""
    names: dict[int, str] = {}
    if frame is None:
        return names
    held: list[tuple[str, object]] = []
    for scope in (frame.f_locals, frame.f_globals):
        for name, value in list(scope.items()):
            if name.startswith("_"):
                continue
            if isinstance(value, torch.optim.Optimizer):
                names.setdefault(id(value), name)
            if not isinstance(value, type | types.ModuleType | types.FunctionType) and \
                    isinstance(getattr(value, "__dict__", None), dict):
                held.append((name, value))
    for name, value in held:
        for attr, inner in list(vars(value).items()):
            if isinstance(inner, torch.optim.Optimizer) and not attr.startswith("_"):
                names.setdefault(id(inner), f"{name}.{attr}")
    return names


def _networks(held: object) -> list[tuple[str, nn.Module]]:
    """The modules a shallow copy of ``held`` shares with it, each with how the copy reaches
    it, as a dotted name goes on: ``held`` itself (``""``: a copied module's parameters and
    submodules are the original's), or the modules it holds in a dict (``".net"``, or
    ``"['a key']"`` for a key that is no name), a list or a tuple (``".0"``) or a plain
    object's attributes (``".net"``)."""
    if isinstance(held, nn.Module):
        return [("", held)]
    if isinstance(held, dict):
        items = [(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]", v)
                 for k, v in held.items()]
    elif isinstance(held, list | tuple):
        items = [(f".{i}", v) for i, v in enumerate(held)]
    elif isinstance(held, type):
        items = []
    else:
        items = [(f".{k}", v) for k, v in getattr(held, "__dict__", {}).items()]
    return [(k, v) for k, v in items if isinstance(v, nn.Module)]
