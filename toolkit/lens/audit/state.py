"""Module state around the step audit: saved before the step's two calls, put back after.

Running a training step twice does what two steps do to everything it touches: a BatchNorm's
running statistics move twice (``num_batches_tracked`` grows by 2), the random generators
advance, an EMA update inside the step is applied twice. :class:`StateSnapshot` saves what
:func:`toolkit.lens.audit.audit_step` can put back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from toolkit._utils.rng import get_rng_state, set_rng_state

__all__ = ["StateSnapshot"]


def _plural_modules(n: int) -> str:
    return "1 module" if n == 1 else f"{n} modules"


class StateSnapshot:
    """Parameters, buffers, ``training`` and ``requires_grad`` flags, and the random generators.

    Buffers (a BatchNorm's running statistics) are copied at once; a parameter is copied only
    when the step is about to write it (copy on write: :meth:`before_write`, called by the
    recording), so a step that writes no parameter costs no copy of the model. :meth:`restore`
    puts back every tensor object a module held (if the step replaced it), the values that
    changed, the flags and the generators (``random``, numpy, torch CPU, and CUDA when
    initialized). Tensors outside modules (``loose``: an optimizer's parameters) are restored
    by value. A buffer the step wrote from values with a graph (it now has a ``grad_fn``) is
    detached in place before its values are put back.
    """

    def __init__(self, modules: list[nn.Module], loose: list[torch.Tensor],
                 names: Mapping[int, str] | None = None) -> None:
        self.names = dict(names or {})
        # id -> [tensor, saved copy or None, requires_grad, version counter]
        self.saved: dict[int, list[Any]] = {}
        self.slots: list[tuple[nn.Module, str, torch.Tensor]] = []
        self.training: list[tuple[nn.Module, bool]] = []
        seen_modules: set[int] = set()
        for root in modules:
            for module in root.modules():
                if id(module) in seen_modules:
                    continue
                seen_modules.add(id(module))
                self.training.append((module, module.training))
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
        modes = [m for m, training in self.training if m.training != training]
        for module, training in self.training:
            module.training = training
        if modes:
            changed.append(f"train/eval mode of {_plural_modules(len(modes))}")
        set_rng_state(self.rng)
        return list(dict.fromkeys(changed)), lost
