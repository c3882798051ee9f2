"""Stepped tensors a loss reaches with a gradient of exact zeros on two audited iterations
(``dead``): explained at the next backward of the same line, by the expression whose paths
cancel or whose derivative is zero everywhere (:mod:`~toolkit.audit.rules.running.zeroed`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.overrides

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import Site
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.running.zeroed import explain, zero_gradients

__all__ = ["explained", "suspect_zeros"]


def suspect_zeros(w: WatchState, stepped) -> None:
    """Stepped tensors this iteration's losses reached whose ``.grad`` is exactly zero:
    suspects, by the backward() that reached them, explained at its next audited call
    (:func:`explained`)."""
    since = {k: [e for e, leaves in w.reached_by
                 if id(p) in leaves and e > w.last_step_of.get(id(p), -1)]
             for k, p in stepped}
    reached = [(k, p) for k, p in stepped if since[k] and id(p) not in w.zero_judged]
    for (k, p), zero in zip(reached, zero_gradients([p for _, p in reached])):
        if not zero:
            continue
        for event in since[k]:
            stack = w.backward_keys.get(event)
            if stack is not None:
                w.zero_suspects.setdefault(stack, {})[id(p)] = (k, p)


def explained(w: WatchState, roots: Sequence[torch.Tensor], site: Site | None,
            suspects: dict[int, tuple[str, torch.Tensor]]) -> None:
    """Dead in effect: tensors this backward() reached again with a gradient of exact
    zeros, because the gradients reaching them cancel or an operation on the way passes
    zero for any values; the edit passes the gradient straight through at the line that
    made the operation (:func:`~toolkit.audit.rules.running.zeroed.explain`)."""
    w.zero_judged.update(suspects)
    if w.made_at is None or len(roots) != 1 or roots[0].numel() != 1 or \
            roots[0].grad_fn is None:
        return
    try:
        found = explain(w.fixes, roots[0], {i: p for i, (_, p) in suspects.items()}, w.made_at)
    except RuntimeError:
        return
    names = w.names()
    for z in found:
        keys = tuple(suspects[i][0] for i in z.tensors)
        shown = tuple(names.get(i, suspects[i][0]) for i in z.tensors)
        at = tuple(s.shown() for s in (z.site, site) if s is not None)
        w.add(ScriptFinding(
            "dead", w.iteration,
            f"{w.loss_label(site)} (backward at {site}) reaches "
            f"{plural(len(keys), 'tensor')} an optimizer steps with a gradient of exact zeros: "
            + (f"at {z.site}, " if z.site is not None else "") + z.what,
            keys, shown, at, z.edits,
            advice="pass the gradient straight through where the value is made (a "
                   "straight-through estimator: x + (q(x) - x).detach(), the same values "
                   "forward, x's gradient back)", step=w.step_events, concerned=keys))
