"""What :func:`~toolkit.audit.audit_step` accepts: a step's losses and what steps them.

``optimizers`` is an optimizer, one of its param groups, an ``nn.Module`` or tensors, or a
dict loss name -> one of these; ``step()`` returns a scalar loss or a dict name -> scalar loss.
Every mistake is a ``TypeError`` or ``ValueError`` naming the argument, what was expected and
what came.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from toolkit.audit.record.names import Names

__all__ = ["losses_of", "pair_losses", "pairings_of", "params_of", "stepped_of"]


def params_of(value: Any, where: str, arg: str) -> list[tuple[str, torch.Tensor]]:
    """``(position name, tensor)`` for an optimizer, a param group, a module or tensors."""
    if hasattr(value, "param_groups"):
        return [(f"param_groups[{g}][{i}]", p) for g, group in enumerate(value.param_groups)
                for i, p in enumerate(group["params"])]
    if isinstance(value, Mapping) and "params" in value:
        params = value["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        return [(f"[{i}]", p) for i, p in enumerate(params)]
    if isinstance(value, nn.Module):
        return list(value.named_parameters())
    if isinstance(value, torch.Tensor):
        return [("", value)]
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)) and not (
            hasattr(value, "__array__") or hasattr(value, "toarray")):  # numpy, scipy.sparse
        return [(f"[{i}]{k}", p) for i, v in enumerate(value)
                for k, p in params_of(v, where, arg)]
    raise TypeError(f"{where}: {arg} must be an optimizer, one of its param groups, an nn.Module "
                    f"or tensors (or a dict loss name -> one of these), got {type(value).__name__}")


def pairings_of(optimizers: Any, where: str) -> dict[str | None, Any]:
    """``loss name -> optimizer-like``; the key ``None`` pairs every loss with one optimizer."""
    if isinstance(optimizers, Mapping) and "params" not in optimizers:
        if not optimizers:
            raise ValueError(f"{where}: optimizers is an empty dict; pass an optimizer or a dict "
                             f"loss name -> optimizer")
        return {str(k): v for k, v in optimizers.items()}
    return {None: optimizers}


def losses_of(out: Any, where: str) -> dict[str, torch.Tensor]:
    if isinstance(out, torch.Tensor):
        losses = {"loss": out}
    elif isinstance(out, Mapping) and out and all(isinstance(v, torch.Tensor)
                                                  for v in out.values()):
        losses = {str(k): v for k, v in out.items()}
    else:
        raise TypeError(f"{where}: step() must return a loss tensor or a dict name -> loss "
                        f"tensor, got {type(out).__name__}")
    for name, loss in losses.items():
        if loss.numel() != 1:
            raise ValueError(f"{where}: loss {name!r} has shape {tuple(loss.shape)}; backward() "
                             f"needs a scalar (one element): reduce it, e.g. {name}.mean() or "
                             f"{name}.sum()")
        if loss.is_complex():
            raise ValueError(f"{where}: loss {name!r} is complex ({loss.dtype}); backward() "
                             f"needs a real scalar: make it real, e.g. {name}.abs() or "
                             f"{name}.real")
    return losses


def pair_losses(losses: dict[str, torch.Tensor], pairings: dict[str | None, Any], where: str
          ) -> dict[str, torch.Tensor]:
    if None in pairings:
        return losses
    if len(losses) == 1 and len(pairings) == 1 and "loss" in losses:
        return {next(iter(pairings)): losses["loss"]}  # a lone loss takes the optimizer's name
    if set(losses) != set(pairings):
        raise ValueError(f"{where}: optimizers must have the same names as the losses step() "
                         f"returns; losses {sorted(losses)}, optimizers {sorted(map(str, pairings))}")
    return losses


def stepped_of(pairings: dict[str | None, Any], names: Names, where: str
               ) -> dict[str | None, dict[int, torch.Tensor]]:
    """``loss name -> {id: tensor}`` its optimizer steps; names the tensors found only there."""
    stepped: dict[str | None, dict[int, torch.Tensor]] = {}
    for key, value in pairings.items():
        arg = "optimizers" if key is None else f"optimizers[{key!r}]"
        params = params_of(value, where, arg)
        if not params:
            raise ValueError(f"{where}: {arg} has no parameters to step")
        label = type(value).__name__ if key is None else key
        for position, p in params:
            names.add_tensor(f"{label}.{position}".rstrip("."), p)
        stepped[key] = {id(p): p for _, p in params}
    return stepped
