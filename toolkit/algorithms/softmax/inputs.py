"""Argument checks of the softmax functions: conversion to a floating tensor, ``dim``, masks.

Checked once, at the public entry points, with the toolkit's conventions (``TypeError`` for a
wrong kind, ``ValueError`` for a wrong value, the message naming the function and argument).
Conversion follows ``torch.softmax`` rather than :func:`toolkit._utils.array_validation.as_tensor`: a list
of Python floats becomes float32 (torch's default dtype), and integer input is refused unless
``dtype`` says what to compute in, as torch does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import torch

from toolkit._utils.array_validation import as_numeric_array, check_dtype, check_storage
from toolkit._utils.param_validation import is_int


def to_tensor(x: Any, *, where: str, arg: str) -> torch.Tensor:
    """``x`` as a tensor: tensors as they are, Python numbers and lists as ``torch.as_tensor``
    makes them (floats in torch's default dtype), everything else (numpy, pandas,
    scipy.sparse, text) converted or refused as every entry point of the toolkit does."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple, numbers.Number)):
        try:
            return torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{where}: {arg} must be a tensor or array-like of numbers, "
                            f"got {type(x).__name__}") from err
    return torch.as_tensor(as_numeric_array(where, arg, x))


def as_float_tensor(x: Any, dtype: torch.dtype | None, *, where: str, arg: str = "x"
                    ) -> torch.Tensor:
    """``x`` as a floating tensor, cast to ``dtype`` when given."""
    if dtype is not None:
        check_dtype(where, dtype)
    x = to_tensor(x, where=where, arg=arg)
    # a sparse x: its softmax is dense (exp(0) = 1 at every unstored entry), so it is refused
    # with the conversion that gives it; torch.sparse.softmax is another function (unstored
    # entries as -inf)
    check_storage(where, arg, x, allow_meta=True)
    if dtype is not None:
        return x.to(dtype)
    if not x.is_floating_point():
        raise TypeError(f"{where}: {arg} must be a floating-point tensor, got {x.dtype}; pass "
                        f"dtype=torch.float32 (or float64) to compute in floating point")
    return x


def check_dims(dim: Any, ndim: int, shape: torch.Size, *, where: str) -> tuple[int, ...]:
    """Normalise ``dim`` (int or sequence of ints) to sorted non-negative ints, validated."""
    if not is_int(dim) and (not isinstance(dim, Sequence) or isinstance(dim, str)):
        raise TypeError(f"{where}: dim must be an int or a tuple of ints, "
                        f"got {type(dim).__name__} {dim!r}")
    dims = (dim,) if is_int(dim) else tuple(dim)
    if not dims:
        raise ValueError(f"{where}: dim must name at least one dimension, got {dim!r}")
    rank = max(ndim, 1)  # a 0-d tensor accepts dim 0 / -1, as in torch.softmax
    out = []
    for d in dims:
        if not is_int(d):
            raise TypeError(f"{where}: dim must be an int or a tuple of ints, got {dim!r}")
        if not -rank <= d < rank:
            raise ValueError(f"{where}: dim {d} is out of range for a tensor with {ndim} "
                             f"dimension(s) (expected {-rank} <= dim < {rank})")
        out.append(int(d) % rank)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: dim must not repeat a dimension, got {dim!r}")
    if ndim > 0:
        for d in out:
            if shape[d] == 0:
                raise ValueError(f"{where}: cannot reduce over dimension {d} of size 0 "
                                 f"(x has shape {tuple(shape)})")
    return tuple(sorted(out))


def check_mask(mask: Any, shape: torch.Size, device: torch.device, *, where: str,
               arg: str = "where") -> torch.Tensor:
    """A boolean mask that broadcasts to ``shape``, on ``device``."""
    mask = to_tensor(mask, where=where, arg=arg)
    check_storage(where, arg, mask, allow_meta=device.type == "meta")
    if mask.dtype != torch.bool:
        raise TypeError(f"{where}: {arg} must be a boolean tensor, got {mask.dtype}")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        broadcast = None
    if broadcast != shape:
        raise ValueError(f"{where}: {arg} of shape {tuple(mask.shape)} does not broadcast to x's "
                         f"shape {tuple(shape)}")
    return mask.to(device)


def prepare(x: Any, dim: Any, where: Any, dtype: Any, *, name: str
            ) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Validated input with masked entries replaced by ``-inf``, and the normalised dims."""
    x = as_float_tensor(x, dtype, where=name)
    dims = check_dims(dim, x.ndim, x.shape, where=name)
    if where is not None:
        mask = check_mask(where, x.shape, x.device, where=name)
        # masked_fill, not torch.where: the masked entries get exactly zero gradient, even when
        # x holds inf/nan there (no 0 * inf in the backward).
        x = x.masked_fill(~mask, -math.inf)
    return x, dims
