"""The parameter group an edit adds to an optimizer (``optimizer.add_param_group(...)``), in the
script's own settings.

It follows the no-decay convention where the script does: when the tensors are all of one
dimension or fewer (biases, norm weights, a temperature) and the optimizer has weight decay but
decays none such, the group is ``{"params": [...], "weight_decay": 0.0}``, as nanoGPT's
``configure_optimizers`` (https://github.com/karpathy/nanoGPT/blob/master/model.py), minGPT's
and timm's ``param_groups_weight_decay`` (https://github.com/huggingface/pytorch-image-models,
timm/optim/_param_groups.py) build it."""

from __future__ import annotations

import torch

from toolkit.audit.rules.running.state import WatchState

__all__ = ["group"]


def group(w: WatchState, opt: torch.optim.Optimizer, params: str,
           added: list[torch.Tensor]) -> str:
    """The parameter group an edit adds to ``opt``: ``{"params": params}``, with the settings
    of its first group as built whose tensors are all of the added ones' kind (of one
    dimension or fewer: biases and norms; or of two or more: weights), where the script gave
    that group settings of its own (I-JEPA's no-decay groups, ``{"WD_exclude": True,
    "weight_decay": 0}``, which its schedule leaves alone); else with ``"weight_decay": 0.0``
    when the tensors ``added`` are all of one dimension or fewer and ``opt`` has weight decay
    but decays no such tensor (the no-decay group the script left out: see the module's
    docstring)."""
    low, high = all(t.ndim <= 1 for t in added), all(t.ndim >= 2 for t in added)
    for dims, settings in w.built_groups.get(id(opt), []):
        if dims and ((low and max(dims) <= 1) or (high and min(dims) >= 2)):
            own = {k: v for k, v in settings.items() if type(v) in (bool, int, float, str)
                   and (k not in opt.defaults or opt.defaults[k] != v)}
            if own:
                return "{" + ", ".join([f'"params": {params}',
                                        *(f"{k!r}: {v!r}" for k, v in own.items())]) + "}"
            break
    decayed = [p for g in opt.param_groups if g.get("weight_decay") for p in g["params"]]
    if added and all(t.ndim <= 1 for t in added) and opt.defaults.get("weight_decay") and \
            not any(p.ndim <= 1 for p in decayed):
        return f'{{"params": {params}, "weight_decay": 0.0}}'
    return f'{{"params": {params}}}'
