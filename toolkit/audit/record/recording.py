"""What the step audit records while it runs a step: names, cuts, writes, and module state.

:func:`toolkit.audit.audit_step` runs the user's step twice inside :class:`Recording`, which

- names tensors (:mod:`toolkit.audit.record.names`): every parameter (and buffer) of the modules
  it is given or finds in the step, by module path, then the optimizers' remaining parameters by
  position;
- records, through :class:`~toolkit.audit.record.calls.CallWatch` (a torch-function mode), the
  cuts that leave no node in the backward graph: ``detach()`` / ``detach_()`` / ``.data`` of a tensor with a graph, a watched
  parameter read under ``torch.no_grad()``, ``requires_grad_(False)``, and in-place writes to a
  watched parameter (an EMA update, a hard copy);
- notes every ``optimizer.step()`` the step calls itself (torch's global optimizer hooks):
  its update is no write of the step's own, and the snapshot saves the optimizer first;
- maps the output node of every named module call to the module (a global forward hook), so
  that paths and cuts name modules;
- marks every toolkit cut (``trace_cuts``) and every *disabled* named block with a node carrying
  its name;
- patches a few classes (:mod:`toolkit.audit.record.patches`): the lines that keep a tensor
  with a graph in a module's attribute, the threads the step starts, what a reentrant
  checkpoint reads, the state of schedulers and ``GradScaler`` before the step moves it;
- takes the sequence number autograd gives each new node before each call, so that nodes made
  before the second call are recognisable in its graph.

With a :class:`~toolkit.audit.record.state.StateSnapshot` it copies each parameter the step is
about to write in place, so that the audit can put it back.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from toolkit._utils.trees import tree_map
from toolkit.audit.record.calls import (
    CallWatch,
    Edge,
    caller_text,
    fed_leaves,
    storage_key,
    tensors_in,
)
from toolkit.audit.record.names import Names
from toolkit.audit.record.patches import ClassPatches
from toolkit.audit.record.sites import (
    Line,
    forget_lines,
    grad_off_block,
    line_of,
    step_frame,
    step_line,
    user_frame,
    user_line,
    user_lines,
    user_stack,
)
from toolkit.audit.record.source import operand_holding
from toolkit.audit.record.state import StateSnapshot
from toolkit.core.stop_gradient import observe_cuts
from toolkit.lens.backward_graph import trace_cuts

__all__ = ["Edge", "Recording", "Write", "is_open_marker"]

_LOSSES = (nn.modules.loss._Loss,)  # every torch loss module (MSELoss, KLDivLoss, …)
# --- naming ----------------------------------------------------------------------------------------


# --- cuts that leave no node -----------------------------------------------------------------------


class _OpenMarker(torch.autograd.Function):
    """Identity forward and backward; its node names a disabled block (``ctx.block``)."""

    @staticmethod
    def forward(x: torch.Tensor, name: str | None) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.block = inputs[1]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def is_open_marker(node: Any) -> bool:
    """Whether an autograd node marks a disabled named block (made inside :class:`Recording`)."""
    return getattr(type(node), "_forward_cls", None) is _OpenMarker


def _open(x: Any, name: str | None) -> Any:
    return tree_map(lambda t: _OpenMarker.apply(t, name)
                    if isinstance(t, torch.Tensor) and t.requires_grad else t, x)


@dataclass
class Write:
    """In-place writes of one watched tensor by the step (an EMA update, a hard copy, ...).

    ``module``: the named module whose forward was running (``None``: the step itself);
    ``ops``: the writing functions in order (``"lerp"``, ``"copy"``, ``"__set__"`` for
    ``.data = ...``); ``sources``: the other watched tensors the written values were computed
    from; ``self_involved``: the new value depends on the old one (``mul_``, ``lerp_``, or a
    copy of an expression that reads it); ``copy_of``: the one tensor it was set to an exact
    copy of (``load_state_dict``), if so.
    """

    module: str | None
    ops: list[str] = field(default_factory=list)
    sources: frozenset[int] = frozenset()
    self_involved: bool = False
    copy_of: int | None = None

    @property
    def is_average(self) -> bool:
        """The new value mixes the old one with other tensors (an EMA or soft update)."""
        return self.self_involved and bool(self.sources) and self.copy_of is None


def _keywords(module: nn.Module) -> dict[str, Any]:
    """The keyword arguments of the call of ``module`` under way: a forward pre-hook sees only
    the positional ones, so they are read from ``Module._call_impl``'s frame."""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        if frame.f_code.co_name == "_call_impl" and frame.f_locals.get("self") is module:
            found = frame.f_locals.get("kwargs")
            return dict(found) if isinstance(found, dict) else {}
        frame = frame.f_back
    return {}


def _nested(value: Any, depth: int = 3) -> list[torch.Tensor]:
    """The tensors ``value`` is or holds in lists and tuples, ``depth`` levels deep."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and depth > 0:
        return [t for x in value for t in _nested(x, depth - 1)]
    return []


class Recording:
    """The context in which the audit runs the step: marks, hooks and the record of cuts.

    ``with recording:`` activates :func:`~toolkit.lens.trace_cuts` (toolkit cuts become named
    marker nodes), the disabled-block markers, the torch-function mode and the forward hook;
    :meth:`next_call` is called before each call of the step.
    """

    def __init__(self, names: Names, watched: Mapping[int, torch.Tensor],
                 snapshot: StateSnapshot | None = None, *, step_hooks: bool = True) -> None:
        self.names = names
        # whether it hooks optimizer.step() (a step that calls it inside the recording); a
        # script's watch leaves the recording before each step instead
        self.step_hooks = step_hooks
        self.snapshot = snapshot
        self.watched = dict(watched)
        self.storage = {storage_key(t): key for key, t in self.watched.items()}
        self.storage.pop(None, None)
        self.call = 0
        self.marks: list[int] = []
        # call -> thread name -> what the step ran in a thread other than the audit's (the
        # user's line that started it, the modules whose forward ran there): autograd numbers
        # each thread's nodes apart and the torch-function mode is this thread's alone
        self.thread = threading.get_ident()
        self.threads: dict[int, dict[str, list[str]]] = {}
        # (call, the tensor cut, its shape, how: ".detach()", ".detach_()" or ".data")
        self.detached: list[tuple[int, Edge, tuple[int, ...], str]] = []
        self.leaf_detached: dict[int, str] = {}
        self.no_grad: dict[int, str] = {}
        # ("no_grad", id(watched)) -> the user's call of a library that switched gradients
        # off without the argument that names what its backward trains (odeint_adjoint)
        self.library_calls: dict[tuple[str, int], Any] = {}
        self.used: set[int] = set()
        # (call, tensors that require grad, the user's line): torch.tensor(...) of them, which
        # copies their values and none of their graph
        self.value_copies: list[tuple[int, list[torch.Tensor], Line | None]] = []
        # (call, the operand subtracted, the user's line, where the user's frames hold it): a
        # difference without a graph of two views of one watched tensor's elements, zero
        # whatever its values (a snapshot that shares its storage with the weights)
        self.alias_differences: list[tuple[int, torch.Tensor, Line | None,
                                           list[tuple[str, str]]]] = []
        # a write without a graph into a watched tensor of a value read from a view of its
        # own elements that the script holds (a snapshot restored that is no copy), as above
        self.alias_restores: list[tuple[int, torch.Tensor, Line | None,
                                        list[tuple[str, str]]]] = []
        # (call, the tensor, the user's line): a write without a graph into a watched tensor
        # of a value computed from that tensor itself as another operand (an EMA update
        # whose copy and source are one network's tensors)
        self.alias_moves: list[tuple[int, torch.Tensor, Line | None]] = []
        # id -> (weak result, the snapshot view it was computed from), within a call
        self.from_snapshot: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
        # the same for any value computed without a graph (of ``.data`` views, gradients on)
        self.from_view: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
        # (call, the edges read, the function, the user's line, whether it also returned
        # values with a graph): an operation of the step's own code whose result is an integer
        # or boolean tensor made from values with a graph (argmax, a comparison; max(dim=)
        # with its values): their values go on, their gradient does not
        self.integer_results: list[tuple[int, list[Edge], str, Line | None, bool]] = []
        self.grad_read: set[int] = set()  # watched tensors read by a torch call with grad on
        self.written: dict[int, str] = {}
        self.frozen: set[int] = set()
        # id(node) -> [node, innermost module, outermost module, shape, position in the
        # outermost module's output ("[1][0]" for h of (output, (h, c)))]
        self.outputs: dict[int, list[Any]] = {}
        # id(node) -> every module whose call returned it, innermost first ("critic.l3", "critic")
        self.returned_by: dict[int, list[str]] = {}
        # id(node) -> (node, module name) for tensors with a graph passed into a module call
        self.inputs: dict[int, tuple[Any, str]] = {}
        # id(node) -> node: weights with a graph that a layer function read (computed weights)
        self.computed: dict[int, Any] = {}
        # id(leaf) -> (leaf, how and where it was made to require grad) for tensors of the step
        self.origin: dict[int, tuple[torch.Tensor, str]] = {}
        # id(watched) -> Write: how the step wrote it in place, from what, inside which module
        self.writes: dict[int, Write] = {}
        # where in the step's code ("at model.py:42 (forward)"): ("detach", call, id(node)),
        # ("detach", id(leaf)), ("no_grad", id(watched)), ("call", call, module name)
        self.sites: dict[tuple[Any, ...], str] = {}
        # the same places as lines of the user's code (:class:`~toolkit.audit.record.sites.Line`)
        self.lines: dict[tuple[Any, ...], Line | None] = {}
        # id(node) -> (node, the step's lines that read it): tensors made before this call
        self.old_reads: dict[int, tuple[Any, list[Line]]] = {}
        # id(node) -> (node, [(the innermost user line of each operation that read it, which
        # of that line's operands held it, or None)]): the readers a cut can go before
        self.old_readers: dict[int, tuple[Any, list[tuple[Line, int | None]]]] = {}
        # id(detached tensor) -> (weak reference, what it was cut from, the line of the cut)
        self.detached_out: dict[int, tuple[Any, Edge, Line | None]] = {}
        # (call, module) -> [(what a detached input was cut from, the line)]: a module fed a
        # detached tensor (D(G(z).detach()))
        self.detached_into: dict[tuple[int, str], list[tuple[Edge, Line | None]]] = {}
        # id(node) -> (node, line): tensors with a graph assigned to a module's attribute
        self.assigned: dict[int, tuple[Any, Line]] = {}
        # (call, id(node)) -> (node, module): the first module that call handed it to
        self.inputs_now: dict[tuple[int, int], tuple[Any, str]] = {}
        # id(tensor) -> (weak reference, what was cut, where the step's code first read the
        # detached value, the nodes of every cut behind it): a tensor computed, without
        # graph, from detached ones
        self.from_detached: dict[int, tuple[Any, Edge, tuple[Line, int] | None,
                                            frozenset[int]]] = {}
        # (call, what was cut, the node that read it with a graph, (the step's line that first
        # read the detached value, which operand there)): where a detached value re-enters a
        # graph (D(torch.cat((A, G(A).detach()), 1))): the losses a removed cut would reach
        self.detached_reads: list[tuple[int, Edge, Any, tuple[Line, int] | None]] = []
        # id of the node a ``.detach()`` cut, where a layer function (``F.linear``,
        # ``F.conv2d``) read the detached value as its weight: generated weights, which are
        # the prediction, never a target
        self.cut_weights: set[int] = set()
        # id(node) -> (node, the user's frames there, kind): where a tensor with a graph was
        # made, innermost line first: "op" (an operation of the step's own code), "module"
        # (the outermost module call), "inner" (inside a module's forward: a line every
        # caller of it runs)
        self.made: dict[int, tuple[Any, tuple[Line, ...], str]] = {}
        # id(node) -> (node, the user's line): a tensor made by the user's own code inside a
        # named module's forward (where ``made`` keeps the call of the module that returned it)
        self.made_inside: dict[int, tuple[Any, Line]] = {}
        # (path, line number) -> every node made there (a line in a loop makes one per pass)
        self.made_at: dict[tuple[str, int], list[Any]] = {}
        # id(node) -> [(node, module, the user's frames, first sequence number of the call,
        # whether the step's own code made the call)]: tensors with a graph handed to a named
        # module (netD(fake)), and the lines that led there
        self.handed: dict[int, list[tuple[Any, str, tuple[Line, ...], int, bool]]] = {}
        # (module, first sequence number of a call that was handed a tensor) -> the first
        # sequence number after it returned: a node numbered from there on was made outside it
        self.call_ends: dict[tuple[str, int], int] = {}
        # id(node) -> the graph node of each positional argument (``None`` for one without)
        # of the step's own torch call that made it (``F.cosine_similarity(p, z)``: the nodes
        # of p and z): which argument a node read inside that call came in by
        self.operands: dict[int, tuple[Any, ...]] = {}
        self._starts: list[int] = []  # the first sequence number of each call in ``calling``
        # (id(node), path, line number, span of the call) -> the position of the positional
        # argument that held it (``netD(fake)``: 0; ``model(x, hidden)`` with hidden = [(h,
        # c)]: 1) at the user's line that called a named module
        self.arguments: dict[tuple[Any, ...], int | str] = {}
        # id(watched) -> the lines that wrote it in place from a tensor with a graph
        self.graph_writes: dict[int, list[Line]] = {}
        # id(tensor without graph) -> (weak reference, watched ids it was computed from, exact copy)
        self._made_from: dict[int, tuple[Any, frozenset[int], int | None]] = {}
        self.calling: list[str] = []  # the named modules whose forward is running, innermost last
        self.called_inside: dict[str, set[str]] = {}  # module -> modules whose forward called it
        self.first_none: dict[tuple[int, str], bool] = {}  # (module, attribute) -> None before
        # id(node) -> (node, watched ids read): a reentrant checkpoint runs its function with
        # gradients off and again in backward, so what it reads hangs off its node unseen
        self.checkpoints: dict[int, tuple[Any, set[int]]] = {}
        self._checkpointing: list[set[int]] = []  # the reads of the checkpoints running now
        # id(gradient) -> (weak reference, the user's line of the torch.autograd.grad call,
        # id of the tensor it is the gradient of): gradients taken without create_graph=True,
        # constants to any later graph, and what was computed from them without a graph
        self.first_order: dict[int, tuple[Any, Line | None, int]] = {}
        # the line of such an autograd.grad call -> the line that combined, with gradients on,
        # its result with the tensor it is the gradient of (an inner loop's p - lr * g)
        self.first_order_used: dict[Line | None, Line | None] = {}
        # (call, the nodes of the values such a call differentiated, its line): what the
        # tensors behind those values compute reaches the loss only as a gradient without graph
        self.first_order_calls: list[tuple[int, list[Edge], Line | None]] = []
        # id(node) -> node: the nodes autograd made for a derivative taken with its graph
        # (``torch.autograd.grad(..., create_graph=True)``): its formula, not the user's code
        self.derivatives: dict[int, Any] = {}
        # (call, the line of such an autograd.grad call, the line that added a scalar made from
        # its gradient to one with a graph, the names the user's code gives such scalars, the
        # id of the sum's node): a term of a loss that is a constant (a gradient penalty
        # that trains nothing), and whether the term is a scalar (else added element for
        # element)
        self.first_order_added: list[tuple[int, Line | None, Line | None, tuple[str, ...],
                                           int, bool]] = []
        # id(tensor) -> (a weak reference to it, its cuts): a network's output cut, and every
        # value computed from cut ones without a graph; each cut is (where the value was cut,
        # how: "no_grad" for a network's output computed under torch.no_grad(), "detach" for
        # one .detach()ed, what it would have trained through: the network's parameters, or
        # the node cut)
        self.cut_values: dict[int, tuple[Any, tuple[tuple[Line | None, str, Any], ...]]] = {}
        # the origins of the cuts a no_grad block made of values with a graph (calls.py)
        self.block_origins: list[tuple[torch.Tensor, ...]] = []
        # those of blocks inside a module's forward (read only by the dead rule)
        self.inside_origins: list[tuple[torch.Tensor, ...]] = []
        # (call, the cuts, the user's line that added it, the sum's node, whether the sum is
        # a scalar, whether a module's forward made the sum): cut values added to one with a
        # graph (a term of a loss), a scalar or element for element
        self.cut_added: list[tuple[int, tuple[tuple[Line | None, str, Any], ...],
                                   Line | None, int, bool, bool]] = []
        # (call, the cuts, the user's line, the torch function, the node): cut values read by
        # an operation whose result has a graph (a query's similarity to cut keys, a
        # prediction compared with a cut target)
        self.cut_read: list[tuple[int, tuple[tuple[Line | None, str, Any], ...], Line | None,
                                  str, int]] = []
        # (the cuts, the user's line): cut values read by an operation together with a
        # tensor that trains (a layer's weight): a forward that goes on from a cut value
        self.cut_fed: list[tuple[tuple[tuple[Line | None, str, Any], ...], Line | None]] = []
        # (call, the user's line, the difference's node): a value subtracted from itself with
        # its graph (one node on both sides, or one computation run twice): zero whatever the
        # weights, and so is its gradient
        self.self_differences: list[tuple[int, Line | None, int]] = []
        # (call, the user's line, the sum's node, the operand that is the difference): a value
        # added to a difference that subtracts it, with one graph (``z + (z_q - z)``, a
        # straight-through estimator without its cut): its gradient through the sum cancels
        self.cancelled: list[tuple[int, Line | None, int, int]] = []
        # (the grad-off ``with`` line of a no_grad cut, id of the network's first parameter)
        # -> the user's line that called the network there, its last call in the block
        self.cut_callers: dict[tuple[Line | None, int], Line | None] = {}
        # of their nodes, those whose result has no more elements than an operand: each value
        # read against one other (a reconstruction's difference to its input), none broadcast
        # against several (a query's distance to every key)
        self.one_to_one: set[int] = set()
        # of their nodes, the differences that are zero everywhere (``x - x.detach()``: GRPO's
        # ratio, DiCE's magic box, a value read against its own cut copy)
        self.zero_reads: set[int] = set()
        # and those to one cut value broadcast against many (a reference point: KTO's KL)
        self.reference_reads: set[int] = set()
        # ``.detach()`` (or ``.data``) of data the step's own code holds, by the result's id:
        # the result, what it was taken from, how, and where (it shares that storage); those
        # of them filled in place since with fresh values (``noise.normal_()``), by the id of
        # what they were taken from; and each read of such a tensor after the fill: (what it
        # was taken from, how, the detach's line, the fill's, the name of an alias found by
        # its storage, the read's)
        self.aliases: dict[int, tuple[Any, Any, str, Line | None]] = {}
        self.filled: dict[int, tuple[Any, str, Line | None, Line | None, str | None]] = {}
        # tensors the script bounds in place (``clamp_``) that no optimizer holds, by storage
        # and shape: the tensor and where (kept over the run)
        self.bounded: dict[tuple[int, tuple[int, ...]], tuple[Any, Line | None]] = {}
        self.filled_reads: list[tuple[Any, str, Line | None, Line | None, str | None,
                                      Line | None]] = []
        # id(frame) -> (the frame of torch's Module._call_impl that runs a module call's hooks,
        # the user's stack there): read by the pre-hook, kept for the forward hook
        self._stacks: dict[int, tuple[FrameType, tuple[Line, ...]]] = {}
        self.busy = False
        # optimizer.step() calls running now (the step updates the weights itself): what they
        # read and write is the update, not the step's graph
        self.stepping = 0
        # id(optimizer) -> (its class name, the user's line that called its step())
        self.optimizer_steps: dict[int, tuple[str, Line | None]] = {}
        self._stack = contextlib.ExitStack()
        # paused by :meth:`suspend`: the hooks stay, each passing its call through
        self.suspended = False
        # the classes' patches, installed by :meth:`hold_patches` or else by each entry
        self.patches = ClassPatches(self)
        self._held = False
        self._calls: CallWatch | None = None

    def updated_twice(self) -> set[int]:
        """``id`` of the tensors the step writes in place from *other* trained tensors (a
        parameter, or a tensor that requires grad): an EMA or a copy of another network.

        Such a write on a tensor an optimizer also steps updates it twice, by the gradient and
        by the write. A write from the tensor itself and constants (weight clipping's
        ``clamp_``, a projection or a renormalisation, a pruning mask) only constrains what the
        optimizer stepped: a note, not a finding.
        """
        out = set()
        for key, write in self.writes.items():
            sources = [self.watched.get(i) for i in write.sources]
            if any(t is not None and (isinstance(t, nn.Parameter) or t.requires_grad)
                   for t in sources):
                out.add(key)
        return out

    def watch(self, tensors: list[torch.Tensor]) -> None:
        """Watch more tensors from now on (and put them back with the snapshot)."""
        for t in tensors:
            self.watched.setdefault(id(t), t)
            if self.snapshot is not None:
                self.snapshot.track(t)
            if storage_key(t) is not None:
                self.storage.setdefault(storage_key(t), id(t))

    def _sources(self, t: torch.Tensor) -> tuple[frozenset[int], int | None]:
        """The watched tensors ``t`` was computed from, and the one it is an exact copy of."""
        key = id(t)
        if key in self.watched:
            return frozenset((key,)), key
        entry = self._made_from.get(key)
        if entry is None or entry[0]() is not t:
            return frozenset(), None
        return entry[1], entry[2]

    def trace(self, out: Any, inputs: list[Any], *, exact: bool) -> None:
        """Remember which watched tensors a result without graph was computed from."""
        if not isinstance(out, torch.Tensor):
            return
        sources: frozenset[int] = frozenset()
        copy_of = None
        for t in inputs:
            if isinstance(t, torch.Tensor):
                found, same = self._sources(t)
                sources |= found
                copy_of = same if exact and len(inputs) == 1 else None
        if sources:
            self._made_from[id(out)] = (weakref.ref(out), sources, copy_of)

    def note_alias(self, out: torch.Tensor, source: torch.Tensor, how: str) -> None:
        """``out = source.detach()`` (or ``.data``) of data, in the step's own code."""
        if len(self.aliases) > 256:
            self.aliases = {k: v for k, v in self.aliases.items() if v[0]() is not None}
        self.aliases[id(out)] = (weakref.ref(out), weakref.ref(source), how, user_line(3))

    def note_fill(self, target: Any) -> None:
        """``target`` filled in place with fresh values: where it is such an alias, what it
        was taken from now holds them. An alias taken before the recording began is found by
        the names of the step's own frame: another tensor it binds with the same storage,
        offset, shape and strides (``noise`` and ``net_input_saved``, of
        ``noise = net_input_saved.detach()`` run before the optimizer was built)."""
        if not isinstance(target, torch.Tensor):
            return
        entry = self.aliases.get(id(target))
        source = entry[1]() if entry is not None and entry[0]() is target else None
        if source is not None and source is not target:
            self.filled[id(source)] = (entry[1], entry[2], entry[3], user_line(3), None)
            return
        frame = step_frame(3) if not self.calling else None
        if frame is None:
            return
        names = {**frame.f_globals, **frame.f_locals}
        alias = next((n for n, v in names.items() if v is target), None)
        if alias is None:
            return
        for value in names.values():
            if isinstance(value, torch.Tensor) and value is not target and \
                    not value.requires_grad and value.shape == target.shape and \
                    value.data_ptr() == target.data_ptr() and \
                    value.stride() == target.stride():
                self.filled[id(value)] = (weakref.ref(value), ".detach()", None, user_line(3),
                                          alias)

    def note_bound(self, target: Any) -> None:
        """``target.clamp_(...)``: kept where no optimizer holds its storage and it does not
        require grad (a learned value bounds itself as a parameter)."""
        if isinstance(target, torch.Tensor) and not target.requires_grad and \
                target.is_floating_point() and id(target) not in self.watched and \
                self.storage.get(storage_key(target)) is None:
            self.bounded.setdefault((target.data_ptr(), tuple(target.shape)),
                                    (weakref.ref(target), user_line(3)))

    def note_filled_reads(self, inputs: list[torch.Tensor]) -> None:
        """A call of the step's reads ``inputs``: those filled through an alias are read."""
        for t in inputs:
            entry = self.filled.get(id(t))
            if entry is not None and entry[0]() is t:
                self.filled_reads.append((*entry, user_line(3)))
                del self.filled[id(t)]

    def cuts_behind(self, t: torch.Tensor) -> frozenset[int]:
        """The nodes (by ``id``) every ``.detach()`` of this call cut whose output ``t`` is,
        or was computed from without a graph (``torch.cat`` of detached blocks)."""
        cut = self.detached_out.get(id(t))
        if cut is not None and cut[0]() is t and t.grad_fn is None:
            return frozenset({id(cut[1].grad_fn)})
        entry = self.from_detached.get(id(t))
        return entry[3] if entry is not None and entry[0]() is t else frozenset()

    def note_detached_reads(self, out: Any, inputs: list[torch.Tensor]) -> None:
        """Follow values computed from a detached tensor of this call: to each result without
        graph, and into each result with one (the node that reads it, filed with where the
        step's own code first read the detached value)."""
        found = None
        for t in inputs:
            cut = self.detached_out.get(id(t))
            if cut is not None and cut[0]() is t and t.grad_fn is None:
                frame = step_frame(3)
                read = None
                if frame is not None:
                    line = line_of(frame)
                    position = operand_holding(line, frame, t)
                    read = None if position is None else (line, position)
                found = (cut[1], read)
                break
            entry = self.from_detached.get(id(t))
            if entry is not None and entry[0]() is t:
                found = entry[1:3]
                break
        if found is None:
            return
        behind = frozenset().union(*(self.cuts_behind(t) for t in inputs))
        for o in tensors_in([out]):
            if o.grad_fn is None:
                self.from_detached[id(o)] = (weakref.ref(o), *found, behind)
            else:
                self.detached_reads.append((self.call, found[0], o.grad_fn, found[1]))

    def note_old_reads(self, inputs: list[torch.Tensor]) -> None:
        """Remember the step's own line that reads a tensor made before this call (a state
        carried from the previous step), once per line."""
        mark = self.marks[-1]
        for t in inputs:
            node = t.grad_fn
            if node is not None and node._sequence_nr() < mark:
                line = step_line()
                reads = self.old_reads.setdefault(id(node), (node, []))
                if line is not None and reads[0] is node and line not in reads[1]:
                    reads[1].append(line)
                frame = user_frame()
                readers = self.old_readers.setdefault(id(node), (node, []))
                if frame is not None and readers[0] is node:
                    inner = line_of(frame)
                    if not any(x == inner and x.span == inner.span for x, _ in readers[1]):
                        readers[1].append((inner, operand_holding(inner, frame, t)))

    def inside_forward(self, cuts: tuple) -> bool:
        """Whether every one of ``cuts`` (``(line, how, origin)``) was made by a ``no_grad``
        block inside a module's forward (the module's own stop-gradient: SuperLoss's
        confidence), which only the dead rule reads."""
        return all(any(origin is o for o in self.inside_origins) for _, _, origin in cuts)

    def note_made(self, out: Any) -> None:
        """Remember the user's line that made each tensor with a graph in ``out`` (the step's
        own operations, and the outputs of the outermost module calls)."""
        tensors = [out] if isinstance(out, torch.Tensor) else (
            [t for t in out if isinstance(t, torch.Tensor)] if isinstance(out, (tuple, list))
            else [])
        stack: tuple[Line, ...] | None = None
        for t in tensors:
            if t.grad_fn is not None:
                stack = user_stack() if stack is None else stack
                if stack:
                    self._made(t.grad_fn, stack, "inner" if stack[0].inside else "op")

    def note_made_inside(self, out: torch.Tensor) -> None:
        """Remember the user's line, inside a module's forward the user wrote, that made
        ``out`` (:attr:`made_inside`)."""
        line = user_line()
        if line is not None:
            self.made_inside[id(out.grad_fn)] = (out.grad_fn, line)

    def _made(self, node: Any, stack: tuple[Line, ...], kind: str) -> None:
        self.made[id(node)] = (node, stack, kind)
        self.made_at.setdefault((stack[0].path, stack[0].number), []).append(node)

    def note_write(self, key: int, op: str, inputs: list[torch.Tensor], *,
                   self_involved: bool) -> None:
        """Record an in-place write of the watched tensor ``key`` (and copy it first)."""
        if ("write", key) not in self.lines:
            self.lines[("write", key)] = user_line(installed=True)
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):  # a graph
            line = user_line(installed=True)
            lines = self.graph_writes.setdefault(key, [])
            if line is not None and not any(x == line and x.span == line.span for x in lines):
                lines.append(line)
        op = op.strip("_") or op
        self.written.setdefault(key, op)
        write = self.writes.setdefault(key, Write(self.calling[-1] if self.calling else None))
        write.ops.append(op)
        for t in inputs:
            found, same = self._sources(t)
            write.sources |= found - {key}
            if key in found:
                self_involved = True
            if not self_involved and same is not None and same != key and len(inputs) == 1:
                write.copy_of = same
        write.self_involved |= self_involved
        if self.snapshot is not None:
            self.snapshot.before_write(key)

    def _other_thread(self, module: nn.Module) -> bool:
        """Whether this hook runs outside the audit's thread (noted, nothing else recorded:
        the recording's state belongs to its own thread)."""
        if threading.get_ident() == self.thread:
            return False
        ran = self.threads.setdefault(self.call, {}).setdefault(
            threading.current_thread().name, [])
        label = self._label(module) or type(module).__name__
        if label not in ran:
            ran.append(label)
        return True

    def _hook(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.suspended or self._other_thread(module):
            return
        label = self._label(module)
        if label is None:
            return
        if self.calling and self.calling[-1] == label:
            self.calling.pop()
            start = self._starts.pop() if self._starts else 0
            if start:
                self.call_ends[label, start] = self.sequence()
        self.busy = True
        trained = () if self.calling or torch.is_grad_enabled() else tuple(
            p for p in module.parameters() if p.requires_grad)
        if not self.calling and not torch.is_grad_enabled():
            # and what its inputs were computed from with a graph (BEAR's actor, whose
            # actions the critic scores): the call cuts their path to the loss too
            own = {id(p) for p in trained}
            trained += tuple(t for t in fed_leaves(tensors_in(args)) if id(t) not in own)
        if trained:   # a trained network's outputs computed under torch.no_grad(): cut
            block, call = grad_off_block(1)
            cut = ((block, "no_grad", trained),)
            self.cut_callers[cut[0][0], id(trained[0])] = call or user_line()
            # with the cuts of its inputs that the block made of values with a graph (not
            # those of networks run in it: Forward-Forward's layers, cut on purpose)
            for a in tensors_in(args):
                entry = self.cut_values.get(id(a))
                if entry is not None and entry[0]() is a:
                    cut += tuple(c for c in entry[1]
                                 if any(c[2] is o for o in self.block_origins))
            for t in _nested(output, 2):
                if t.is_floating_point():
                    self.cut_values[id(t)] = (weakref.ref(t), cut)
        # the recording's own reads of the outputs pass no torch-function mode (its own
        # would ignore them, at a dispatch each)
        caller = sys._getframe(1)
        try:
            with torch._C.DisableTorchFunction():
                self._outputs(label, output)
                # the outermost named call returns to the step's own code; an inner one to a
                # module's forward (a line every caller of that module runs)
                self._made_outputs(output, "module" if not self.calling else "inner",
                                   lambda: self._call_stack(caller))
        finally:
            self._stacks.pop(id(caller), None)
            self.busy = False

    def _call_stack(self, caller: FrameType) -> tuple[Line, ...]:
        """:func:`user_stack` at the module call whose hooks ``caller`` (a frame of torch's
        ``Module._call_impl``) runs: read once for both hooks, since the frames outside a
        call stay where they are until it returns (let go by the forward hook)."""
        entry = self._stacks.get(id(caller))
        if entry is None or entry[0] is not caller:
            entry = self._stacks[id(caller)] = (caller, user_stack(start=caller))
        return entry[1]

    def _made_outputs(self, output: Any, kind: str, stack: Callable[[], tuple[Line, ...]],
                      depth: int = 0) -> None:
        if isinstance(output, (list, tuple)) and depth < 2:
            for item in output:
                self._made_outputs(item, kind, stack, depth + 1)
        elif isinstance(output, torch.Tensor) and output.grad_fn is not None:
            lines = stack()
            if lines:  # an enclosing call returns later: its line wins
                self._made(output.grad_fn, lines,
                           "inner" if lines[0].inside or kind == "inner" else kind)

    def _outputs(self, label: str, output: Any, where: str = "") -> None:
        """Map the node of each tensor ``output`` holds (tuples nested twice) to ``label``."""
        if isinstance(output, (list, tuple)) and where.count("[") < 2:
            for i, item in enumerate(output):
                self._outputs(label, item, f"{where}[{i}]")
            return
        if not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        node = output.grad_fn
        self.returned_by.setdefault(id(node), []).append(label)
        entry = self.outputs.get(id(node))
        if entry is None:
            self.outputs[id(node)] = [node, label, label, tuple(output.shape), where]
        else:
            entry[2], entry[4] = label, where  # an enclosing module's call ends later

    def _label(self, module: nn.Module) -> str | None:
        """The name of a module whose calls the recording follows; a loss module
        (``nn.MSELoss``, ``nn.KLDivLoss`` … held by a network or not) is a plain function of
        its inputs, never a boundary: its call is the step's own code."""
        if isinstance(module, _LOSSES):
            return None
        return self.names.modules.get(id(module))

    def _pre_hook(self, module: nn.Module, args: Any) -> None:
        if self.suspended:
            return
        label = None if self._other_thread(module) else self._label(module)
        if label is not None:
            outermost = not self.calling
            # a named module called from another's forward: the outer ones (a module the
            # model calls through a lambda or a plain attribute, not as a submodule)
            self.called_inside.setdefault(label, set()).update(self.calling)
            self.calling.append(label)
            self._starts.append(0)
            self.busy = True
            caller = sys._getframe(1)
            try:
                with torch._C.DisableTorchFunction():
                    self._handed(label, caller, args, module, outermost)
            finally:
                self.busy = False

    def _handed(self, label: str, caller: FrameType, args: Any, module: nn.Module,
                outermost: bool) -> None:
        """What the pre-hook notes of a named module's call (see :meth:`_pre_hook`)."""
        if ("call", self.call, label) not in self.sites:
            lines = user_lines()
            self.sites["call", self.call, label] = caller_text(lines)
            self.lines["call", self.call, label] = lines[0]
        for t in tensors_in(args):
            cut = self.detached_out.get(id(t))
            if t.grad_fn is None and cut is not None and cut[0]() is t:
                self.detached_into.setdefault((self.call, label), []).append(cut[1:])
        handed = [t for t in tensors_in(args) if t.grad_fn is not None]
        nested = [(i, t) for i, a in [*enumerate(args), *_keywords(module).items()]
                  for t in _nested(a) if t.grad_fn is not None]
        stack = self._call_stack(caller) if nested else ()
        start = self.sequence() if stack and handed else 0
        self._starts[-1] = start
        for t in handed:
            self.inputs.setdefault(id(t.grad_fn), (t.grad_fn, label))
            # the module each call hands it to (a state carried from the previous
            # call enters this call's graph there)
            self.inputs_now.setdefault((self.call, id(t.grad_fn)), (t.grad_fn, label))
            if stack:
                self.handed.setdefault(id(t.grad_fn), []).append(
                    (t.grad_fn, label, stack, start, outermost and not stack[0].inside))
        if stack:
            at = stack[0]
            for i, t in nested:
                self.arguments.setdefault((id(t.grad_fn), at.path, at.number, at.span),
                                          i)

    def next_call(self) -> None:
        """Start the next call of the step: remember where autograd's node numbering is."""
        self.call += 1
        self.calling.clear()
        self._starts.clear()
        self._stacks.clear()
        # cut values, the terms made of them and the lines inside forwards are read in the
        # call that makes them (what they hold keeps a graph alive)
        self.cut_values.clear()
        self.block_origins.clear()
        self.inside_origins.clear()
        self.from_snapshot.clear()
        self.from_view.clear()
        self.cut_added.clear()
        self.cut_read.clear()
        self.cut_fed.clear()
        self.cut_callers.clear()
        self.self_differences.clear()
        self.cancelled.clear()
        self.one_to_one.clear()
        self.zero_reads.clear()
        self.reference_reads.clear()
        self.derivatives.clear()
        self.made_inside.clear()
        self.marks.append(self.sequence())

    @staticmethod
    def sequence() -> int:
        """The sequence number autograd gives the next node it makes in this thread (nodes
        made later have larger ones; calls with no node made between them share one)."""
        return torch.autograd._get_sequence_nr()

    def _open(self, x: Any, name: str | None) -> Any:
        """Mark a disabled block with a node that names it, and note the user's line."""
        if self.suspended:
            return x
        out = _open(x, name)
        self.note_made(out)
        return out

    def __enter__(self) -> Recording:
        stack = self._stack
        forget_lines()
        stack.callback(forget_lines)
        stack.enter_context(trace_cuts())
        stack.enter_context(observe_cuts(on_open=self._open))
        handles = [nn.modules.module.register_module_forward_pre_hook(self._pre_hook),
                   nn.modules.module.register_module_forward_hook(self._hook)]
        if self.step_hooks:
            handles += [register_optimizer_step_pre_hook(self._before_optimizer_step),
                        register_optimizer_step_post_hook(self._after_optimizer_step)]
        for handle in handles:
            stack.callback(handle.remove)
        self.suspended = False
        self._calls = stack.enter_context(CallWatch(self))
        if not self._held:
            self.patches.install(stack)
        return self

    def hold_patches(self) -> contextlib.ExitStack:
        """Install the classes' patches (:class:`~toolkit.audit.record.patches.ClassPatches`)
        until the stack returned is closed, across the times the recording is entered and left
        (a script's audited iterations), so that no entry pays for them: patching a class
        empties Python's attribute caches of each of its subclasses, about a millisecond for
        ``nn.Module``'s. While the recording is not entered, they pass every call through."""
        stack = contextlib.ExitStack()
        self.patches.install(stack)
        self._held = self.suspended = True
        stack.callback(setattr, self, "_held", False)
        return stack

    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """An ``optimizer.step()`` inside the step: save the optimizer (state, tensors,
        ``.grad``) so that the audit can put it back, and note where it was called."""
        self.optimizer_steps.setdefault(id(optimizer), (type(optimizer).__name__,
                                                        user_line(installed=True)))
        if self.snapshot is not None:
            self.snapshot.save_optimizer(optimizer)
        self.stepping += 1

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.stepping = max(0, self.stepping - 1)

    def suspend(self) -> None:
        """Stop recording for a while, cheaply: the calls' mode leaves the stack and every
        hook passes its call through until :meth:`unsuspend` (entering and leaving the whole
        recording sets and restores attributes of ``nn.Module`` and other classes, which empties
        Python's attribute caches of every subclass)."""
        if self._calls is not None and not self.suspended:
            self.suspended = True
            self._calls.__exit__(None, None, None)

    def unsuspend(self) -> None:
        """Record again after :meth:`suspend`: the calls' mode back on top of the stack."""
        if self._calls is not None and self.suspended:
            self.suspended = False
            self._calls.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.suspended = self._held   # the patches held stay, passing calls through
        self._calls = None
        self._stacks.clear()
        self._stack.close()
