"""What an autograd node saved for its backward: the ``_saved_*`` attributes autograd gives each
node (a tensor, a list of tensors, or something else). The first ``backward()`` through a node
frees them; reading one afterwards raises ``RuntimeError``. The carried, held and kept rules
all ask it: whether a graph kept across calls fails or grows, and what it costs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["holds_saved", "saved_bytes", "saved_values"]


#: a saved value a backward freed already
_FREED = object()


def _values(node: Any) -> Iterator[Any]:
    """Each value ``node`` saved (a saved list's items one by one), :data:`_FREED` for one a
    backward freed already."""
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed by a backward already
            yield _FREED
            continue
        yield from value if isinstance(value, (list, tuple)) else [value]


def _saved(node: Any) -> Iterator[torch.Tensor | None]:
    """Each tensor ``node`` saved, ``None`` for a saved value a backward freed already."""
    for value in _values(node):
        if value is _FREED:
            yield None
        elif isinstance(value, torch.Tensor):
            yield value


def saved_values(node: Any) -> Iterator[Any]:
    """Each value ``node`` saved that a backward has not freed: a tensor, or an argument that
    is none (a slice's start, a selection's index), the tensors of a saved list one by one."""
    return (value for value in _values(node) if value is not _FREED)


def holds_saved(node: Any) -> bool:
    """Whether the autograd node ``node`` holds tensors saved for its backward (or held them:
    a backward already freed them), which the first ``backward()`` through it frees."""
    return next(_saved(node), False) is not False


def saved_bytes(node: Any, seen: set[int]) -> int:
    """Bytes of the tensors ``node`` saved for backward (each storage counted once in
    ``seen``); a storage already freed by a backward counts 0."""
    total = 0
    for t in _saved(node):
        if t is not None:
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total
