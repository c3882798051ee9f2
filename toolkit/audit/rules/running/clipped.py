"""A gradient clip run before the ``backward()`` whose gradient the step uses (``unclipped``):
``clip_grad_norm_`` (or ``clip_grad_value_``) called on tensors whose ``.grad`` holds no gradient
of the update (just cleared, or never written), with a ``backward()`` after it that writes
them before their optimizer steps. It rescales nothing, and the step goes on with the unclipped
gradient: a Decision Transformer's updates (Chen et al. 2021, clipped at 0.25 after the
backward in kzl/decision-transformer's ``SequenceTrainer.train_step``) take whatever size the
loss gives them. The finding is at the clip; its edit moves the clip to just before the step,
after the backward, where the published loop has it.

A clip after the backward, or one whose tensors already hold this update's gradient (an
accumulation's earlier micro-batches), is none."""

from __future__ import annotations

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import Site
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState

__all__ = ["noted", "unclipped"]


def noted(w: WatchState, tensors: list[torch.Tensor], site: Site | None) -> None:
    """A clip at ``site`` ran over ``tensors``: kept, when none of those an optimizer holds
    has gradient of this update in ``.grad`` (the ledger's live sources), for the next step."""
    held = w.stepped_map()
    keys = frozenset(id(t) for t in tensors if id(t) in held)
    if site is None or not keys or any(w.ledger.live.get(k) for k in keys):
        return
    w.early_clips.append((site, keys, w.events))


def unclipped(w: WatchState, index: int, site: Site | None, stepped) -> None:
    """At a step: each clip :func:`noted` kept whose tensors this step steps with gradient a
    ``backward()`` wrote after the clip: one failure per clip's line."""
    if not w.early_clips:
        return
    clips, w.early_clips = w.early_clips, []
    names = w.names()
    for clip_site, keys, event in clips:
        hit = [(k, p) for k, p in stepped if id(p) in keys
               and any(s.index > event for s in w.ledger.live.get(id(p), ()))]
        if not hit:
            continue
        edits = w.fixes.move_before(clip_site.path, clip_site.line, site.line) \
            if site is not None and site.path == clip_site.path else []
        shown = tuple(names.get(id(p), k) for k, p in hit)
        w.add(ScriptFinding(
            "unclipped", w.iteration,
            f"{clip_site.text()} at {clip_site} clips {plural(len(hit), 'tensor')} before the "
            f"backward() that writes their gradient: it clips nothing, and "
            f"{w.optimizer_text(index, site) or 'the optimizer'} steps with the gradient "
            f"unclipped", tuple(k for k, _ in hit), shown,
            tuple(s.shown() for s in (clip_site, site) if s is not None), tuple(edits),
            advice="clip after the backward(), just before the step",
            step=w.step_events - 1, concerned=tuple(k for k, _ in hit)))
