"""The hooks a watch needs, installed for the run and removed after it: ``torch.autograd.backward``
(which ``Tensor.backward``, ``GradScaler``'s scaled loss, accelerate's and Lightning's backward
all call), ``torch.autograd.grad`` (what the script's own calls return), the global optimizer
step hooks, ``zero_grad`` of optimizers and modules, ``Tensor.detach``, each distribution's
``sample`` and ``log_prob``, ``Tensor.grad`` as the user's code reads it, sets it to ``None``
or writes a gradient into it, the hooks it puts on values it computes (``register_hook``),
``GradScaler.step``, optimizer construction and ``copy.copy``. The module forward hook is the
watch's own; it and ``Tensor.grad``'s are on only while an iteration is recorded (around
audited iterations). In a process the script forked, every hook stands aside: the watch and its
stop belong to the process that started it."""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import sys
from collections.abc import Iterator

import torch
from torch import nn
from torch.autograd.graph import GradientEdge
from torch.nn.modules.module import (
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from toolkit.audit.record.frames import is_user
from toolkit.audit.record.sites import OWN_PATHS
from toolkit.audit.script.session import Watch

__all__ = ["installed"]


def _patch(owner: object, name: str, make, undo: list) -> None:
    had = name in vars(owner)
    old = getattr(owner, name)
    setattr(owner, name, make(old))
    undo.append((owner, name, old if had else None))


def _distributions() -> list[type]:
    """``torch.distributions.Distribution`` and every class derived from it so far."""
    found, todo = [], [torch.distributions.Distribution]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return found


@contextlib.contextmanager
def installed(watch: Watch) -> Iterator[Watch]:
    """Every hook of ``watch`` installed inside the block, all removed after it."""
    # torch's compiler reads Tensor's attributes as it is first imported (the first optimizer
    # built imports it): it must find torch's own ``grad`` descriptor there, not the hook
    # (torch 2.11 fails on a property with "no attribute '__objclass__'")
    importlib.import_module("torch._dynamo")
    undo: list = []

    def backward(old):
        @functools.wraps(old)
        def wrapper(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                    grad_variables=None, inputs=None):
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            ins = None if inputs is None else (
                [inputs] if isinstance(inputs, torch.Tensor) else list(inputs))
            state = watch.backward(roots, ins) if watch.here() else None
            kwargs = {} if grad_variables is None else {"grad_variables": grad_variables}
            out = old(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs,
                      **kwargs)
            if state is not None:
                watch.after_backward(state)
            return out
        return wrapper

    def tensor_backward(old):
        # the recording under an audited iteration leaves the mode stack before torch
        # dispatches ``loss.backward()`` through it (:mod:`~toolkit.audit.script.staged`)
        @functools.wraps(old)
        def wrapper(self, *args, **kwargs):
            if watch.here():
                watch.staged.pause()
            return old(self, *args, **kwargs)
        return wrapper

    def grad(old):
        # the script's own ``torch.autograd.grad`` of a loss over tensors an optimizer steps,
        # without a graph of the gradient (GradNorm's task weights, PCGrad's task gradients,
        # DP-SGD's per-example ones): a backward over those tensors, whose gradient the script
        # may write into their ``.grad`` itself; a gradient taken inside a loss
        # (``create_graph=True``: a gradient penalty, MAML's inner step) is the loss's
        @functools.wraps(old)
        def wrapper(outputs, inputs, *args, **kwargs):
            user = is_user(sys._getframe(1).f_code.co_filename) and watch.here()
            state = None
            if user:
                # read once, and passed on as read (``W.parameters()`` is a generator); one
                # tensor or one ``GradientEdge`` (a tuple) is one
                one = (torch.Tensor, GradientEdge)
                if not isinstance(outputs, (*one, tuple, list)):
                    outputs = tuple(outputs)
                if not isinstance(inputs, (*one, tuple, list)):
                    inputs = tuple(inputs)
                roots = [outputs] if isinstance(outputs, one) else list(outputs)
                ins = [inputs] if isinstance(inputs, one) else list(inputs)
                create_graph = kwargs.get("create_graph", args[2] if len(args) > 2 else False)
                held = watch.stepped_map()
                if not create_graph and any(id(t) in held for t in ins) and \
                        all(isinstance(t, torch.Tensor) for t in roots):
                    watch.taken_by_hand += 1
                    state = watch.backward(roots, ins)
            out = old(outputs, inputs, *args, **kwargs)
            if state is not None:
                watch.after_backward(state, by_hand=True)
            if user:
                watch.grad_computed(out, None if state is None else set(state[1]))
            return out
        return wrapper

    def zero_grad(old, params):
        @functools.wraps(old)
        def wrapper(self, *args, **kwargs):
            if not watch.here():
                return old(self, *args, **kwargs)
            watch.zero_grad(list(params(self)))
            # the clears it makes are noted: torch's own writes of ``.grad`` go past the
            # attribute's hook (which would call into Python once per tensor, every iteration)
            hooked = vars(torch.Tensor).get("grad")
            if hooked is not None:
                del torch.Tensor.grad
            try:
                return old(self, *args, **kwargs)
            finally:
                if hooked is not None:
                    torch.Tensor.grad = hooked  # type: ignore[method-assign]
        return wrapper

    def grad_attribute(descriptor):
        # ``Tensor.grad`` read by the user's code, or set to None by it (a clear without
        # zero_grad()); torch's own reads and writes (the optimizers') are not the script's
        get, put, remove = descriptor.__get__, descriptor.__set__, descriptor.__delete__

        def getter(self):
            value = get(self)
            if value is not None and is_user(sys._getframe(1).f_code.co_filename) \
                    and watch.here():
                watch.grad_read([self])
            return value

        def setter(self, value):
            if is_user(sys._getframe(1).f_code.co_filename) and watch.here():
                if value is None:
                    watch.zero_grad([self])
                else:
                    watch.grad_written(self, value)
            put(self, value)

        def deleter(self):
            if is_user(sys._getframe(1).f_code.co_filename) and watch.here():
                watch.zero_grad([self])
            remove(self)

        # on only while the watch records (:meth:`Watch._want_recording_hooks` installs and
        # removes it): between, torch's own descriptor, at no Python call per read or write (an
        # optimizer's step reads every ``.grad``; its ``zero_grad()`` writes every one)
        watch.grad_property = property(getter, setter, deleter, descriptor.__doc__)
        return watch.grad_property

    def scaler_step(old):
        # a GradScaler reads the gradient to step with it, or skips the step (inf or NaN)
        @functools.wraps(old)
        def wrapper(self, optimizer, *args, **kwargs):
            if watch.here():
                watch.grad_read([p for g in optimizer.param_groups for p in g["params"]])
            return old(self, optimizer, *args, **kwargs)
        return wrapper

    def detach(old):
        # the audit's own reads of a value (a recording comparing two operands) cut nothing
        @functools.wraps(old)
        def wrapper(self):
            out = old(self)
            if watch.here() and not sys._getframe(1).f_code.co_filename.startswith(OWN_PATHS):
                watch.detached(self, out)
            return out
        return wrapper

    def shallow(old):
        @functools.wraps(old)
        def wrapper(x):
            out = old(x)
            if watch.here():
                watch.copied(x, out)
            return out
        return wrapper

    def built(old):
        @functools.wraps(old)
        def wrapper(self, *args, **kwargs):
            old(self, *args, **kwargs)
            if watch.here() and not any(o is self for o in watch.optimizers):
                watch.optimizer_built(self)
        return wrapper

    def clip(old):
        # a gradient clip: over what, and when (before the backward it was meant for?)
        @functools.wraps(old)
        def wrapper(parameters, *args, **kwargs):
            if watch.here():
                parameters = [parameters] if isinstance(parameters, torch.Tensor) else \
                    list(parameters)
                watch.clipped(parameters)
            return old(parameters, *args, **kwargs)
        return wrapper

    for module in (torch.nn.utils, torch.nn.utils.clip_grad):
        for name in ("clip_grad_norm_", "clip_grad_value_"):
            _patch(module, name, clip, undo)
    _patch(torch.autograd, "backward", backward, undo)
    _patch(torch.autograd, "grad", grad, undo)
    _patch(torch.Tensor, "backward", tensor_backward, undo)
    _patch(torch.optim.Optimizer, "zero_grad", lambda old: zero_grad(
        old, lambda o: (p for g in o.param_groups for p in g["params"])), undo)
    _patch(nn.Module, "zero_grad", lambda old: zero_grad(old, nn.Module.parameters), undo)
    _patch(torch.Tensor, "detach", detach, undo)
    _patch(torch.Tensor, "grad", grad_attribute, undo)
    _patch(torch.amp.GradScaler, "step", scaler_step, undo)
    _patch(torch.optim.Optimizer, "__init__", built, undo)
    _patch(copy, "copy", shallow, undo)

    def requires_grad(old):
        # a leaf the script makes trainable: a new tensor in place of one an optimizer holds?
        # (a parameter switched back on after a freeze, as Dreamer's world model is after
        # imagination, is none: it was made where nn.Parameter made it); one it freezes:
        # where (a freeze under a condition on the run's progress)
        @functools.wraps(old)
        def wrapper(self, requires_grad=True):
            out = old(self, requires_grad)
            if requires_grad and not isinstance(self, nn.Parameter) and watch.optimizers \
                    and watch.here():
                watch.leaf_made(self)
            elif not requires_grad and watch.here():
                watch.switched_off(self)
            return out
        return wrapper

    _patch(torch.Tensor, "requires_grad_", requires_grad, undo)

    def reading(hook):
        """``hook`` calling :meth:`Watch.hook_read` as it runs, in a backward."""
        @functools.wraps(hook)
        def reads(*args, **kwargs):
            if watch.here():
                watch.hook_read()
            return hook(*args, **kwargs)
        return reads

    def register_hook(old):
        # a hook the script puts on a value it computes reads that value's gradient in the
        # backward (RigL's dense gradient, kept for the growth of its masks): a read
        @functools.wraps(old)
        def wrapper(self, hook):
            if self.grad_fn is None or not is_user(sys._getframe(1).f_code.co_filename):
                return old(self, hook)
            return old(self, reading(hook))
        return wrapper

    _patch(torch.Tensor, "register_hook", register_hook, undo)

    def register_backward_hook(old):
        # a module's backward hook the script registers reads the gradient at the module's
        # outputs in each backward (K-FAC's statistics of the output gradients, gathered by a
        # backward of a loss on sampled targets whose own gradient is then cleared: Martens
        # and Grosse 2015): a read
        @functools.wraps(old)
        def wrapper(self, hook, *args, **kwargs):
            if not is_user(sys._getframe(1).f_code.co_filename):
                return old(self, hook, *args, **kwargs)
            return old(self, reading(hook), *args, **kwargs)
        return wrapper

    for name in ("register_full_backward_hook", "register_full_backward_pre_hook",
                 "register_backward_hook"):
        _patch(nn.Module, name, register_backward_hook, undo)

    def sample(old):
        @functools.wraps(old)
        def wrapper(self, *args, **kwargs):
            out = old(self, *args, **kwargs)
            if watch.here() and isinstance(out, torch.Tensor):
                watch.sampled(self, out)
            return out
        return wrapper

    def log_prob(old):
        @functools.wraps(old)
        def wrapper(self, value, *args, **kwargs):
            if watch.here():
                watch.log_prob_read(value)
            return old(self, value, *args, **kwargs)
        return wrapper

    # each distribution's own sample and log_prob (a draw, and what weighs one)
    for cls in _distributions():
        if "sample" in vars(cls):
            _patch(cls, "sample", sample, undo)
        if "log_prob" in vars(cls):
            _patch(cls, "log_prob", log_prob, undo)
    new_parameter = vars(nn.Parameter)["__new__"]

    def parameter(cls, data=None, requires_grad=True):
        out = new_parameter(cls, data, requires_grad)
        if requires_grad and watch.optimizers and watch.here():
            watch.leaf_made(out)
        return out

    nn.Parameter.__new__ = staticmethod(parameter)  # type: ignore[assignment]
    undo.append((nn.Parameter, "__new__", new_parameter))
    def before_step(opt, args, kwargs) -> None:
        if watch.here():
            # the step's own arguments after the optimizer: ``step(closure)``
            closure = args[1] if len(args) > 1 else kwargs.get("closure")
            watch.step(opt, closure=closure)

    def after_step(opt, args, kwargs) -> None:
        if watch.here():
            watch.stepped(opt)

    def parameter_registered(module, name, param) -> None:
        if watch.here():
            watch.parameter_registered(module, name, param)

    def module_registered(module, name, submodule) -> None:
        if watch.here():
            watch.module_registered(module, name, submodule)

    handles = [register_optimizer_step_pre_hook(before_step),
               register_optimizer_step_post_hook(after_step),
               register_module_parameter_registration_hook(parameter_registered),
               register_module_module_registration_hook(module_registered)]
    watch._want_recording_hooks()
    try:
        yield watch
    finally:
        for h in handles:
            h.remove()
        try:
            watch.close()
        finally:   # torch as it was, even where the closing rules raise
            watch.grad_property = None
            for owner, name, old in reversed(undo):
                if old is None:
                    if name in vars(owner):   # ``Tensor.grad`` is there only while recorded
                        delattr(owner, name)
                else:
                    setattr(owner, name, old)
