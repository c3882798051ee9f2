"""The tensors a value holds, and where their values live: what the running script's rules
(:mod:`toolkit.audit.rules.running`) key tensors by when they follow a value from one call to
the next."""

from __future__ import annotations

import torch

__all__ = ["keyed", "nonzero", "storage_of", "tensors_in"]


def tensors_in(value: object) -> list[torch.Tensor]:
    """The tensors of ``value``: itself, or those nested in its lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v)]
    return []


def storage_of(t: torch.Tensor) -> int:
    """Where ``t``'s values live (a view shares it with its base); a tensor with no storage
    (a functional or meta tensor) is its own place."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


def nonzero(t: torch.Tensor) -> bool:
    """``bool(t.any())``: whether a value of ``t`` is not zero (a NaN is not zero), read from
    its largest value, then its smallest: on the CPU ``any`` reads the values one at a time,
    ten times slower than a reduction over a gradient's floats."""
    if not t.numel():
        return False
    if t.layout != torch.strided or t.is_complex():
        return bool(t.any())
    try:
        return t.max().item() != 0 or t.min().item() != 0
    except (RuntimeError, NotImplementedError):   # a dtype with no max (a float8)
        return bool(t.any())


def keyed(index: int, opt: torch.optim.Optimizer) -> list[tuple[str, torch.Tensor]]:
    """Each tensor ``opt`` (the ``index``-th optimizer) holds, with its stable key
    ``opt<index>.<group>.<position>``."""
    return [(f"opt{index}.{g}.{k}", p) for g, group in enumerate(opt.param_groups)
            for k, p in enumerate(group["params"])]
