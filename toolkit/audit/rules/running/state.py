"""What the watch records of a running script: :class:`WatchState`, the state every rule
(:mod:`toolkit.audit.rules.running`) reads, with what the rules ask of it (the tensors' names,
which tensors each optimizer steps, the loss at a line) and where they put their findings
(:meth:`WatchState.add`). The hooks that fill it are
:class:`~toolkit.audit.script.session.Watch`'s."""

from __future__ import annotations

import ast
import inspect
import os
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import torch
import torch.overrides
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.record.ledger import Ledger, Source
from toolkit.audit.record.names import held_in
from toolkit.audit.record.tensors import keyed
from toolkit.audit.rules.running.feedback import Feed
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.hard_values import Hard
from toolkit.audit.rules.running.kept_in_sync import Constants, KeptInSync
from toolkit.audit.rules.running.recycling import Recycling
from toolkit.audit.rules.running.zeroed import MadeAt

__all__ = ["Kept", "Replacement", "WatchState"]

_T = TypeVar("_T")

#: this process's id, kept by a fork hook: ``os.getpid()`` is a system call, and the hooks ask
#: at every ``backward()``, step, ``zero_grad()`` and recorded ``.grad`` read
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


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


def _of_the_scripts_class(value: object) -> bool:
    """Whether ``value`` is an instance of a class the user's code defines (not a function, a
    module or a class: their types are the interpreter's)."""
    try:
        return is_user(inspect.getfile(type(value))) and hasattr(value, "__dict__")
    except (TypeError, OSError):
        return False


class Kept(NamedTuple):
    """A value a module keeps as a plain attribute (neither parameter, buffer nor submodule),
    or an item of a plain ``list``, ``tuple`` or ``dict`` it keeps so: see
    :meth:`WatchState.kept_plainly`."""

    network: nn.Module      # the network the module is part of
    root: str               # that network's name in the script
    path: str               # the dotted path in the network: ``cell.alphas``, ``zs.0.z_list.3``
    module: nn.Module
    attr: str
    value: object
    item: bool              # an item of the container at ``attr``, not the attribute itself

    @property
    def name(self) -> str:
        """Its name in the script: ``model.cell.alphas``, ``net.zs.0.z_list.3``."""
        return f"{self.root}.{self.path}"


@dataclass
class ShallowCopy:
    """``copy.copy`` of what holds networks, made by the user's code at ``site``: the networks
    the copy shares (with how it reaches each, ``""`` for a copied module itself, ``".net"``,
    ``".0"``), the event, iteration and optimizer steps when it was made; the
    copy when it is a module (a weak reference); the first step event that stepped one of its
    tensors after it, and whether the copied module was called after that step."""

    site: Site
    networks: list[tuple[str, nn.Module]]
    event: int
    iteration: int
    steps: int
    module: weakref.ref | None = None
    tensors: frozenset[int] = frozenset()
    first_step: int | None = None
    called_after: bool = False


@dataclass(frozen=True)
class Replacement:
    """``module.name``, held by an optimizer as ``old``, set to ``new`` at ``site``; ``no_grad``:
    whether gradient recording was off there; ``spoils``: the first iteration whose update it
    spoils (:func:`~toolkit.audit.rules.running.replaced.noted`)."""

    module: nn.Module
    name: str
    old: torch.Tensor
    new: torch.Tensor
    site: Site | None
    no_grad: bool
    spoils: int
    #: for a submodule replaced whole (``model.top_layer = nn.Linear(...)``): its attribute
    #: on ``module`` and the new submodule, which holds ``new``
    swap: tuple[str, nn.Module] | None = None

    def current(self) -> bool:
        """Whether the module still holds the new tensor there."""
        if self.swap is not None:
            return self.module._modules.get(self.swap[0]) is self.swap[1]
        return self.module._parameters.get(self.name) is self.new


class WatchState:
    """The state of one watched run (see :mod:`toolkit.audit.script.session`)."""

    #: the fixes stage, as the rules ask for it (set by the script's driver)
    fixes: FixWriter

    def __init__(self, steps: int = 2, every: int | None = None, record: bool = False,
                 on_finding=None, follow: int = 0) -> None:
        self.steps, self.every, self.record = steps, every, record
        # auditing the first ``steps`` iterations of each loop: how many iterations past the
        # last audited one the script may run on, looking for a later loop, before it stops
        self.follow = follow
        self.last_audited = steps - 1
        self.on_finding = on_finding
        # the names the script's frames held at the last audited backward, and the user's
        # files by base name: where a finding's function is called (fixes.where_called)
        self.scope: dict = {}
        # of those names, the parameters of the frames' functions (bound by a call, a method's
        # ``self``, not by the script's own assignments)
        self.handed: set[str] = set()
        self.user_paths: dict[str, str] = {}
        self.pid = _PID[0]
        self.iteration = 0
        self.events = 0                 # backward calls and steps, in order
        self.step_events = 0
        self.backwards = 0
        # of them, the script's own torch.autograd.grad calls over tensors an optimizer steps
        self.taken_by_hand = 0
        # what the script's last torch.autograd.grad returned to its code (by id: the tensor
        # weakly, and the ids of the tensors the call was audited as a backward over, None
        # where it was not); the backwards audited from such calls since the last step, each
        # with the leaves it reached and their .grad before it; and the tensors into whose
        # .grad the script wrote a result of a call not audited over them: where it first did
        self.grad_results: dict[int, tuple[weakref.ref, set[int] | None]] = {}
        self.by_hand: list[tuple[Source, dict[int, torch.Tensor],
                                 dict[int, torch.Tensor | None]]] = []
        self.hand_written: dict[int, tuple[torch.Tensor, Site | None]] = {}
        # this iteration's backward() calls that kept their loss from tensors it reaches
        # (``backward(inputs=...)``): what later ones of the iteration share of their graph
        self.kept_to: list[Source] = []
        self.site_events: dict[tuple, int] = {}
        # the site of this iteration's first backward(): the pass's first loss
        self.first_site: tuple | None = None
        # each backward() site (audited once) -> the optimizers holding tensors it writes; each
        # optimizer's index -> the event of its last step
        self.site_optimizers: dict[tuple, frozenset[int]] = {}
        self.optimizer_stepped: dict[int, int] = {}
        self.last_step_event = -1
        self.start_seq: dict[int, int] = {}
        # each iteration's first event: the last step's before it (what its forward does before
        # its first backward() is counted at that step's event)
        self.iteration_began: dict[int, int] = {}
        self.last_step_seq = 0
        # autograd's next number at the last backward() (taken only near audited iterations),
        # and the steps counted when this iteration began: an iteration with no optimizer step
        # (its update written by hand, ``p.data.add_(p.grad, alpha=-lr)``) ends there
        self.backward_seq = 0
        self.steps_at_start = 0
        # an iteration updated by hand, recorded as a step of its own: the gradients its
        # backward() calls left, by the tensors' names (kept while no optimizer exists, or
        # the iteration before ended with none stepped), and whether the last one was such
        self.hand_grads: dict[str, torch.Tensor] = {}
        self.updated_by_hand = False
        self.hand_judged = False    # whether the step audit's rules saw this iteration's loss
        self.ledger = Ledger()
        self.last_step_of: dict[int, int] = {}      # tensor id -> event of its last step
        # tensor id -> (iteration, optimizer index) of the last step that used its gradient
        self.trained_by: dict[int, tuple[int, int]] = {}
        # every iteration's, audited or not: what happened to .grad while nobody looked
        self.stepped_at: dict[int, int] = {}        # tensor id -> event of its last step
        self.cleared_at: dict[int, int] = {}        # tensor id -> event of its last zero_grad
        # the backward() calls (by event) whose gradient the script's code, or a GradScaler,
        # read from .grad before it was cleared (see :mod:`~toolkit.audit.rules.running.lost`)
        self.read_sources: set[int] = set()
        # by backward index: the tensors whose .grad the script read (per tensor, of those)
        self.read_keys: dict[int, set[int]] = {}
        # the index of the optimizer whose step() runs now (a closure's backward() calls run
        # inside it: L-BFGS reads the gradient of each before the closure runs again)
        self.stepping: int | None = None
        # a step handed a closure, judged by :func:`~.at_step.shared` when it returns (the
        # closure writes the gradient it reads): the optimizer's index, it, its tensors, the
        # event of the call, the closure
        self.closure_step: tuple[int, torch.optim.Optimizer, list, int, Any] | None = None
        # the cuts :mod:`~.unread_cut` has judged, by their site
        self.unread_judged: set = set()
        self.reached_at: dict[int, int] = {}        # tensor id -> last backward reaching it
        # over the whole run: the tensors a step found with a gradient; the clears and the
        # freezes (requires_grad_(False)) the script's code made while recorded, by the user's
        # lines of the call (innermost first) -> tensors; whether the watch stopped the script
        # (else it ran to its end)
        self.stepped_with_grad: set[int] = set()
        self.clearing: dict[tuple[tuple[str, int], ...], set[int]] = {}
        self.switching: dict[tuple[tuple[str, int], ...], set[int]] = {}
        self.stopped = False
        # the tensors whose gradient of this iteration a clear under a condition removed (a
        # scheduled freeze: judged over the whole run, not at each step)
        self.scheduled: set[int] = set()
        self.stepped_by: dict[int, dict[int, int]] = {}   # tensor id -> optimizer -> event
        # tensor id -> the step at which a second optimizer first stepped it
        self.second_stepped: dict[int, int] = {}
        self.written_at: dict[int, int] = {}   # tensor id -> the last backward writing its .grad
        self.optimizers: list[torch.optim.Optimizer] = []
        self.built_at: dict[int, Site | None] = {}
        # id(optimizer) -> the events counted when it was built (backward() calls and steps)
        self.built_event: dict[int, int] = {}
        # id(optimizer) -> each parameter group as built: its tensors' dimensions and settings
        self.built_groups: dict[int, list[tuple[tuple[int, ...], dict[str, object]]]] = {}
        # id of each stepped tensor whose storage was compared with the networks' (at_step.views)
        self.storage_checked: set[int] = set()
        # a parameter an optimizer holds, replaced on its module by a new one, by (module id,
        # attribute): see :mod:`~toolkit.audit.rules.running.replaced`
        self.replaced: dict[tuple[int, str], Replacement] = {}
        # every parameter and submodule registered on a module so far, and those registered on
        # a second one (shared: a student given its teacher's layer), with the line that did
        # it and the events counted then (:func:`~toolkit.audit.rules.running.copies.shared`)
        self.registered_once: dict[int, weakref.ref] = {}
        self.shared_at: list[tuple[nn.Module | torch.Tensor, Site, int]] = []
        # leaves made to require grad by the script's lines once an optimizer exists, by id:
        # (the tensor, weakly; the line; under no_grad?; the iteration it spoils first), see
        # the same module
        self.made_leaves: dict[int, tuple[weakref.ref, Site, bool, int]] = {}
        # and for each, the optimizers built by then and the user's frames that made it
        # (:func:`~toolkit.audit.record.frames.scope_lines`); each optimizer's building scope
        self.made_in: dict[int, tuple[int, tuple[tuple[str, int, int], ...]]] = {}
        # the replacing lines already reported (one failure each, whichever optimizer holds
        # the old tensors at the time: a fresh optimizer after each restart is still the line)
        self.replacing_found: set[Site | None] = set()
        # backward index -> the terms of its loss that read a value cut from what the rest of
        # it trains (:mod:`~toolkit.audit.rules.running.cut_terms`)
        self.cut_terms: dict[int, list] = {}
        # where draws a log_prob read met a graph before a step of this iteration (same module)
        self.drawn_met: list[tuple[object, Site, frozenset[int]]] = []
        # gradient clips over tensors with no gradient of the update yet: (site, the ids, the
        # event), judged at the next step (:mod:`~toolkit.audit.rules.running.clipped`)
        self.early_clips: list[tuple[Site, frozenset[int], int]] = []
        self.built_in: dict[int, tuple[str, int]] = {}
        self.findings: dict[tuple, ScriptFinding] = {}
        # findings taken back by what came after them (printed already where watched): each
        # with why (:meth:`withdraw`)
        self.withdrawn: dict[tuple, tuple[ScriptFinding, str]] = {}
        # every backward() call site seen (by its whole stack), and, watching, the iterations
        # audited because a new one began there (a main loop after a warm-up)
        self.sites_seen: set[tuple] = set()
        # module id -> the name a call used -> (with gradients?, the call's site, iteration)
        self.called_as: dict[int, dict[str, set[tuple[bool, Site, int]]]] = {}
        self.trainable_seen: set[int] = set()   # held with requires_grad at some step
        # by optimizer: the tensors each held with requires_grad at one of its own steps
        self.trainable_by: dict[int, set[int]] = {}
        # storage of a no_grad call's output -> (its module's id, the output, the event)
        self.no_grad_out: dict[int, tuple[int, torch.Tensor, int]] = {}
        self.feeds_trained: set[int] = set()    # modules whose no_grad output a network reads
        self.new_loops: set[int] = set()
        self.loop_began = 0   # the event at which the latest loop's first backward() came
        self.loop_began_in = 0   # and the iteration it came in
        # dead findings wait for the next step: a tensor the script then moved itself (an EMA
        # or momentum copy) is not trained by its optimizer on purpose (see _settle)
        self.pending_dead: list[tuple[ScriptFinding, list[tuple[torch.Tensor, torch.Tensor]]]] = []
        #: ``frozen`` findings by optimizer index, held until a later step of that optimizer
        #: finds the tensors switched back on (a freeze for a phase: dropped) or the run ends
        self.pending_frozen: dict[int, tuple[ScriptFinding, list[torch.Tensor]]] = {}
        #: optimizer indices whose pending ``frozen`` finding is a freeze made after the
        #: optimizer was built: reported only once a later step finds part of it undone
        self.phase_frozen: set[int] = set()
        #: by optimizer index: the tensors it held with ``requires_grad`` when built
        self.on_at_build: dict[int, set[int]] = {}
        # id -> (the name it was read by, the event) of each tensor no network holds whose
        # ``.grad`` the script read (a sampler's or an attack's input)
        self.input_reads: dict[int, tuple[str | None, int, tuple[str, int, int] | None]] = {}
        # backward event -> the names of the values the network computes (``retain_grad()``)
        # whose ``.grad`` the script read after it, before the next step: a backward taken
        # for such a value's gradient (LEO's latent codes), and the index of the last backward
        self.retained_reads: dict[int, list[str]] = {}
        self.last_backward = -1
        # id -> the event of the script's last read of the tensor's .grad
        self.grad_read_at: dict[int, int] = {}
        # where a later backward is -> its first backward there, where the script read the
        # sums, and the tensors read whose .grad held the sum of a gradient the script had
        # read and that backward's (:mod:`.summed`)
        self.summed: dict[Site | None, tuple[Source, list[Site], dict[int, torch.Tensor]]] = {}
        # the holders (file, name) of snapshots found aliased (:func:`.copies.snapshots`)
        self.snapshots_found: set[tuple[str, str]] = set()
        #: ids of the new tensors of a submodule replaced again (their replacement explains
        #: the gradient they hold: :func:`~toolkit.audit.rules.running.replaced.noted_module`)
        self.superseded: set[int] = set()
        self.hand_updated: set[int] = set()
        # each module a forward ran of, by id, with the events (backward calls and steps so far)
        # at which it ran, in audited iterations
        self.ran: dict[int, set[int]] = {}
        # of them, the events at which a forward's output had a graph (gradients on, and a
        # tensor it read requires one): a part whose output no loss then read
        self.ran_with_graph: dict[int, set[int]] = {}
        # dead findings with no cut, not moved, judged at the end (rules.dead._idle)
        self.pending_idle: list[tuple[ScriptFinding, list[int]]] = []
        # tensor id -> the first and the last iteration a loss's graph reached it in
        self.reached_in: dict[int, tuple[int, int]] = {}
        # dead findings with a cut, not moved, whose tensors a loss reached in an earlier
        # iteration: judged at the end (rules.dead._now_and_then)
        self.pending_reached: list[tuple[ScriptFinding, list[int]]] = []
        self.step_optimizer: dict[int, int] = {}    # step event -> optimizer index
        # tensors no optimizer steps between a loss and stepped ones -> those optimizers
        self.between: dict[int, set[int]] = {}
        # of them, those in a term of a loss beside terms that train stepped tensors
        self.beside: set[int] = set()
        # tensors no optimizer steps that a loss reaches only through its target
        self.target_side: set[int] = set()
        # leaves a loss reaches that are no Parameter (a plain tensor made to require grad),
        # by id: the tensor and its values when an audited backward first reached it in this
        # iteration (one the script then moves itself is trained by hand, see
        # :mod:`~toolkit.audit.rules.running.unstepped`)
        self.plain_values: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # buffers and plain tensors of networks an optimizer steps, read by the rules of
        # learned tensors kept out of parameters (:mod:`~.not_parameters`), by id: the tensor,
        # its values and the iteration when first seen, kept over the run
        self.kept_seen: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}
        # masks a loss multiplied into a weight of their shape (:mod:`~.masks`), by id (the
        # tensor held so that its id stays its own), kept over the run; those a finding named
        self.masks: dict[int, torch.Tensor] = {}
        self.masks_named: set[int] = set()
        # tensors whose cut output a prediction compared with data is made of
        # (:mod:`~.weighed`), by id, with the iteration
        self.weighed_cuts: dict[int, int] = {}
        # the aliases of data filled in place that a finding named: (file, the alias's name)
        self.fills_found: set[tuple[str, str | None]] = set()
        # per step event: {"iteration", "optimizer", "grads", "names", "idle"}; per iteration
        # updated by hand, the same with "hand": True and no optimizer
        self.grads: list[dict] = []
        # recorded in audited iterations only
        self.roots: dict[int, tuple[nn.Module, str]] = {}
        self.holders: dict[int, tuple[nn.Module, str]] = {}   # networks the roots are part of
        self.call_outputs: list[tuple[object, Site, int]] = []    # output's node, site, event
        # the nodes of call outputs (held by ``call_outputs``, so their ids stay theirs) that
        # the iteration's audited backward calls so far trained stepped tensors through, not
        # as a target (see :mod:`~toolkit.audit.rules.running.targets`)
        self.trained_outputs: set[int] = set()
        # each audited backward of this iteration and the last, by event: its graph, the calls
        # whose outputs it reads (node, the line that made it), the lines (path, number) of
        # those it trains stepped tensors through (for the cut of a leak at its cause,
        # :mod:`~toolkit.audit.rules.running.leak_cause`)
        self.cause_graphs: dict[int, tuple[Any, list[tuple[object, Site]],
                                           set[tuple[str, int]]]] = {}
        self.cause_iteration = self.cause_events = -1
        # a detach's input node, its site, its output (held), event
        self.detaches: list[tuple[object, Site, torch.Tensor, int]] = []
        # copy.copy calls of the user's code on what holds networks
        self.shallow_copies: list[ShallowCopy] = []
        self.copies_by_id: dict[int, ShallowCopy] = {}   # a copied module's, by its id
        # per audited backward: its event and the tensors its graph reaches
        self.reached_by: list[tuple[int, set[int]]] = []
        self.previous_step_event = -1
        # optimizer index -> (the tensors no optimizer holds that the losses of its step
        # reach, the keys of its own tensors, none of which they reach)
        self.misplaced: dict[int, tuple[set[int], tuple[str, ...]]] = {}
        # (iteration, the tensors of ``misplaced`` that only optimizers not stepped yet hold:
        # a later phase's, built up front), for the iteration that found them
        self.held_for_later: tuple[int, set[int]] = (-1, set())
        # optimizer index -> (file, the argument, the names of the optimizers where it is
        # written, by their ids) where the user's code chose it for a helper whose
        # ``step()`` was misplaced (``train(net2, optimizer1)``)
        self.handed_optimizers: dict[int, tuple[str, ast.expr, dict[int, list[str]]]] = {}
        # optimizer index -> (iteration, the tensors it alone holds that kept a loss's gradient
        # past an iteration's end, the backward sites) while it had never stepped: judged at
        # the end of the run (:func:`~toolkit.audit.rules.running.unstepped.never_stepped`)
        self.unused_optimizers: dict[int, tuple[int, int, list[int], tuple[Site, ...]]] = {}
        # each draw of ``Distribution.sample()`` followed since the last step, with the
        # graphs of its distribution's parameters; the values a ``log_prob`` read, by storage
        # (both held, both forgotten at each step: see :mod:`.drawn`)
        self.draws: dict[object, tuple[torch.Tensor, list[object]]] = {}
        self.log_prob_reads: dict[int, torch.Tensor] = {}
        # storage of what a network that trains read -> (the event, the tensor, held)
        self.trained_reads: dict[int, tuple[int, torch.Tensor]] = {}
        # storage of a parameter-free call's output -> (the output, its inputs), held
        self.passed_on: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}
        # tensor id -> (the step event, its values after that step), taken at audited steps:
        # what the script did to it before its next step is its own doing, when that next
        # step is the one after the snapshot's
        self.after_step: dict[int, tuple[int, torch.Tensor]] = {}
        # (module, its call's site, the user's (file, line) from there outwards, the graphs of
        # its inputs, event)
        self.no_grad_calls: list[tuple[nn.Module, Site, list[tuple[str, int]], list, int]] = []
        # the cuts taken as meant, by site (see :mod:`~toolkit.audit.rules.running.meant`)
        self.meant: dict[Site, str] = {}
        # tensors a phase keeps cut by the no_grad branch of the script's own switch, by id
        # (see :mod:`~toolkit.audit.rules.running.dead`)
        self.cut_by_switch: set[int] = set()
        self.clears: list[tuple[Site, set[int]]] = []
        self.prev_audited = False
        self._cleared_sources: set[Source] = set()
        self.module_hook = None
        # reached with a gradient of exact zeros (see :mod:`~toolkit.audit.rules.running.zeroed`):
        # each audited backward's stack by its event, the suspects by the backward that
        # reached them, and the lines the next forward's operations run at
        self.backward_keys: dict[int, tuple] = {}
        self.zero_suspects: dict[tuple, dict[int, tuple[str, torch.Tensor]]] = {}
        self.made_at: MadeAt | None = None
        # target findings whose cut waits for the lines of the next audited forward (see
        # :mod:`~toolkit.audit.rules.running.targets`), by the backward's stack
        self.target_lines: dict[tuple, list[ScriptFinding]] = {}
        # the target findings of this iteration's backwards by their lines: the iteration,
        # the finding, the targets' names, the tensors trained through them
        self.target_passes: dict[tuple, tuple[int, ScriptFinding, tuple[str, ...], dict]] = {}
        # each tensor (by ``id``) a target carried gradient to: the backwards (by event) that did
        self.target_carried: dict[int, set[int]] = {}
        # each finding a rule made, by ``id``: itself (an id outlives no object it holds) and
        # what :meth:`add` reported (placed)
        self.added: dict[int, tuple[ScriptFinding, ScriptFinding]] = {}
        self.zero_judged: set[int] = set()
        # a hard value without its straight-through term (see :mod:`.hard_values`):
        # the suspect calls' (site, argument) with the iteration and step first seen, those
        # judged, the mode that follows values for one iteration (entered after the step of
        # ``hard_since``), and the calls it saw read a hard value
        self.hard_suspects: dict[tuple, tuple[int | None, int]] = {}
        self.hard_judged: set[tuple] = set()
        self.hard: Hard | None = None
        self.hard_since = -1
        self.hard_calls: list[tuple] = []
        # a prediction fed back (see :mod:`.feedback`): each call output's
        # node -> (node, its module, the call's order, event), and the outputs calls read
        self.made_by: dict[int, tuple[object, int, int, int]] = {}
        self.feeds: list[tuple[Feed, int]] = []
        self.call_order = 0
        # an estimate fed back within one iteration (see :mod:`.recycling`)
        self.recycling = Recycling()
        # a copy kept in sync and never read (see :mod:`~toolkit.audit.rules.running.kept_in_sync`):
        # the networks the script's namespaces hold, the constants no_grad calls make, and
        # the no_grad calls (module id, site, the name it is called by) whose constants a
        # loss's graph meets
        self.sync = KeptInSync()
        # on the mode stack where it is now: the modes the script enters nest inside it
        self.constants = Constants(torch._C._len_torch_function_stack())
        # (the first iteration and step event at which each was seen)
        self.fed_constants: dict[tuple, tuple[int, int]] = {}
        # what the user's source says at a site, read once per run (``ast``'s segment splits
        # the whole file again at every call), and the tensors' names while no script code
        # ran (see :meth:`_names`)
        self._said: dict[tuple, object] = {}
        # the last cut the dead rule found, with the tensors its input reaches
        self.reach_cache: tuple[Site, set[int]] | None = None
        self._names_now: dict[int, str] | None = None
        # the networks' sizes, their order and the owner of each tensor, read while neither
        # script code ran nor a parameter or module was registered (:meth:`forget_names`)
        self._now: dict[str, Any] = {}
        # optimizer id -> the names its building line saw (see Watch.optimizer_built)
        self.built_scope: dict[int, dict[str, object]] = {}
        # ``Tensor.grad`` as the hooks install it while an iteration is recorded
        self.grad_property: property | None = None

    def here(self) -> bool:
        """Whether this is the process the watch began in (not a child the script forked)."""
        return _PID[0] == self.pid

    def _once(self, key: tuple, make: Callable[[], _T]) -> _T:
        """``make()``, computed once in this run for ``key`` (what the user's source says at a
        site: the files do not change while the script runs)."""
        try:
            return self._said[key]  # type: ignore[return-value]
        except KeyError:
            value = self._said[key] = make()
            return value

    def progress_conditions(self, lines: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
        """:func:`~toolkit.audit.record.syntax.progress_conditions` of a clear's or a freeze's
        ``lines`` (the user's frames, innermost first), read once per run."""
        return self._once(("conditional", lines), lambda: S.progress_conditions(lines))

    def loss_label(self, site: Site | None) -> str:
        """:func:`_label`, once per site."""
        return self._once(("label", site), lambda: _label(site))

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

    def forget_names(self) -> None:
        """Script code ran, or a network was first called: :meth:`names`, the networks' order
        and their tensors' owners are read again when next asked."""
        self._names_now = None
        self.forget_sizes()

    def forget_sizes(self) -> None:
        """A parameter or a module was registered: the networks' sizes, their order and their
        tensors' owners are read again when next asked."""
        self._now = {}

    def _size(self, module: nn.Module) -> int:
        """How many tensors ``module`` registers, counted once until :meth:`forget_sizes`."""
        sizes = self._now.setdefault("sizes", {})
        n = sizes.get(id(module))
        if n is None:
            n = sizes[id(module)] = sum(1 for _ in module.parameters())
        return n

    def called_networks(self) -> list[tuple[nn.Module, str]]:
        """The modules the user's code called, largest first (an outer call returns after
        the calls inside it: of two as large, the later called first)."""
        ranked = self._now.get("called")
        if ranked is None:
            order = list(self.roots.values())
            ranked = self._now["called"] = [
                order[i] for i in sorted(range(len(order)),
                                         key=lambda i: (-self._size(order[i][0]), -i))]
        return list(ranked)

    def networks(self) -> list[tuple[nn.Module, str]]:
        """The networks the script calls and those that hold them, largest first."""
        ranked = self._now.get("networks")
        if ranked is None:
            holders = [h for k, h in self.holders.items() if k not in self.roots]
            ranked = self._now["networks"] = sorted(holders + self.called_networks(),
                                                    key=lambda r: -self._size(r[0]))
        return list(ranked)

    def kept_plainly(self) -> Iterator[Kept]:
        """What the modules of :meth:`networks` keep in plain attributes, where torch does not
        look (``named_parameters`` and ``state_dict`` miss them): each attribute, and each
        item of a plain ``list``, ``tuple`` or ``dict`` attribute, the largest network first;
        then what the networks the script's names hold keep (the deep Markov model's initial
        state, ``self.h_0``, beside the modules its method ``neg_elbo`` calls, the model
        itself never called), and those its objects hold (:meth:`_held_by_objects`)."""
        seen = set()
        for network, root in [*self.networks(), *self._held_by_names(),
                              *self._held_by_objects()]:
            if id(network) in seen:
                continue
            seen.add(id(network))
            for sub_name, sub in network.named_modules():
                for attr, value in list(vars(sub).items()):
                    path = f"{sub_name}.{attr}" if sub_name else attr
                    yield Kept(network, root, path, sub, attr, value, False)
                    if isinstance(value, list | tuple | dict):
                        items = value.items() if isinstance(value, dict) else enumerate(value)
                        for i, item in items:
                            yield Kept(network, root, f"{path}.{i}", sub, attr, item, True)

    def in_constant_terms(self) -> set[str]:
        """The tensors (by name) that a term of a loss computed as a constant was meant to
        train (the step audit's, where the script's session runs it): none here."""
        return set()

    def names(self) -> dict[int, str]:
        """Each tensor of the networks the script calls, by ``id``, named from the largest
        (``model.0.weight``). Kept until script code runs again (the hooks forget it when
        called): the rules of one step or backward() read it once. Read only."""
        if self._names_now is not None:
            return self._names_now
        names: dict[int, str] = {}
        for module, root in self._listed([*self._held_by_names(), *self.networks()]):
            for n, p in module.named_parameters():
                names.setdefault(id(p), f"{root}.{n}")
        if any(k not in names for k in self.stepped_map()):
            # a network the script's names hold that no call of it showed (run only through
            # ``torch.func.functional_call`` with weights of its own: an unrolled GAN's
            # discriminator): by the name that holds it
            for name, value in list(self.scope.items()):
                if isinstance(value, nn.Module) and not name.startswith("_"):
                    for n, p in value.named_parameters():
                        names.setdefault(id(p), f"{name}.{n}")
                elif isinstance(value, torch.Tensor) and not name.startswith("_"):
                    names.setdefault(id(value), name)   # a leaf held by a name of its own
            # a tensor an optimizer holds as a plain attribute of a module (DARTS's
            # ``self.alphas``, made with requires_grad_()): by that attribute
            for kept in self.kept_plainly():
                if not kept.item and isinstance(kept.value, torch.Tensor) \
                        and not kept.attr.startswith("_"):
                    names.setdefault(id(kept.value), kept.name)
        self._names_now = names
        return names

    def _listed(self, roots: list[tuple[nn.Module, str]]) -> list[tuple[nn.Module, str]]:
        """``roots`` (each network and the name it was called by), those kept in a plain list,
        tuple or dict of the script's and called by a name bound to each in turn (a loop
        variable, ``for member in members``; a name rebound for each new member, a boosting
        stage's ``learner``) named by their place there instead (``members[0]``): the name
        they were called by is another network's too, or no longer theirs."""
        called: dict[str, set[int]] = {}
        for module, root in roots:
            called.setdefault(root, set()).add(id(module))
        out = []
        for module, root in roots:
            if root.isidentifier() and (len(called[root]) > 1
                                        or self.scope.get(root) is not module):
                root = self._element_path(module) or root
            out.append((module, root))
        return out

    def _element_path(self, module: nn.Module) -> str | None:
        """Where a plain list, tuple or dict the script's frames name holds ``module``
        (``members[0]``, ``experts['a']``), or ``None``."""
        return next((place for name, value in list(self.scope.items())
                     if not name.startswith("_")
                     for place, held in held_in(name, value) if held is module), None)

    def name_of(self, t: torch.Tensor) -> str | None:
        """``t``'s name: as a network's tensor (:meth:`names`), else as the script's frames
        hold it (:meth:`bound_name`); ``None`` where neither names it."""
        return self.names().get(id(t)) or self.bound_name(t)

    def bound_name(self, t: torch.Tensor) -> str | None:
        """The name the script's frames hold ``t`` by, at the last audited backward: a name,
        a list's or tuple's element (``codes[3]``), a plain object's attribute
        (``model.weight``)."""
        for name, value in self.scope.items():
            if name.startswith("_"):
                continue
            if value is t:
                return name
            if isinstance(value, list | tuple):
                i = next((i for i, v in enumerate(value) if v is t), None)
                if i is not None:
                    return f"{name}[{i}]"
            elif not isinstance(value, type | nn.Module | torch.Tensor) and \
                    hasattr(value, "__dict__") and not callable(value):
                attr = next((a for a, v in vars(value).items() if v is t), None)
                if attr is not None:
                    return f"{name}.{attr}"
        return None

    def _held_by_names(self) -> list[tuple[nn.Module, str]]:
        """The networks the script's names hold where it calls ``backward()`` (a global
        ``student`` whose method ``embed_tokens`` calls ``self.embed``, so that its tensors
        are ``student.embed.weight`` and ``student.pos``, not ``self.embed.weight``), those that
        hold a network the script calls, largest first."""
        called = {id(m) for m, _ in self.called_networks()}
        held = []
        for name, value in list(self.scope.items()):
            if isinstance(value, nn.Module) and not name.startswith("_") and \
                    any(id(m) in called for m in value.modules()):
                held.append((value, name))
        return sorted(held, key=lambda r: -self._size(r[0]))

    def _held_by_objects(self) -> list[tuple[nn.Module, str]]:
        """The networks that objects of the script's own classes, no modules themselves,
        hold as attributes (CURL's agent, whose ``curl`` module is never called, its methods
        ``encode`` and ``compute_logits`` are): those that hold a network the script calls,
        named by the object's name and the attribute (``agent.curl``)."""
        called = {id(m) for m, _ in self.called_networks()}
        held = []
        for name, value in list(self.scope.items()):
            if name.startswith("_") or isinstance(value, nn.Module) or \
                    not _of_the_scripts_class(value):
                continue
            for attr, sub in list(vars(value).items()):
                if isinstance(sub, nn.Module) and any(id(m) in called for m in sub.modules()):
                    held.append((sub, f"{name}.{attr}"))
        return held

    def owner(self, key: int) -> nn.Module | None:
        """The largest network the user's code called that holds the tensor ``key``."""
        owners = self._now.get("owners")
        if owners is None:
            owners = self._now["owners"] = {}
            for module, _ in self.called_networks():
                for p in module.parameters():
                    owners.setdefault(id(p), module)
        return owners.get(key)

    def add(self, finding: ScriptFinding) -> None:
        made = finding
        finding = self.fixes.placed(finding, self.scope, self.user_paths)
        if finding.key in self.findings:
            return
        self.findings[finding.key] = finding
        self.added[id(made)] = (made, finding)
        if self.on_finding is not None:
            self.on_finding(finding)

    def withdraw(self, key: tuple, why: str) -> None:
        """The finding under ``key`` taken back, ``why`` kept: a finding printed as the run
        went is withdrawn by name at its end, not dropped in silence."""
        finding = self.findings.pop(key, None)
        if finding is not None:
            self.withdrawn[key] = (finding, why)

    def optimizer_text(self, index: int, site: Site | None) -> str | None:
        """The optimizer's expression at its step's ``site``, in backquotes."""
        built = self.built_at.get(id(self.optimizers[index])) if index < len(
            self.optimizers) else None

        def read() -> str | None:
            if site is None:
                return None
            return S.receiver(site.path, site.span, self.assigned(built))

        text = self._once(("receiver", site, built), read)
        return f"`{text}`" if text else None

    def assigned(self, built: Site | None) -> str | None:
        """The name the line ``built`` (an optimizer's) assigns, read once per line."""
        return None if built is None else self._once(
            ("assigned", built), lambda: S.assigned_name(built.path, built.line))

    def of_earlier_loops(self) -> set[int]:
        """Indices of the optimizers that stepped, all before the latest loop began (a phase's
        optimizer, the script's next phase training with another): what only they hold is
        stepped by none in this loop."""
        return {i for i, e in self.optimizer_stepped.items() if -1 < e < self.loop_began}

    def keyed_map(self) -> dict[int, str]:
        """Each tensor an optimizer holds, by ``id``, with its key in the report
        (:func:`~toolkit.audit.record.tensors.keyed`: ``opt0.0.3``)."""
        return {id(p): k for i, o in enumerate(self.optimizers) for k, p in keyed(i, o)}

    def stepped_map(self) -> dict[int, int]:
        """Each tensor an optimizer holds, by ``id``, with that optimizer's index."""
        return {id(p): i for i, o in enumerate(self.optimizers) for g in o.param_groups
                for p in g["params"]}
