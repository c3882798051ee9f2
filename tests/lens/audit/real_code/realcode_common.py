"""The real-code corpus: what a case is, and the oracle that checks the audit by real backward.

Each case is a training step written from a public repository (named in its docstring with the
path, the commit and the issue or pull request that confirms its bug or its correctness),
keeping its modules, parametrizations, optimizers, the order of its calls and its bug, at tiny
sizes. ``truth`` is ``"correct"`` or the category its bug must be reported in.

The oracle runs the same step on fresh copies (the builder called again with the same seed) the
way training does: a first step with ``backward()``, then a second step whose losses are
backpropagated one at a time, gradients cleared in between. It records which named tensors
outside each loss's optimizer receive ``.grad``, which stepped tensors receive none (and which
receive exact zeros everywhere, as behind ``torch.sign``), whether a
backward fails (graph carried from the first step), and which buffers hold a ``grad_fn``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class RealCase:
    """One training step from public code: ``step()`` returns its losses (no backward)."""

    name: str
    source: str  # "owner/repo path@commit"
    confirms: str  # the issue or pull request that confirms the bug or the correctness
    truth: str  # "correct", "leaks", "targets", "dead", "carried" or "held"
    step: Callable[[], Any]
    optimizers: Any  # an optimizer, or a dict loss name -> optimizer
    modules: dict[str, nn.Module]
    expect_pass_through: bool = False  # the correct step passes through a module (a critic)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # leaves outside modules
    notes: dict[str, Any] = field(default_factory=dict)


def named(case: RealCase) -> dict[int, str]:
    """``id -> name`` of every parameter and buffer of the case's modules (the audit's names
    when it is given ``modules=case.modules``)."""
    out: dict[int, str] = {}
    for prefix, module in case.modules.items():
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            out.setdefault(id(t), f"{prefix}.{name}")
    for name, t in case.tensors.items():
        out.setdefault(id(t), name)
    return out


def _losses(out: Any) -> dict[str, torch.Tensor]:
    return dict(out) if isinstance(out, dict) else {"loss": out}


def _pairs(case: RealCase, losses: dict[str, torch.Tensor]) -> dict[str, Any]:
    if isinstance(case.optimizers, dict):
        return {name: case.optimizers[name] for name in losses}
    return {name: case.optimizers for name in losses}


def stepped_by(optimizer: Any) -> list[torch.Tensor]:
    """What an optimizer (or a module trained by hand, ``p.data.add_(p.grad)``) steps."""
    if isinstance(optimizer, nn.Module):
        return list(optimizer.parameters())
    return [p for group in optimizer.param_groups for p in group["params"]]


@dataclass
class Oracle:
    """What real backward passes did (see the module's docstring); sets of tensor names."""

    outside: dict[str, set[str]]  # loss -> named tensors with .grad its optimizer does not step
    no_grad: dict[str, set[str]]  # loss -> tensors its optimizer steps that got no .grad
    backward_failed: bool
    held_buffers: set[str]
    #: loss -> tensors its optimizer steps whose gradient is exact zeros everywhere (behind a
    #: zero-derivative op; also where a clamp or a max zeroes it for these inputs)
    zeros: dict[str, set[str]] = field(default_factory=dict)


def oracle(build: Callable[[], RealCase]) -> Oracle:
    """Train two steps of a fresh copy of the case, with real ``backward()``.

    When a backward of the second step fails (graph carried from the first, already freed),
    the gradient sets come from a second fresh copy whose first step keeps its graph.
    """
    failed = _train(build(), retain_first=False) is None
    found = _train(build(), retain_first=True)
    assert found is not None, "the second step fails even with the first step's graph kept"
    found.backward_failed = failed
    return found


def _train(case: RealCase, *, retain_first: bool) -> Oracle | None:
    names = named(case)
    tensors = {id(t): t for m in case.modules.values() for t in m.parameters()}
    tensors.update({id(t): t for t in case.tensors.values()})

    def clear() -> None:
        for t in tensors.values():
            t.grad = None

    first = _losses(case.step())
    torch.autograd.backward([v for v in first.values() if v.requires_grad],
                            retain_graph=retain_first)
    clear()
    losses = _losses(case.step())
    pairs = _pairs(case, losses)
    outside, missing, zeros = {}, {}, {}
    for i, (name, loss) in enumerate(losses.items()):
        clear()
        try:
            if loss.requires_grad:
                torch.autograd.backward(loss, retain_graph=i < len(losses) - 1)
        except RuntimeError as err:
            if "second time" not in str(err) and "freed" not in str(err):
                raise
            return None
        stepped = {id(p) for p in stepped_by(pairs[name])}
        got = {k for k, t in tensors.items() if t.grad is not None}
        outside[name] = {names[k] for k in got - stepped if k in names}
        missing[name] = {names.get(k, f"<{k}>") for k in stepped - got}
        zeros[name] = {names.get(k, f"<{k}>") for k in stepped & got
                       if not tensors[k].grad.is_sparse and not tensors[k].grad.any()}
    for group in {id(o): [n for n in losses if pairs[n] is o] for o in pairs.values()}.values():
        common = set.intersection(*(missing[n] for n in group))
        for n in group:
            missing[n] = common
    held = {f"{prefix}.{name}" for prefix, m in case.modules.items()
            for name, b in m.named_buffers() if b.grad_fn is not None}
    clear()
    return Oracle(outside, missing, False, held, zeros)


#: the dead kinds whose tensors backward gives a gradient of exact zeros (not none)
_ZEROS = ("zero_derivative", "cancelled")


def audit_sets(audit: Any, case: RealCase) -> Oracle:
    """The same sets, read from a :class:`~toolkit.StepAudit` of ``case``."""
    names = named(case)
    outside: dict[str, set[str]] = {name: set() for name in audit.losses}
    for leak in [*audit.leaks, *audit.pass_through]:
        if "updated twice" not in leak.reason:
            outside[leak.loss].add(leak.parameter)
    no_grad: dict[str, set[str]] = {name: set() for name in audit.losses}
    zeros: dict[str, set[str]] = {name: set() for name in audit.losses}
    for d in audit.dead:  # dead in effect: a gradient of zeros, which real backward computes
        for loss in d.losses:
            (zeros if d.kind in _ZEROS else no_grad)[loss].add(d.parameter)
    frozen = {f.parameter for f in audit.frozen}
    optimizers = case.optimizers if isinstance(case.optimizers, dict) else {
        name: case.optimizers for name in audit.losses}
    for loss in audit.losses:
        mine = {names.get(id(p)) for p in stepped_by(optimizers[loss])}
        no_grad[loss] |= frozen & mine
    held = {f"{h.module}.{h.name}" for h in audit.held if h.kind == "buffer"}
    return Oracle(outside, no_grad, bool(audit.carried), held, zeros)
