"""How the step audit names tensors: by module path, found in the step's closure.

:func:`find_modules` searches a step (a function, a bound method, a ``functools.partial``) for
the modules and tensors it uses: its closure, bound ``self``, ``partial`` arguments and the
globals its code reads. :class:`Names` then names every parameter and buffer by module path
(``q_target.2.bias``), and the optimizers' remaining tensors by position.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = ["Names", "find_modules", "held_in"]

_MAX_VISITS = 400  # objects looked at when searching a step for modules

#: containers of more items are passed over: a dataset or a replay buffer holds no network
MOST_HELD = 1024


def held_in(name: str, value: Any) -> list[tuple[str, nn.Module]]:
    """The networks a plain list, tuple or dict named ``name`` holds, each by its place there
    (``members[0]``, ``experts['a']``); none for another value, or one of over
    :data:`MOST_HELD` items."""
    if not isinstance(value, list | tuple | dict) or len(value) > MOST_HELD:
        return []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return [(f"{name}[{key!r}]", v) for key, v in items
            if isinstance(v, nn.Module) and isinstance(key, str | int)]


def _referenced(fn: types.FunctionType) -> list[tuple[str, Any]]:
    """The closure cells, defaults and globals that ``fn``'s code reads, by name."""
    code = fn.__code__
    found: list[tuple[str, Any]] = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        with contextlib.suppress(ValueError):  # an empty cell
            found.append((name, cell.cell_contents))
    for name in code.co_names:
        if name in fn.__globals__:
            found.append((name, fn.__globals__[name]))
    for i, value in enumerate(fn.__defaults__ or ()):
        found.append((code.co_varnames[code.co_argcount - len(fn.__defaults__) + i], value))
    return found


def _library(fn: Any) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module.split(".")[0] in ("torch", "numpy", "builtins", "functools", "toolkit")


def find_modules(step: Any) -> list[tuple[str, nn.Module | torch.Tensor]]:
    """Modules (and leaf tensors that require grad) reachable from the callable ``step``.

    A breadth-first search through ``functools.partial`` arguments, a bound method's ``self``
    (its attributes are named without a prefix), a callable object's attributes, the closure
    cells, defaults and read globals of functions (and of the functions they reference), and
    the items of small dicts, lists and tuples. Python modules, classes and tensors that do not
    require grad are skipped; at most a few hundred objects are looked at. Returns
    ``(path, object)`` pairs in the order found (shortest paths first).
    """
    queue: deque[tuple[str, Any, int]] = deque([("", step, 0)])
    seen: set[int] = set()
    found: list[tuple[str, nn.Module | torch.Tensor]] = []

    def join(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    while queue and len(seen) < _MAX_VISITS:
        path, obj, depth = queue.popleft()
        if id(obj) in seen or depth > 4:
            continue
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            found.append((path, obj))
            continue
        if isinstance(obj, torch.Tensor):
            if (obj.requires_grad or isinstance(obj, nn.Parameter)) and obj.grad_fn is None \
                    and path:
                found.append((path, obj))
            continue
        if isinstance(obj, (types.ModuleType, type, str, bytes, int, float, bool, type(None))):
            continue
        containers = (Mapping, list, tuple, functools.partial, types.MethodType)
        if depth and not isinstance(obj, containers) and _library(
                obj if isinstance(obj, types.FunctionType) else type(obj)):
            continue  # torch's, numpy's and the toolkit's own objects hold no user module
        children: list[tuple[str, Any]] = []
        if isinstance(obj, functools.partial):
            children = [(path, obj.func), *[(join(path, f"args[{i}]"), a)
                                            for i, a in enumerate(obj.args)],
                        *[(join(path, k), v) for k, v in obj.keywords.items()]]
        elif isinstance(obj, types.MethodType):
            children = [(path, obj.__self__), (path, obj.__func__)]
        elif isinstance(obj, types.FunctionType):
            children = _referenced(obj)  # a variable is named by its own name
        elif isinstance(obj, Mapping):
            if len(obj) <= 64:
                children = [(join(path, str(k)), v) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            if len(obj) <= 64:
                children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
        elif hasattr(obj, "__dict__"):
            children = [(join(path, k), v) for k, v in vars(obj).items()]
        queue.extend((p, v, depth + 1) for p, v in children)
    return found


@dataclass
class Names:
    """``id -> name`` for the tensors the audit knows, and ``id -> name`` for module objects."""

    tensors: dict[int, str] = field(default_factory=dict)
    objects: dict[int, torch.Tensor] = field(default_factory=dict)
    modules: dict[int, str] = field(default_factory=dict)
    roots: list[nn.Module] = field(default_factory=list)
    by_label: dict[str, nn.Module] = field(default_factory=dict)

    def add_module(self, prefix: str, module: nn.Module) -> None:
        if id(module) in self.modules:
            return
        self.roots.append(module)
        for sub_name, sub in module.named_modules(remove_duplicate=True):
            label = ".".join(p for p in (prefix, sub_name) if p) or type(module).__name__
            self.modules.setdefault(id(sub), label)
            self.by_label.setdefault(label, sub)
        for name, tensor in [*module.named_parameters(remove_duplicate=True),
                             *module.named_buffers(remove_duplicate=True)]:
            self.add_tensor(".".join(p for p in (prefix, name) if p), tensor)

    def add_tensor(self, name: str, tensor: torch.Tensor) -> None:
        if id(tensor) not in self.tensors:
            self.tensors[id(tensor)] = name
            self.objects[id(tensor)] = tensor

    def members(self, label: str) -> frozenset[int]:
        """``id`` of the parameters and buffers of the module named ``label`` (none if unknown)."""
        module = self.by_label.get(label)
        if module is None:
            return frozenset()
        return frozenset(id(t) for t in [*module.parameters(), *module.buffers()])

    def name(self, tensor: torch.Tensor) -> str:
        """The tensor's name, or ``<Parameter (2, 3)>`` / ``<tensor (2, 3)>`` for one not found."""
        known = self.tensors.get(id(tensor))
        if known is not None:
            return known
        kind = "Parameter" if isinstance(tensor, nn.Parameter) else "tensor"
        return f"<{kind} {tuple(tensor.shape)}>"
