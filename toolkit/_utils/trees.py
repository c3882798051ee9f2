"""The toolkit's one tree map, over the nested structures a PyTorch training step passes around.

:func:`toolkit.stop_gradient` cuts every tensor leaf of a structure with it, the lens marks
them, and :func:`toolkit.lens.graph_walk.output_roots` collects them: one definition of what a
leaf is, for the primitive and for the tools that read its graphs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["tree_map"]


def tree_map(fn: Callable[[Any], Any], x: Any) -> Any:
    """``x`` rebuilt with ``fn(leaf)`` in place of every leaf.

    Containers are dicts (and dict subclasses), lists, tuples, namedtuples and dataclass
    instances, nested to any depth; they are rebuilt with the same type (a dataclass by a
    shallow copy whose fields are replaced, frozen ones too), in their own order. Everything
    else is a leaf, a tensor always (even a tensor subclass). ``fn`` is called once per leaf,
    in that order, so it may also collect leaves (:func:`toolkit.lens.graph_walk.output_roots`).
    Like ``jax.tree_util.tree_map``, for the structures a PyTorch training step passes around.

    >>> import torch
    >>> tree_map(lambda t: t * 2, {"a": torch.tensor(1.0), "b": [torch.tensor(2.0), "x"]})
    {'a': tensor(2.), 'b': [tensor(4.), 'xx']}
    """
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, dict):
        items = [(k, tree_map(fn, v)) for k, v in x.items()]
        if type(x) is dict:
            return dict(items)
        out = copy.copy(x)
        out.clear()
        out.update(items)
        return out
    if isinstance(x, tuple):
        values = [tree_map(fn, v) for v in x]
        if hasattr(x, "_fields"):  # namedtuple
            return type(x)(*values)
        return type(x)(values)
    if isinstance(x, list):
        values = [tree_map(fn, v) for v in x]
        return values if type(x) is list else type(x)(values)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        out = copy.copy(x)
        for field in dataclasses.fields(x):
            # object.__setattr__ also works for frozen dataclasses
            object.__setattr__(out, field.name, tree_map(fn, getattr(x, field.name)))
        return out
    return fn(x)
