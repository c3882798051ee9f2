"""A gradient read twice (``stale``): the script reads a tensor's ``.grad`` after a
``backward()`` (a per-example gradient squared into a Fisher, a task's gradient cloned for
PCGrad's projection), then another ``backward()`` writes into the same ``.grad`` with no clear
between, and the script reads it again: the second read holds the sum of both gradients, the
first of which it has used already. Gradient accumulation reads ``.grad`` once, after the last
micro-batch, and is not this; nor is a parameter put in place of one an optimizer holds,
whose ``zero_grad()`` then misses it (``replaced`` reports that cause).

The finding is at the read and at the later backward; its edit clears the gradient before that
backward, by the optimizer (or the network) the backward's caller can name, as the published
loops do (``model.zero_grad()`` before each example's backward, ``optimizer.zero_grad()``
before each task's), or by the names of tensors no network holds (``w.grad = b.grad =
None``). An iteration that ends with no optimizer stepped (the script updates the
weights by hand) is judged at its end, as a step is."""

from __future__ import annotations

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import site_of, user_frame
from toolkit.audit.record.ledger import Source
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState

__all__ = ["flush", "read"]


def read(w: WatchState, tensor: torch.Tensor) -> None:
    """Before the read of ``tensor``'s ``.grad`` is noted (:func:`.lost.read`): whether it holds
    the gradient of a backward the script read already, and of a later one."""
    key = id(tensor)
    cleared = w.cleared_at.get(key, -1)
    live = [s for s in w.ledger.live.get(key, ()) if s.index > cleared and s.index >= 0]
    last, w.grad_read_at[key] = w.grad_read_at.get(key, -1), w.events
    # read between two of the backwards it holds now: after the first, before the last
    if len(live) < 2 or not live[0].index <= last < live[-1].index:
        return
    if any(r.new is tensor for r in w.replaced.values()):
        return   # put in place of one an optimizer holds: its clear is the optimizer's
    frame = user_frame(3)
    at = site_of(frame) if frame is not None else None
    _, reads, found = w.summed.setdefault(live[-1].site, (live[-1], [], {}))
    if at is not None and at not in reads:
        reads.append(at)
    found[key] = tensor


def _clear_text(w: WatchState, src: Source, tensors: list[torch.Tensor]) -> str | None:
    """What clears ``tensors`` as the backward's caller can name it: an optimizer that holds
    them all, else the network that does (``model``)."""
    ids = {id(t) for t in tensors}
    for opt in w.optimizers:
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        if ids <= held and src.names.get(id(opt)):
            return f"{src.names[id(opt)]}.zero_grad()"
    names = w.names()
    roots = {names[k].split(".")[0] for k in ids if k in names}
    if len(roots) == 1:
        return f"{roots.pop()}.zero_grad()"
    # tensors of no optimizer and no network (a perturbation kept across batches, the weights
    # of a regression written from scratch): their gradients let go by the names the script
    # holds them by (``w.grad = b.grad = None``)
    bound = [w.bound_name(t) for t in tensors]
    if bound and None not in bound:
        return " = ".join(f"{name}.grad" for name in bound) + " = None"
    return None


def flush(w: WatchState) -> None:
    """The reads :func:`read` found, one finding per later backward (at the first place that
    read its sum)."""
    if not w.summed:
        return
    for src, reads, found in w.summed.values():
        tensors = list(found.values())
        keys = tuple(w.name_of(t) or f"tensor{i}" for i, t in enumerate(tensors))
        clear = _clear_text(w, src, tensors)
        edit = (w.fixes.insert_before(src.site.path, src.site.line, clear)
                if clear and src.site is not None else None)
        where = tuple(s.shown() for s in (src.site, *reads[:1]) if s is not None)
        w.add(ScriptFinding(
            "stale", w.iteration,
            f"the script reads .grad of {plural(len(tensors), 'tensor')} after {src.label} "
            f"(backward at {src.site}), which added its gradient to one the script had read "
            f"already, with no clear between: the read holds the sum of both",
            keys, keys, where, (edit,) if edit is not None else (),
            advice=f"clear the gradient ({clear or 'zero_grad()'}) before each backward whose "
                   f"gradient is read on its own", step=w.step_events - 1,
            # what the script makes of the sums (a projection, a Fisher) may reach any
            # tensor's update from this step on
            concerned=("*",)))
    w.summed.clear()
