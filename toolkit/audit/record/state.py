"""Module and optimizer state around the step audit: saved before the step's two calls, put
back after.

Running a training step twice does what two steps do to everything it touches: a BatchNorm's
running statistics move twice (``num_batches_tracked`` grows by 2), the random generators
advance, an EMA update inside the step is applied twice, and a step that calls ``backward()``
and ``optimizer.step()`` itself accumulates ``.grad`` and moves the optimizer's state (Adam's
step count and moments). A step that calls ``scaler.update()`` or ``scheduler.step()`` moves a
``GradScaler``'s growth tracker and a learning-rate scheduler's epoch. :class:`StateSnapshot`
saves what :func:`toolkit.audit.audit_step` can put back.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.optim import lr_scheduler

from toolkit._utils.rng import get_rng_state, set_rng_state

__all__ = ["STATEFUL", "StateSnapshot"]

#: ``(class, method)``: the objects with a ``state_dict()`` that a training step moves by calling
#: that method, saved before their first call in the audit (:meth:`StateSnapshot.save_stateful`):
#: ``GradScaler.update`` (scale and growth tracker) and every ``step`` torch's schedulers define
STATEFUL: tuple[tuple[type, str], ...] = (
    (torch.amp.GradScaler, "update"),
    *((c, "step") for c in vars(lr_scheduler).values()
      if isinstance(c, type) and issubclass(c, lr_scheduler.LRScheduler) and "step" in vars(c)),
)


_SCALARS = (bool, int, float, str, type(None))
_MISSING = object()


def _plural_modules(n: int) -> str:
    return "1 module" if n == 1 else f"{n} modules"


def _equal(a: Any, b: Any) -> bool:
    """Whether two saved values (tensors, numbers, tuples of them) are the same."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return a is b


class StateSnapshot:
    """Parameters, buffers, ``.grad``, ``training`` and ``requires_grad`` flags, the plain
    numbers a module keeps (a step counter), optimizers' state, and the random generators.

    Buffers (a BatchNorm's running statistics) are copied at once; a parameter is copied only
    when the step is about to write it (copy on write: :meth:`before_write`, called by the
    recording), so a step that writes no parameter costs no copy of the model. :meth:`restore`
    puts back every tensor object a module held (if the step replaced it), the values that
    changed, the flags and the generators (``random``, numpy, torch CPU, and CUDA when
    initialized). Tensors outside modules (``loose``: an optimizer's parameters) are restored
    by value. A buffer the step wrote from values with a graph (it now has a ``grad_fn``) is
    detached in place before its values are put back. The ``.grad`` of every tensor saved is
    kept (the object and a copy of its values, when it has one) and put back, ``None`` included.
    An optimizer is saved when it is about to step (:meth:`save_optimizer`, called by the
    recording's optimizer hook): its per-tensor state, its param groups' settings and its
    tensors' values. A ``GradScaler`` or a scheduler is saved when it is about to move
    (:meth:`save_stateful`): its ``state_dict()``, put back with its ``load_state_dict()``.
    """

    def __init__(self, modules: list[nn.Module], loose: list[torch.Tensor],
                 names: Mapping[int, str] | None = None) -> None:
        self.names = dict(names or {})
        # id -> [tensor, saved copy or None, requires_grad, version counter]
        self.saved: dict[int, list[Any]] = {}
        self.slots: list[tuple[nn.Module, str, torch.Tensor]] = []
        # id -> [tensor, its .grad object (or None), a copy of that .grad's values]
        self.grads: dict[int, list[Any]] = {}
        # id(optimizer) -> (optimizer, {tensor: {key: (value, copy)}}, param groups' settings)
        self.optimizers: dict[int, tuple[Any, dict[Any, dict[str, Any]], list[dict[str, Any]]]] = {}
        # id(object) -> (object, a copy of its state_dict(), or None where it cannot be copied)
        self.stateful: dict[int, tuple[Any, dict[str, Any] | None]] = {}
        self.born: set[int] = set()  # id of the schedulers the step itself made
        self.training: list[tuple[nn.Module, bool]] = []
        # (module, attribute, value): plain numbers and flags a module keeps (a step counter)
        self.scalars: list[tuple[nn.Module, str, Any]] = []
        seen_modules: set[int] = set()
        for root in modules:
            for module in root.modules():
                if id(module) in seen_modules:
                    continue
                seen_modules.add(id(module))
                self.training.append((module, module.training))
                self.scalars.extend((module, k, v) for k, v in vars(module).items()
                                    if k != "training" and not k.startswith("__")
                                    and isinstance(v, _SCALARS))
                for eager, named in ((False, module.named_parameters(recurse=False)),
                                     (True, module.named_buffers(recurse=False))):
                    for name, t in named:
                        self.slots.append((module, name, t))
                        self._track(t, eager)
        for t in loose:
            self._track(t, False)
        self.rng = get_rng_state()

    def track(self, t: torch.Tensor) -> None:
        """Save ``t`` too (copied on its first write, like a parameter)."""
        self._track(t, False)

    def _track(self, t: torch.Tensor, eager: bool) -> None:
        if id(t) not in self.saved:
            self.saved[id(t)] = [t, t.detach().clone() if eager else None, t.requires_grad,
                                 getattr(t, "_version", None)]
            grad = t.grad if t.is_leaf else None  # a non-leaf's .grad is never kept
            self.grads[id(t)] = [t, grad, None if grad is None else grad.detach().clone()]

    def save_optimizer(self, optimizer: Any) -> None:
        """Save ``optimizer`` before its first ``step()`` in the audit: its state per tensor
        (each tensor value kept with a copy: Adam's ``step``, ``exp_avg``), its param groups'
        settings, and its tensors (values and ``.grad``)."""
        if id(optimizer) in self.optimizers:
            return
        state = {p: {k: (v, v.detach().clone() if isinstance(v, torch.Tensor)
                         else copy.deepcopy(v)) for k, v in entries.items()}
                 for p, entries in optimizer.state.items()}
        groups = [{k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
                  for group in optimizer.param_groups]
        self.optimizers[id(optimizer)] = (optimizer, state, groups)
        for group in optimizer.param_groups:
            for p in group["params"]:
                self._track(p, False)
                self.before_write(id(p))

    def save_stateful(self, obj: Any) -> None:
        """Save ``obj`` (a :data:`STATEFUL` object: a ``GradScaler``, a scheduler) before its
        first move in the audit: a copy of its ``state_dict()``, and a scheduler's optimizer
        (whose learning rates it writes)."""
        if getattr(obj, "_step_count", None) == 0:  # a scheduler's first step, in its
            self.born.add(id(obj))  # __init__: made by the step, gone with the call
        if id(obj) in self.stateful or id(obj) in self.born:
            return
        try:
            saved: dict[str, Any] | None = copy.deepcopy(obj.state_dict())
        except Exception:  # the user's state_dict(): never fail their step
            saved = None
        self.stateful[id(obj)] = (obj, saved)
        optimizer = getattr(obj, "optimizer", None)
        if isinstance(optimizer, torch.optim.Optimizer):
            self.save_optimizer(optimizer)

    def before_write(self, key: int) -> None:
        """Copy the tensor ``id == key`` before its first write."""
        entry = self.saved.get(key)
        if entry is not None and entry[1] is None:
            entry[1] = entry[0].detach().clone()

    @staticmethod
    def _put_back(t: torch.Tensor, saved: torch.Tensor) -> bool:
        if t.shape != saved.shape or t.dtype != saved.dtype or t.device != saved.device:
            t.data = saved.clone()
        elif not torch.equal(t, saved):
            t.copy_(saved)
        else:
            return False
        return True

    def restore(self) -> tuple[list[str], list[str]]:
        """Put everything back; returns the names of what had changed, and of what changed
        without the recording seeing the write (not restored)."""
        changed, lost = [], []
        with torch.no_grad():
            for module, name, t in self.slots:
                if getattr(module, name, None) is not t:
                    setattr(module, name, t)
                    changed.append(self.names.get(id(t), name))
            for t, saved, requires_grad, version in self.saved.values():
                label = self.names.get(id(t), "a tensor")
                if t.grad_fn is not None and saved is not None:  # written from a graph
                    try:
                        t.detach_()
                    except RuntimeError:  # a view: cannot be detached in place
                        lost.append(f"the graph held by {label}")
                if saved is not None and self._put_back(t, saved):
                    changed.append(label)
                elif saved is None and version is not None and t._version != version:
                    lost.append(label)
                if t.requires_grad != requires_grad and t.grad_fn is None:
                    t.requires_grad_(requires_grad)
                    changed.append(f"requires_grad of {label}")
        changed += self._restore_grads()
        changed += self._restore_optimizers()
        for obj, saved in self.stateful.values():
            label = f"the state of {type(obj).__name__}"
            if saved is None:
                lost.append(label)
            elif not _equal(obj.state_dict(), saved):
                obj.load_state_dict(copy.deepcopy(saved))
                changed.append(label)
        modes = [m for m, training in self.training if m.training != training]
        for module, training in self.training:
            module.training = training
        if modes:
            changed.append(f"train/eval mode of {_plural_modules(len(modes))}")
        for module, key, value in self.scalars:
            now = vars(module).get(key, _MISSING)
            if now is not value and now != value:
                object.__setattr__(module, key, value)
                changed.append(f"{type(module).__name__}.{key}")
        set_rng_state(self.rng)
        return list(dict.fromkeys(changed)), lost

    def _restore_grads(self) -> list[str]:
        """Put each saved tensor's ``.grad`` back (object and values); returns what changed."""
        changed = []
        with torch.no_grad():
            for t, grad, values in self.grads.values():
                if not t.is_leaf:
                    continue
                now = t.grad
                if grad is None:
                    if now is not None:
                        t.grad = None
                        changed.append(f".grad of {self.names.get(id(t), 'a tensor')}")
                    continue
                moved = now is not grad or not torch.equal(grad, values)
                if moved:
                    grad.copy_(values)
                    t.grad = grad
                    changed.append(f".grad of {self.names.get(id(t), 'a tensor')}")
        return changed

    def _restore_optimizers(self) -> list[str]:
        """Put each saved optimizer's state and settings back; returns what changed."""
        changed = []
        for optimizer, state, groups in self.optimizers.values():
            moved = False
            for p in list(optimizer.state):
                if p not in state:  # state the audit's calls created
                    del optimizer.state[p]
                    moved = True
            for p, entries in state.items():
                now = optimizer.state.get(p, {})
                restored = {}
                for k, (value, saved) in entries.items():
                    if isinstance(value, torch.Tensor):
                        if now.get(k) is not value or not torch.equal(value, saved):
                            moved = True
                            with torch.no_grad():
                                value.copy_(saved)
                        restored[k] = value
                    else:
                        moved |= not _equal(now.get(k), saved)
                        restored[k] = copy.deepcopy(saved)
                moved |= set(now) != set(restored)
                optimizer.state[p] = restored
            for group, saved_group in zip(optimizer.param_groups, groups):
                for k, v in saved_group.items():
                    if not _equal(group.get(k), v):
                        moved = True
                        group[k] = copy.deepcopy(v)
            if moved:
                changed.append(f"the state of {type(optimizer).__name__}")
        return changed
