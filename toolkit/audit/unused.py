"""Which parameters DistributedDataParallel will call unused, and why: before DDP says so.

Without ``find_unused_parameters=True``, DDP expects every parameter that requires grad to
receive a gradient in each backward. When one does not, the *next* iteration fails with::

    RuntimeError: Expected to have finished reduction in the prior iteration before starting a
    new one. This error indicates that your module has parameters that were not used in
    producing loss. ...
    Parameter indices which did not receive grad for rank 0: 2 3 4 5

(``TORCH_DISTRIBUTED_DEBUG=INFO`` or ``DETAIL`` makes it print their names instead of their
indices). The usual advice, ``find_unused_parameters=True``, hides the error, walks the graph
every iteration, and never says *why* a parameter got no gradient.
:func:`explain_unused_parameters` runs the step once through :func:`~toolkit.audit_step`
(twice, in fact, restoring the model's state), without DDP and without ``backward()``, and lists
exactly the parameters DDP will name, each with the reason and the line to change:

- **never used in forward** (a branch no code path calls): the line that defines it;
- **output not in the loss** (a head computed and dropped, an auxiliary output returned by
  ``forward`` but left out of the loss): the line that calls it;
- **cut** by ``.detach()`` / ``.data``, ``torch.no_grad()`` or a named ``stop_gradient``: the
  line of the cut.

Frozen parameters (``requires_grad=False`` when DDP is built) are left out of DDP's reducer,
so DDP never names them; they are listed apart, as information. Parameters DDP is told to
ignore (``DistributedDataParallel._set_params_and_buffers_to_ignore_for_model``) are left out.

References:
    PyTorch, ``torch.nn.parallel.DistributedDataParallel``,
    https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html ;
    the request for such a tool: https://github.com/pytorch/pytorch/issues/57776
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from toolkit.audit.findings import DeadParameter
from toolkit.audit.result import listing, plural
from toolkit.audit.step import audit_step

__all__ = ["UnusedParameter", "UnusedParameters", "explain_unused_parameters"]

_DDP_ERROR = ("Expected to have finished reduction in the prior iteration before starting a new "
              "one")
_FREEZE = "requires_grad_(False) before DDP wraps the model (DDP skips frozen parameters)"
_REASONS = {
    "not_used": ("never used in forward",
                 f"call it in forward or delete it; to keep it untrained, {_FREEZE}"),
    "no_graph": ("used, but its output is not in the loss",
                 f"put its output into the loss or stop computing it; to keep it untrained, "
                 f"{_FREEZE}"),
}
_CUT_FIX = f"remove the cut if it should train; if it should not, {_FREEZE}"


@dataclass(frozen=True)
class UnusedParameter:
    """A parameter that requires grad and gets no gradient from the step's loss.

    ``name``: as DDP names it (``module.named_parameters()``); ``kind``: ``"not_used"``,
    ``"no_graph"`` (output not in the loss), ``"detach"``, ``"no_grad"`` or ``"block"`` (the
    cuts); ``reason``: in words; ``line``: the line to change (``"at model.py:42 (forward)"``:
    the cut, the call whose output is dropped, or the definition of a module never called),
    when known; ``fix``: what to change there.
    """

    name: str
    shape: tuple[int, ...]
    kind: str
    reason: str
    line: str | None
    fix: str


@dataclass(frozen=True)
class UnusedParameters:
    """What :func:`explain_unused_parameters` found; ``str()`` prints the explanation.

    ``unused``: the parameters DDP will report (in ``named_parameters`` order); ``frozen``:
    parameters that do not require grad (DDP leaves them out and never reports them);
    ``ignored``: parameters DDP was told to ignore; ``n_parameters``: how many DDP watches.
    """

    unused: tuple[UnusedParameter, ...]
    frozen: tuple[str, ...]
    ignored: tuple[str, ...]
    n_parameters: int

    @property
    def names(self) -> frozenset[str]:
        """The names DDP prints with ``TORCH_DISTRIBUTED_DEBUG=INFO`` (or ``DETAIL``)."""
        return frozenset(p.name for p in self.unused)

    @property
    def ok(self) -> bool:
        """Every parameter DDP watches gets a gradient."""
        return not self.unused

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, each unused parameter as a dict."""
        return {"unused": [asdict(p) for p in self.unused], "frozen": list(self.frozen),
                "ignored": list(self.ignored), "n_parameters": self.n_parameters}

    def __str__(self) -> str:
        if self.ok:
            lines = [f"explain_unused_parameters: all {self.n_parameters} parameters that require "
                     f"grad get a gradient; DDP needs no find_unused_parameters"]
        else:
            lines = [f"explain_unused_parameters: {len(self.unused)} of {self.n_parameters} "
                     f"parameters that require grad get no gradient from the loss; DDP without "
                     f"find_unused_parameters=True names exactly these at the next iteration "
                     f"(\"{_DDP_ERROR}\"):"]
            groups: dict[tuple[str, str, str | None], list[UnusedParameter]] = {}
            for p in self.unused:
                groups.setdefault((p.reason, p.fix, p.line), []).append(p)
            for (reason, fix, line), items in groups.items():
                lines.append(f"  {listing([p.name for p in items], 4)}: {reason}")
                if line is not None:
                    lines.append(f"      where: {line}")
                lines.append(f"      fix:   {fix}")
        if self.frozen:
            lines.append(f"frozen ({plural(len(self.frozen), 'parameter')}, requires_grad=False: "
                         f"DDP leaves them out and never names them): {listing(list(self.frozen), 4)}")
        if self.ignored:
            lines.append(f"ignored by DDP: {listing(list(self.ignored), 4)}")
        return "\n".join(lines)


def _defined_at(root: nn.Module, name: str) -> str | None:
    """``at file.py:LINE (Owner.__init__)`` where ``self.<attr> = ...`` makes ``name`` (a
    submodule, or a parameter of ``root`` itself); an item of a ``Sequential`` or
    ``ModuleList`` is found at its container."""
    owner_name, _, attr = name.rpartition(".")
    try:
        owner = root.get_submodule(owner_name)
    except AttributeError:
        return None
    if attr.isdigit():
        return _defined_at(root, owner_name) if owner_name else None
    for cls in type(owner).__mro__:
        init = cls.__dict__.get("__init__")
        try:
            lines, start = inspect.getsourcelines(init)
            path = inspect.getsourcefile(init)
        except (OSError, TypeError):
            continue
        this = init.__code__.co_varnames[0] if init.__code__.co_argcount else "self"
        pattern = re.compile(rf"\b{this}\.{re.escape(attr)}\s*(:[^=]*)?=(?!=)")
        for i, text in enumerate(lines):
            if pattern.search(text):
                return f"at {os.path.basename(path or '?')}:{start + i} ({cls.__name__}.__init__)"
    return None


def _explain(dead: DeadParameter, root: nn.Module) -> UnusedParameter:
    module = dead.parameter.rpartition(".")[0]
    if dead.kind in _REASONS:
        reason, fix = _REASONS[dead.kind]
        line = dead.line if dead.kind == "no_graph" else _defined_at(root, module or dead.parameter)
        if dead.kind == "not_used" and line is not None:
            line = f"defined {line}"
        elif line is not None:
            line = f"called {line}"
    else:
        reason, fix = f"cut by {dead.cut}", _CUT_FIX
        line = dead.line
    return UnusedParameter(dead.parameter, dead.shape, dead.kind, reason, line, fix)


def explain_unused_parameters(model: nn.Module, step: Callable[[], Any], *,
                              restore_state: bool = True) -> UnusedParameters:
    """The parameters DDP will report as "not used in producing loss", each with its reason
    and the line to change (see the module's docstring).

    Call it on the model *before* wrapping it in ``DistributedDataParallel`` (or on
    ``ddp.module``), with a step that runs the forward and returns the loss, as DDP's backward
    would see it. It runs no ``backward()`` (no ``.grad`` is written) and no collective; with ``restore_state`` (the default)
    the model's state and the random generators are put back, as :func:`~toolkit.audit_step`
    does (it runs the step twice).

    Args:
        model: the module DDP wraps (a ``DistributedDataParallel`` is unwrapped; the step must
            then call ``ddp.module``, since a DDP forward without its backward breaks DDP's
            next iteration).
        step: zero-argument callable returning the loss (or a dict of losses, all
            backpropagated).
        restore_state: put the model's state and the random generators back.

    Returns:
        :class:`UnusedParameters`: ``names`` is the set DDP names, ``str()`` the explanation.

    >>> import torch
    >>> from torch import nn
    >>> from toolkit import explain_unused_parameters
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.body, self.head, self.aux = nn.Linear(3, 4), nn.Linear(4, 1), nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         h = self.body(x)
    ...         return self.head(h), self.aux(h)
    >>> net, x = Net(), torch.ones(2, 3)
    >>> found = explain_unused_parameters(net, lambda: net(x)[0].sum())
    >>> sorted(found.names), found.unused[0].reason
    (['aux.bias', 'aux.weight'], 'used, but its output is not in the loss')
    """
    where = "explain_unused_parameters"
    ddp = model if isinstance(model, DistributedDataParallel) else None
    if ddp is not None:
        model = ddp.module
    if not isinstance(model, nn.Module):
        raise TypeError(f"{where}: model must be an nn.Module (the one DDP wraps), got "
                        f"{type(model).__name__}")
    ignore = set(getattr(model, "_ddp_params_and_buffers_to_ignore", ()))
    named = [(n, p) for n, p in model.named_parameters() if n not in ignore]
    watched = [p for _, p in named if p.requires_grad]
    frozen = tuple(n for n, p in named if not p.requires_grad)
    ignored = tuple(n for n, _ in model.named_parameters() if n in ignore)
    if not watched:
        return UnusedParameters((), frozen, ignored, 0)
    handle = None
    if ddp is not None:
        def refuse(*_: Any) -> None:
            raise ValueError(f"{where}: the step calls the DistributedDataParallel wrapper; call "
                             f"its .module instead (a DDP forward without its backward breaks "
                             f"DDP's next iteration)")
        handle = ddp.register_forward_pre_hook(refuse)
    try:
        audit = audit_step(step, {"params": watched}, modules=model,
                           restore_state=restore_state, allow_trained_target=True)
    finally:
        if handle is not None:
            handle.remove()
    order = {n: i for i, (n, _) in enumerate(named)}
    dead = sorted(audit.dead, key=lambda d: order.get(d.parameter, len(order)))
    return UnusedParameters(tuple(_explain(d, model) for d in dead), frozen, ignored,
                            len(watched))
