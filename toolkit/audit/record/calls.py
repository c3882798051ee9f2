"""Every torch call of the step, seen through a :class:`~torch.overrides.TorchFunctionMode`.

:class:`CallWatch` records, for the :class:`~toolkit.audit.record.recording.Recording` it serves,
what leaves no node in the backward graph: ``detach()`` / ``detach_()`` / ``.data`` of a
tensor with a graph, a watched tensor read under ``torch.no_grad()`` (and the ``with`` line
that switched gradients off), ``requires_grad_(False)``, in-place writes to a watched tensor
(an EMA update, an ``optimizer.step()`` inside the step); and the user's line of every tensor
the step's own code makes, and of every read of a tensor made before the call.
"""

from __future__ import annotations

import copy
import inspect
import sys
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from toolkit.audit.record.backward import read_graph
from toolkit.audit.record.modes import remove_mode
from toolkit.audit.record.sites import (
    Line,
    called_by_user,
    cut_by_user,
    grad_off_block,
    grad_off_line,
    library_call,
    package_of,
    user_frames,
    user_line,
    user_lines,
)
from toolkit.lens.graph_walk import walk

__all__ = ["COPY", "CallWatch", "Edge", "caller_text", "storage_key", "tensors_in", "writes"]

_DATA = inspect.getattr_static(torch.Tensor, "data")
# methods whose name ends in "_" that do not write a tensor's values
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "detach_", "retain_grad"})
# functions whose arguments after the input are weights: a weight with a graph there was computed
# from stored tensors (parametrize, the spectral_norm / weight_norm hooks, a custom forward)
_WEIGHT_FUNCS = frozenset({"linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                           "conv_transpose2d", "conv_transpose3d", "embedding", "layer_norm",
                           "group_norm", "batch_norm", "instance_norm", "prelu"})
_COPIES = frozenset({"copy_", "__set__", "set_"})  # writes that do not read what they overwrite
#: subtractions, and the position of the operand subtracted (``a - b``: ``b``; ``b.__rsub__(a)``)
_DIFFERENCES = {"sub": 1, "__sub__": 1, "subtract": 1, "__rsub__": 0, "rsub": 0}
# a difference or a ratio: of a value and itself, zero or one whatever the weights
_AGAINST_ITSELF = frozenset({*_DIFFERENCES, "div", "__truediv__", "__rtruediv__", "divide",
                             "true_divide"})
# functions whose kernels write running statistics in place when they normalise from the batch:
# (position, keyword) of those arguments (a BatchNorm's buffers, or frozen nn.Parameters)
_STATS_WRITES = {F.batch_norm: ((1, "running_mean"), (2, "running_var")),
                 F.instance_norm: ((1, "running_mean"), (2, "running_var"))}
# functions whose derivative is zero wherever it exists: the line that calls one is where a
# straight-through estimator goes, even inside a module's forward
_ZERO_DERIVATIVE = frozenset({"sign", "round", "floor", "ceil", "trunc", "fix"})
#: sums, whose output's gradient is the same for every operand: a constant operand adds nothing
#: to the gradient of the sum (``loss + lam * penalty``)
_SUMS = frozenset({"add", "__add__", "__radd__", "__iadd__", "add_", "sub", "__sub__",
                   "__rsub__", "__isub__", "sub_", "subtract", "rsub"})
#: sums of two operands out of place (a sum written back into an operand is no new value)
_ADDS = frozenset({"add", "__add__", "__radd__"})
_KW_WRITES = frozenset({"uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_",
                        "xavier_uniform_", "xavier_normal_", "orthogonal_", "zeros_", "ones_",
                        "constant_"})  # torch.nn.init writes, which pass the tensor by keyword


#: how a parameter read by ``copy.deepcopy`` is cut: the copy is a new leaf (a model copied for
#: an inner loop, ``fast = copy.deepcopy(model)``, passes no gradient back to ``model``)
COPY = "copy.deepcopy"


def _copying() -> bool:
    """Whether ``copy.deepcopy`` is running (a tensor read now is being copied)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is copy.deepcopy.__code__:
            return True
        frame = frame.f_back
    return False


class Edge(NamedTuple):
    """A tensor as the backward graph sees it: the node that made it and which output it is."""

    grad_fn: Any
    output_nr: int


def tensors_in(args: Any) -> Iterator[torch.Tensor]:
    """The tensors among ``args`` and inside the lists and tuples among them (one level)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, torch.Tensor))


class CallWatch(TorchFunctionMode):
    """Sees every torch call of the step; records cuts and writes that touch watched tensors."""

    def __init__(self, recording: Any) -> None:  # the Recording it serves (record.py)
        super().__init__()
        self.rec = recording
        self.gone = False

    def __enter__(self) -> CallWatch:
        self.gone = False
        return super().__enter__()  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        """Leave the mode stack wherever the mode is on it (a script's watch pauses the
        recording under modes entered after it); one taken off for a call it is dispatching
        stops recording and is taken off when it next sees a call."""
        self.gone = True
        remove_mode(self)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        rec = self.rec
        kwargs = kwargs or {}
        if self.gone:
            remove_mode(self)
            return func(*args, **kwargs)
        if rec.busy or rec.stepping:  # the recording's own hooks; an optimizer's update
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        data = name == "__get__" and getattr(func, "__self__", None) is _DATA
        if data or func is torch.Tensor.detach or func is torch.Tensor.detach_:
            source, how = args[0], ".data" if data else f".{name}()"
            here, leaf = None, False
            if isinstance(source, torch.Tensor) and source.grad_fn is not None:
                rec.detached.append((rec.call, Edge(source.grad_fn, source.output_nr),
                                     tuple(source.shape), how))
                rec.sites.setdefault(("detach", rec.call, id(source.grad_fn)), caller_text())
                call = library_call(source, flags_only=True)
                if call is not None:  # detached inside a library's call (track_higher_grads)
                    rec.library_calls.setdefault(("detach", rec.call, id(source.grad_fn)), call)
                here = call.line if call is not None else user_line()
                rec.lines.setdefault(("detach", rec.call, id(source.grad_fn)), here)
            elif isinstance(source, torch.Tensor) and id(source) in rec.watched:
                rec.leaf_detached.setdefault(id(source), COPY if _copying() else how)
                rec.sites.setdefault(("detach", id(source)), caller_text())
                call = library_call(source)
                if call is not None:  # copied inside a library's call (higher.innerloop_ctx)
                    rec.library_calls.setdefault(("detach", id(source)), call)
                rec.lines.setdefault(("detach", id(source)),
                                     call.line if call is not None else user_line())
                # the step's own code reads a parameter's values cut (``p.data``): a value
                # made of them alone is a constant (:mod:`~toolkit.audit.rules.constant`)
                leaf = call is None and rec.leaf_detached[id(source)] != COPY and \
                    called_by_user()
            out = func(*args, **kwargs)
            rec.trace(out, [source], exact=True)
            if leaf and isinstance(out, torch.Tensor) and out.is_floating_point():
                rec.cut_values[id(out)] = (weakref.ref(out), (
                    (rec.lines.get(("detach", id(source))), "leaf", (source,)),))
            if isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor) and \
                    source.grad_fn is None and not source.requires_grad and \
                    not isinstance(source, torch.nn.Parameter) and not rec.calling and \
                    source.is_floating_point() and id(source) not in rec.watched:
                rec.note_alias(out, source, how)   # data the step's own code cut, sharing storage
            if isinstance(source, torch.Tensor) and source.grad_fn is not None \
                    and isinstance(out, torch.Tensor):
                line = rec.lines.get(("detach", rec.call, id(source.grad_fn)))
                rec.detached_out[id(out)] = (weakref.ref(out), Edge(source.grad_fn,
                                                                    source.output_nr), line)
                rec.cut_values[id(out)] = (weakref.ref(out), (
                    (here, "detach", Edge(source.grad_fn, source.output_nr)),))
            return out
        if args and name in _BOUNDS:
            rec.note_bound(args[0])
        elif args and name in _FILLS:
            rec.note_fill(args[0])
        elif rec.filled and name not in _VALUE_FREE and name not in _NO_VALUES:
            rec.note_filled_reads([*tensors_in(args), *tensors_in(kwargs.values())])
        if not rec.watched:
            return func(*args, **kwargs)
        if func is torch.tensor and args:  # copies values, never a graph: note what it drops
            dropped = [t for t in tensors_in(args[:1]) if t.requires_grad]
            if dropped:
                rec.value_copies.append((rec.call, dropped, user_line()))
        grad = torch.is_grad_enabled()
        inputs = [*tensors_in(args), *tensors_in(kwargs.values())]
        if not grad and _unreadable_view(inputs):
            return func(*args, **kwargs)
        if rec.call > 1:
            rec.note_old_reads(inputs)
        for t in inputs:
            key = id(t)
            if key in rec.watched:
                rec.used.add(key)
                if grad:
                    rec.grad_read.add(key)
                for reads in rec._checkpointing:
                    reads.add(key)
                if not grad and key not in rec.no_grad:
                    rec.no_grad[key] = name
                    rec.sites[("no_grad", key)] = caller_text()
                    call = library_call(t)
                    if call is not None:  # gradients off inside a library's call
                        rec.library_calls[("no_grad", key)] = call
                    rec.lines[("no_grad", key)] = (call.line if call is not None else None) \
                        or grad_off_line() or user_line()
        if name in _WEIGHT_FUNCS and grad:  # a weight computed inside the module's forward
            for t in [*tensors_in(args[1:]), *tensors_in([kwargs.get("weight"), kwargs.get("bias")])]:
                if t.grad_fn is not None:
                    rec.computed.setdefault(id(t.grad_fn), t.grad_fn)
                elif rec.detached_out:   # a generated weight, cut
                    rec.cut_weights |= rec.cuts_behind(t)
        if func in _STATS_WRITES and rec.snapshot is not None:  # copied before the kernel writes
            for position, keyword in _STATS_WRITES[func]:
                t = args[position] if len(args) > position else kwargs.get(keyword)
                key = (None if not isinstance(t, torch.Tensor) else
                       id(t) if id(t) in rec.watched else rec.storage.get(storage_key(t)))
                if key is not None:
                    rec.snapshot.before_write(key)
        out_arg = kwargs.get("out")
        if (args and writes(name, func)) or out_arg is not None or (
                name in _KW_WRITES and isinstance(kwargs.get("tensor"), torch.Tensor)):
            targets = ([out_arg] if out_arg is not None
                       else [kwargs["tensor"]] if not args else list(tensors_in(args[:1])))
            for t, read in _written_from(name, args, kwargs, targets, inputs):
                key = id(t) if id(t) in rec.watched else rec.storage.get(storage_key(t))
                if key is not None:
                    rec.note_write(key, name, read,
                                   self_involved=out_arg is None and name not in _COPIES)
                    if not grad:
                        _restored_from_itself(rec, key, read)
                    if not any(r.requires_grad for r in read):
                        _moved_toward_itself(rec, key, t, read, inputs)
        elif name == "requires_grad_" and args and isinstance(args[0], torch.Tensor):
            wants = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
            if id(args[0]) in rec.watched and not wants:
                rec.frozen.add(id(args[0]))
            elif wants and args[0].grad_fn is None:
                rec.origin.setdefault(id(args[0]), (args[0], f"requires_grad_() {caller_text()}"))
        same = _one_storage(name, args, rec) if name in _DIFFERENCES else None
        out = func(*args, **kwargs)
        if not grad and _unreadable_view(tensors_in([out])):
            return out
        if grad and name in _AGAINST_ITSELF and _itself(args) and isinstance(out, torch.Tensor) \
                and out.grad_fn is not None:
            rec.self_differences.append((rec.call, user_line(), id(out.grad_fn)))
        if grad and name in _ADDS and isinstance(out, torch.Tensor) and out.grad_fn is not None \
                and (at := _cancelling(args)) is not None:
            rec.cancelled.append((rec.call, user_line(), id(out.grad_fn), at))
        if same is not None and not same.requires_grad:
            # zero whatever the weights: the operand subtracted, a detached view, is the
            # other's elements
            rec.alias_differences.append((rec.call, same, user_line(), holders(same)))
        if func is torch.autograd.grad and kwargs.get(
                "create_graph", args[4] if len(args) > 4 else False):
            of = kwargs.get("outputs", args[0] if args else ())
            before = read_graph(t.grad_fn for t in tensors_in(of)).nodes
            rec.derivatives.update((k, n) for k, n in read_graph(
                t.grad_fn for t in tensors_in(out)).nodes.items() if k not in before)
        elif func is torch.autograd.grad:
            wrt = kwargs.get("inputs", args[1] if len(args) > 1 else ())
            wrt = [wrt] if isinstance(wrt, torch.Tensor) else list(
                wrt.values() if isinstance(wrt, dict) else wrt)
            line = user_line()
            of = kwargs.get("outputs", args[0] if args else ())
            rec.first_order_calls.append((rec.call, [
                Edge(t.grad_fn, t.output_nr) for t in tensors_in(
                    [of] if isinstance(of, torch.Tensor) else of) if t.grad_fn is not None],
                line))
            for g, x in zip(out.values() if isinstance(out, dict) else out, wrt):
                if isinstance(g, torch.Tensor) and isinstance(x, torch.Tensor):
                    rec.first_order[id(g)] = (weakref.ref(g), line, id(x))
        elif rec.first_order and isinstance(out, torch.Tensor):
            ids = {id(t) for t in inputs}
            for t in inputs:  # computed from such a gradient: lr * g, then p - lr * g
                entry = rec.first_order.get(id(t))
                if entry is None or entry[0]() is not t:
                    continue
                if grad and out.grad_fn is not None and entry[2] in ids:
                    # the tensor the gradient was taken of, updated with it: an inner step
                    rec.first_order_used.setdefault(entry[1], user_line())
                elif out.grad_fn is None:
                    rec.first_order[id(out)] = (weakref.ref(out), *entry[1:])
                elif grad and name in _SUMS and t.numel() == out.numel() and (
                        t.numel() == 1 or bool(t.detach().ne(0).any())):
                    # a scalar made from such a gradient added to one with a graph: a term of
                    # a loss (``loss + lam * penalty``) that is a constant, trains nothing;
                    # or such values added element for element (sliced score matching's
                    # trace term, per sample), where the loss sums them
                    rec.first_order_added.append((rec.call, entry[1], user_line(),
                                                  _first_order_names(rec, out.numel() == 1),
                                                  id(out.grad_fn), out.numel() == 1))
        if rec.cut_values:
            # each tensor a call returns (``torch.max(d, 1)``'s values and indices, the parts
            # of ``torch.chunk``, ``torch.linalg.eigh``'s eigenvalues) is computed from its
            # inputs
            for made in [out] if isinstance(out, torch.Tensor) else tensors_in([out]):
                _follow_cut_values(rec, name, func, inputs, made, grad)
        if not grad and name not in _VALUE_FREE:
            if not rec.calling:   # the step's own code under no_grad
                _cut_in_block(rec, inputs, out)
            elif any(t.grad_fn is not None or t.requires_grad for t in inputs) and \
                    cut_by_user():
                # a forward's, where the user cut it: read only by the dead rule (a cut
                # inside a module is the module's own, as SuperLoss's confidence is), of
                # values with a graph or of the module's own weights (GRU-D's input decay
                # computed from them under no_grad, as if it were the data's preprocessing)
                _cut_in_block(rec, inputs, out, inside=True)
        if grad and any(t.requires_grad for t in inputs) and any(
                not (t.is_floating_point() or t.is_complex()) for t in tensors_in([out])):
            rec.integer_results.append((rec.call, [Edge(t.grad_fn, t.output_nr) for t in inputs
                                                   if t.grad_fn is not None], name,
                                        user_line(), any(t.grad_fn is not None
                                                         for t in tensors_in([out]))))
        if not rec.calling or name in _ZERO_DERIVATIVE:  # the step's own code (no named
            # module's forward is running), or where a zero-derivative op is (the fix's line)
            rec.note_made(args[0] if out is None and args and writes(name, func) else out)
            if isinstance(out, torch.Tensor) and out.grad_fn is not None and inputs:
                rec.operands[id(out.grad_fn)] = tuple(
                    a.grad_fn if isinstance(a, torch.Tensor) else None for a in args)
        elif isinstance(out, torch.Tensor) and out.grad_fn is not None and called_by_user():
            rec.note_made_inside(out)  # a forward the user wrote
        if (rec.detached_out or rec.from_detached) and inputs:
            rec.note_detached_reads(out, inputs)
        if kwargs.get("requires_grad") is True and isinstance(out, torch.Tensor):
            rec.origin.setdefault(id(out), (out, f"{name}(requires_grad=True) {caller_text()}"))
        elif isinstance(out, torch.Tensor) and out.grad_fn is None and inputs:
            rec.trace(out, inputs, exact=name in ("clone", "__getitem__", "to"))
            # a value computed from a snapshot's view (``state[k] * mask``) under no_grad, for
            # a restore; without a graph at all (of ``.data`` views), for a move toward itself
            for made in ("from_view", "from_snapshot") if not grad else ("from_view",):
                view = next((v for t in inputs
                             if (v := _snapshot_view(rec, t, made)) is not None), None)
                if view is not None:
                    getattr(rec, made)[id(out)] = (weakref.ref(out), view)
        return out


def _snapshot_view(rec: Any, t: torch.Tensor, made: str = "from_snapshot"
                   ) -> torch.Tensor | None:
    """The view ``t`` is, or was computed from in this call (as ``rec``'s dict ``made`` notes
    it), of all the elements of a watched tensor, itself another tensor without gradient (an
    entry of a ``state_dict()`` kept as a snapshot, ``p.detach()``), else ``None``."""
    entry = getattr(rec, made).get(id(t))
    if entry is not None and entry[0]() is t:
        return entry[1]
    if t.requires_grad or id(t) in rec.watched:
        return None
    key = rec.storage.get(storage_key(t))
    p = rec.watched.get(key) if key is not None else None
    if p is None or (t.storage_offset(), t.shape, t.stride()) != (p.storage_offset(), p.shape,
                                                                 p.stride()):
        return None
    return t


def _restored_from_itself(rec: Any, key: int, read: list[torch.Tensor]) -> None:
    """A write without gradient into the watched tensor ``key`` of a value read from a view of
    its own elements held elsewhere (``p.copy_(snapshot[k])`` where the snapshot is
    ``model.state_dict()``, not a copy): the restore writes the tensor's values now, not those
    the snapshot was taken to keep. Noted with where the script holds the view."""
    for t in read:
        view = _snapshot_view(rec, t)
        if view is not None and rec.storage.get(storage_key(view)) == key:
            held = holders(view)
            if held:
                rec.alias_restores.append((rec.call, view, user_line(), held))
            return


def _moved_toward_itself(rec: Any, key: int, t: torch.Tensor, read: list[torch.Tensor],
                         inputs: list[torch.Tensor]) -> None:
    """A write without a graph into the watched tensor ``key`` (``t``, the tensor written) of
    a value computed from that tensor itself as another operand: ``ema_p.lerp_(p, w)`` or
    ``p.add_(p, alpha=-wd)`` where the two are one tensor, a ``.copy_`` of arithmetic on views
    of its own elements. An EMA update whose copy and source are one network's tensors, or a
    weight decay by hand (the rule tells them apart by the script's names)."""
    if any(r is t for r in read) or sum(x is t for x in inputs) > 1 or any(
            (v := _snapshot_view(rec, r, "from_view")) is not None
            and rec.storage.get(storage_key(v)) == key for r in read):
        rec.alias_moves.append((rec.call, t, user_line()))


def _one_storage(name: str, args: tuple[Any, ...], rec: Any) -> torch.Tensor | None:
    """For a subtraction of two tensors that are the same elements of a watched tensor's
    storage (two views of one parameter: ``p`` and ``p.detach()``, two ``state_dict()``
    entries), the operand subtracted, else ``None``."""
    if len(args) < 2:
        return None
    a, b = args[0], args[1]
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a is b:
        return None
    key = storage_key(a)
    if key is None or key != storage_key(b) or key not in rec.storage:
        return None
    if (a.storage_offset(), a.shape, a.stride()) != (b.storage_offset(), b.shape, b.stride()):
        return None
    return args[_DIFFERENCES[name]]


def holders(tensor: torch.Tensor) -> list[tuple[str, str]]:
    """Where the user's code running now holds ``tensor``, innermost frame first, as ``(file,
    name)``: a name bound to it, or to a list, tuple or dict that holds it, or an attribute of
    an object a frame names (``self.slow_weights``) that holds it so."""

    def holds(value: object) -> bool:
        if value is tensor:
            return True
        if isinstance(value, list | tuple):
            return any(v is tensor for v in value)
        return isinstance(value, dict) and any(v is tensor for v in value.values())

    out: list[tuple[str, str]] = []
    for frame in user_frames(1):   # the toolkit's and torch's own frames are passed over
        path = frame.f_code.co_filename
        for name, value in list(frame.f_locals.items()):
            if holds(value):
                out.append((path, name))
            elif not isinstance(value, torch.Tensor | type) and \
                    isinstance(getattr(value, "__dict__", None), dict):
                # a module's own plain attributes too (Tent's ``self.model_state``), not
                # torch's registries of it (``_parameters``, ``_buffers``)
                out += [(path, f"{name}.{attr}") for attr, v in list(vars(value).items())
                        if not attr.startswith("_") and holds(v)]
    return out


#: in-place writes of fresh values, whatever the tensor held
_FILLS = frozenset({"normal_", "uniform_", "random_", "bernoulli_", "exponential_",
                    "geometric_", "cauchy_", "log_normal_", "fill_", "zero_"})
#: bounds written in place
_BOUNDS = frozenset({"clamp_", "clamp_min_", "clamp_max_", "clip_"})
#: calls that read no values of a tensor: its attributes, its sizes
_NO_VALUES = frozenset({"__get__", "size", "dim", "numel", "stride", "data_ptr", "element_size",
                        "is_floating_point", "is_complex", "is_contiguous", "__len__"})
#: operations whose result holds none of their input's values (its shape, dtype and device
#: only): under no_grad they cut nothing
_VALUE_FREE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                         "randn_like", "randint_like", "new_zeros", "new_ones", "new_empty",
                         "new_full"})


def _unreadable_view(tensors: list[torch.Tensor]) -> bool:
    """Whether one of ``tensors`` is a view made under no_grad whose base was written in place
    since (``delta[:n] += step * delta.grad[:n].sign()`` under no_grad): torch forbids reading
    its ``grad_fn``, and it has no graph of its own to record."""
    for t in tensors:
        try:
            t.grad_fn  # noqa: B018 - the read is the check
        except RuntimeError:
            return True
    return False


def fed_leaves(given: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors that require gradient which the tensors ``given`` are or were computed
    from with a graph, in the order first reached."""
    given = [t for t in given if t.requires_grad]
    found = {id(t): t for t in given if t.grad_fn is None}
    for _, node, _, first in walk([t for t in given if t.grad_fn is not None]):
        leaf = getattr(node, "variable", None) if first else None
        if isinstance(leaf, torch.Tensor):
            found.setdefault(id(leaf), leaf)
    return list(found.values())


def _cut_in_block(rec: Any, inputs: list[torch.Tensor], out: Any,
                  inside: bool = False) -> None:
    """Values the step's own code computes under ``torch.no_grad()`` from values with a graph
    (BEAR's ``critic(state, actions.reshape(...))`` in a no_grad block, the actor's actions
    made before it): cut there, as a network's output under no_grad is, by what they were
    computed from (:attr:`Recording.cut_values`). ``inside`` a module's forward, from its
    weights too (a tensor that requires grad, read as it is); a weight written in place (a
    clamp) is no value made."""
    fed = [t for t in inputs if t.grad_fn is not None or (inside and t.requires_grad)]
    made = [m for m in ([out] if isinstance(out, torch.Tensor) else tensors_in([out]))
            if m.grad_fn is None and not m.requires_grad and m.is_floating_point()
            and ((e := rec.cut_values.get(id(m))) is None or e[0]() is not m)]
    if not fed or not made:
        return
    leaves = tuple(fed_leaves(fed))
    if leaves:
        block, call = grad_off_block()
        cut = ((block, "no_grad", leaves),)
        rec.cut_callers[cut[0][0], id(leaves[0])] = call or user_line()   # the line the fix moves
        rec.block_origins.append(leaves)
        if inside:
            rec.inside_origins.append(leaves)
        for m in made:
            rec.cut_values[id(m)] = (weakref.ref(m), cut)


def _follow_cut_values(rec: Any, name: str, func: Any, inputs: list[torch.Tensor],
                       out: torch.Tensor, grad: bool) -> None:
    """``out`` computed from cut values (:attr:`Recording.cut_values`): cut too, by all
    their cuts, when it has no graph and holds values (not indices or a mask); a scalar of
    them that is not zero (a weight of zero leaves a term nothing to train) added to a value
    with a graph, element for element (not broadcast against it), is a term of a loss that is
    a constant where the loss sums that value (:attr:`Recording.cut_added`)."""
    cuts: dict[Any, tuple[Line | None, str, Any]] = {}   # each cut once, by its place
    cut_input = None
    for t in inputs:
        entry = rec.cut_values.get(id(t))
        if entry is not None and entry[0]() is t:
            cuts.update({(line, line and line.span, how, id(origin)): (line, how, origin)
                         for line, how, origin in entry[1]})
            cut_input = t
    if cut_input is None:
        return
    if out.grad_fn is None:
        if not (out.is_floating_point() or out.is_complex()):
            # indices or a mask (``argmax``, a comparison): what they select is not computed
            # from the cut values, and no gradient would reach them uncut (NNCLR's nearest
            # neighbour, a support-set row chosen by a similarity to a cut projection)
            return
        if writes(name, func) and out is not cut_input and id(out) not in rec.cut_values:
            return   # a tensor written in place (a memory bank) keeps values of earlier steps
        rec.cut_values[id(out)] = (weakref.ref(out), tuple(cuts.values()))
        return
    if grad:   # read with values that have a graph (a query's similarity to cut keys)
        rec.cut_read.append((rec.call, tuple(cuts.values()), user_line(), name, id(out.grad_fn)))
        if out.numel() <= max(t.numel() for t in inputs):
            rec.one_to_one.add(id(out.grad_fn))
        if name in _DIFFERENCES and not bool(out.detach().ne(0).any()):
            rec.zero_reads.add(id(out.grad_fn))
        if name in _DIFFERENCES and cut_input.numel() == 1 < out.numel():
            rec.reference_reads.add(id(out.grad_fn))
        if any(t.grad_fn is None and t.requires_grad for t in inputs) or (
                rec.calling and rec.inside_forward(tuple(cuts.values()))):
            # read by a layer with weights that train, or with a graph inside the forward
            # that cut it (joined to the state GRU-D's cell carries): a forward goes on from
            # the cut value
            rec.cut_fed.append((tuple(cuts.values()), user_line()))
    # or a scalar made of parameters' values alone, broadcast (a flow's log-determinant of
    # its scales, added to each sample's log-likelihood): a constant however the loss sums it
    leaves = all(how == "leaf" for _, how, _ in cuts.values())
    broadcast = leaves and cut_input.numel() == 1 < out.numel()
    if grad and name in _SUMS and (cut_input.numel() == out.numel() or broadcast) \
            and (bool(cut_input.detach().ne(0).any()) or (leaves and _all_zero(cuts))):
        rec.cut_added.append((rec.call, tuple(cuts.values()), user_line(), id(out.grad_fn),
                              out.numel() == 1 or broadcast, bool(rec.calling)))


def _all_zero(cuts: dict[Any, tuple[Line | None, str, Any]]) -> bool:
    """Whether every tensor whose values ``cuts`` read is zero (a log-scale that starts at
    zero): a term of them that is zero then is no weight of zero, and still has a gradient."""
    return not any(bool(t.detach().ne(0).any()) for _, _, origin in cuts.values()
                   for t in origin)


def _cancelling(args: tuple[Any, ...]) -> int | None:
    """The operand of a sum of two tensors that is a difference subtracting the other operand,
    the same output of the same node (``z + (z_q - z)``), or ``None``: the sum is the value
    the difference starts from, and the other operand's gradient through it is zero."""
    if len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
        return None
    for at in (0, 1):
        diff, other = args[at], args[1 - at]
        node = diff.grad_fn
        if node is None or type(node).__name__ != "SubBackward0" or other.grad_fn is None \
                or getattr(node, "_saved_alpha", 1) != 1:
            continue
        edges = node.next_functions
        if len(edges) == 2 and edges[1][0] is other.grad_fn and edges[1][1] == other.output_nr:
            return at
    return None


def _itself(args: tuple[Any, ...]) -> bool:
    """Whether the two operands of a difference or a ratio are one value with its graph: the same
    node's output, or the same operation's output on equal values (a log-probability
    computed twice, ``old = policy(x)`` beside ``new = policy(x)``)."""
    if len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
        return False
    a, b = args[0], args[1]
    if a.grad_fn is None or b.grad_fn is None or a.shape != b.shape:
        return False
    if a.grad_fn is b.grad_fn:
        return a.output_nr == b.output_nr
    # equal values of two networks (a twin initialised as a copy) are no such value: both
    # sides must be computed by the same tensors
    return type(a.grad_fn) is type(b.grad_fn) and a.dtype == b.dtype \
        and bool(torch.equal(a.detach(), b.detach())) \
        and read_graph([a.grad_fn]).leaves == read_graph([b.grad_fn]).leaves \
        and _one_computation(a, b)


def _one_computation(a: torch.Tensor, b: torch.Tensor, budget: int = 2048) -> bool:
    """Whether the graphs of ``a`` and ``b``, walked side by side, are one computation: the
    same kinds of nodes down to the same nodes, reached as the same output of each. Two
    pieces of one value (``chosen, rejected = logps.chunk(2)``, equal only by chance: both
    zero while a policy equals its reference) reach one node as two of its outputs; they
    are no value and itself. Past ``budget`` pairs of nodes, taken as one."""
    todo = [((a.grad_fn, a.output_nr), (b.grad_fn, b.output_nr))]
    seen: set[tuple[int, int]] = set()
    while todo:
        (x, i), (y, j) = todo.pop()
        if x is y:
            if i != j:
                return False
            continue
        if x is None or y is None or type(x) is not type(y) or hasattr(x, "variable"):
            return False   # another kind of node, or another leaf
        if (id(x), id(y)) in seen:
            continue
        if not _same_arguments(x, y):
            return False   # other rows of one value (``ratio[:n]`` beside ``ratio[n:]``)
        seen.add((id(x), id(y)))
        if len(seen) > budget:
            return True
        if len(x.next_functions) != len(y.next_functions):
            return False
        todo.extend(zip(x.next_functions, y.next_functions))
    return True


def _same_arguments(x: Any, y: Any) -> bool:
    """Whether two nodes of one kind saved the same arguments that are no tensor (a slice's
    start, end, step and dimension; a selection's index) and equal index tensors: the same
    operation, not the same kind on other rows. The tensors they saved of their inputs are
    the walk's to compare."""
    for name in dir(x):
        if not name.startswith("_saved_"):
            continue
        try:
            u, v = getattr(x, name), getattr(y, name)
        except RuntimeError:   # freed by a backward
            continue
        if isinstance(u, torch.Tensor) or isinstance(v, torch.Tensor):
            continue
        if isinstance(u, list | tuple) and any(isinstance(t, torch.Tensor) for t in u):
            # indices (``x[idx]``): equal index tensors, the same rows
            if not isinstance(v, list | tuple) or len(u) != len(v) or not all(
                    (a is None and b is None) or (isinstance(a, torch.Tensor)
                                                  and isinstance(b, torch.Tensor)
                                                  and a.shape == b.shape and torch.equal(a, b))
                    for a, b in zip(u, v, strict=True)):
                return False
            continue
        if u != v:
            return False
    return True


def _first_order_names(rec: Any, scalars: bool = True) -> tuple[str, ...]:
    """The names the innermost frame of the user's code gives scalars made from a gradient
    taken without ``create_graph`` (``r1_penalty``, ``loss_JR``), in the order it made them;
    not ``scalars``: values of any size (a term added element for element, and the gradient
    it is made from: sliced score matching's ``jvp``)."""
    frame = next(user_frames(3), None)
    if frame is None:
        return ()
    return tuple(name for name, value in frame.f_locals.items()
                 if isinstance(value, torch.Tensor) and (value.numel() == 1 or not scalars)
                 and (entry := rec.first_order.get(id(value))) is not None
                 and entry[0]() is value)


def caller_text(lines: tuple[Line | None, Line | None] | None = None) -> str:
    """``at file.py:LINE (function)`` of the innermost frame of the user's code (outside
    torch, the toolkit, the standard library and installed packages), with the installed
    package's function that runs there when there is one: ``…, inside higher's
    _copy_tensor``. ``lines``: :func:`~toolkit.audit.record.sites.user_lines` at the
    caller, when it has them."""
    line, inner = user_lines() if lines is None else lines
    if line is None:
        return "in the step"
    text = f"at {line.file}:{line.number} ({line.function})"
    if inner is not None and inner.path != line.path and package_of(inner.path):
        text += f", inside {package_of(inner.path)}'s {inner.function}"
    return text


def _written_from(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], targets: list[Any],
                  inputs: list[torch.Tensor]) -> Iterator[tuple[torch.Tensor, list[torch.Tensor]]]:
    """Each tensor an in-place call writes, with the tensors its values are computed from: a
    ``torch._foreach_*`` call (``_foreach_lerp_(ema, model, w)``, an EMA of a whole model)
    writes its first list's i-th tensor from the i-th tensor of each other list and from the
    lone tensors; any other call writes each target from all its other inputs."""
    first = args[0] if args else None
    if name.startswith("_foreach_") and isinstance(first, (list, tuple)):
        others = [*args[1:], *kwargs.values()]
        lone = [a for a in others if isinstance(a, torch.Tensor)]
        lists = [a for a in others if isinstance(a, (list, tuple)) and len(a) == len(first)]
        for i, t in enumerate(first):
            if isinstance(t, torch.Tensor):
                yield t, [*(a[i] for a in lists if isinstance(a[i], torch.Tensor)), *lone]
        return
    for t in tensors_in(targets):
        yield t, [x for x in inputs if x is not t]


def writes(name: str, func: Any) -> bool:
    if name == "__set__":  # p.data = ...
        return getattr(func, "__self__", None) is _DATA
    if name in ("__setitem__",) or (name.startswith("__i") and name.endswith("__")):
        return True
    return name.endswith("_") and not name.endswith("__") and name not in _NOT_WRITES


def storage_key(t: torch.Tensor) -> Any:
    try:
        return (t.device, t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


