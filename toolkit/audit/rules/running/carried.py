"""A prediction fed back into the network that made it without a cut (``carried``). Graph
carried from an earlier iteration is the step audit's carried rule
(:mod:`toolkit.audit.rules.carried`, run on each audited backward by
:mod:`toolkit.audit.script.staged`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.overrides

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import Site
from toolkit.audit.rules.running.feedback import feedbacks
from toolkit.audit.rules.running.state import WatchState

__all__ = ["fed_back"]


def fed_back(w: WatchState, roots: Sequence[torch.Tensor], site: Site | None) -> None:
    """A prediction fed back: an output the loss compares, read by a later call of the
    network that made it without a cut (:func:`~toolkit.audit.rules.running.feedback.feedbacks`).
    The edit cuts it where the script passes it on."""
    outputs = {k: v[:3] for k, v in w.made_by.items()}
    for feed in feedbacks([t.grad_fn for t in roots], [f for f, _ in w.feeds], outputs):
        if feed.site is None:
            continue
        # the network it is part of, as the script calls it (the decoder, not its layer)
        maker = next((r for r in w.called_networks() if feed.maker in
                      {id(m) for m in r[0].modules()}), None)
        what = f"`{feed.name}`" if feed.name else "a prediction"
        w.add(ScriptFinding(
            "carried", w.iteration,
            f"{what}, an output of {maker[1] if maker else 'a network'} that "
            f"{w.loss_label(site)} (backward at {site}) compares with its target, is "
            f"fed back as the input of its next call without a cut: the loss of each later "
            f"prediction is also differentiated through every earlier one",
            (), (), (feed.site.shown(),) + ((site.shown(),) if site else ()),
            (feed.edit,) if feed.edit is not None else (),
            advice="cut the prediction where it is fed back (.detach()): the next step "
                   "reads its value, not its graph", step=w.step_events,
            concerned=("*",)))
