"""Cuts the script audit takes as meant, and says so (``not checked``).

A ``.detach()`` or a module called under ``no_grad`` in a loss's own forward (after the last
``backward()`` or step) that keeps that loss's gradient from tensors an optimizer steps, which
the same loss still trains another way, has the form of a stop-gradient: SimSiam's stopped
branch, a TD target computed by the online network, a teacher's pass of the student. Whether it
belongs there is a fact of the method the script follows, not of its graph: without it the
script trains differently but no less consistently. The audit reports no finding for such a
cut, and names each one in a closing line, so that a clean run never claims more than was
checked (a cut the published method does not make, such as future encodings detached from a
contrastive loss, is one of these)."""

from __future__ import annotations

import torch

from toolkit.audit.record.backward import read_graph
from toolkit.audit.rules.running.state import WatchState

__all__ = ["note"]


def note(w: WatchState, reached: dict[int, torch.Tensor], stepped: dict[int, int]) -> None:
    """At an audited ``backward()`` whose graph reaches the leaves ``reached`` (by ``id``), with
    ``stepped`` the tensors an optimizer holds: the cuts made since the last event whose input
    reaches a tensor this loss trains anyway, kept in ``w.meant`` by their site."""
    trained = {k for k in reached if k in stepped}
    if not trained:
        return
    since = w.events - 1           # this backward's own forward: after the previous event
    for node, site, _, event in w.detaches:
        if event == since and site not in w.meant and \
                not trained.isdisjoint(read_graph([node]).leaves):
            w.meant[site] = "`.detach()`"
    for module, site, _, inputs, event in w.no_grad_calls:
        if event != since or site in w.meant:
            continue
        if any(id(q) in trained for q in module.parameters()) or (
                inputs and not trained.isdisjoint(read_graph(inputs).leaves)):
            w.meant[site] = f"`{type(module).__name__}` called under no_grad"
