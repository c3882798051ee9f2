"""Which backward call's gradient sits in each tensor's ``.grad``: the ledger the watch keeps
between ``backward()``, ``zero_grad()`` and ``optimizer.step()``, read from ``.grad`` itself
(what changed in a backward, what was cleared before a step), never from names."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import nonzero

__all__ = ["Ledger", "Source", "changed"]


@dataclass(eq=False)
class Source:
    """One ``backward()`` call (or, ``index == -1``, whatever ``.grad`` held when the watch began
    to look): where the user called it, its loss's text, its iteration, and the step event it
    is paired with: the first ``optimizer.step()`` after it that steps a tensor it wrote."""

    index: int
    site: Site | None
    label: str
    iteration: int
    step: int | None = None
    wrote: set[int] = field(default_factory=set)
    #: each tensor it wrote, by ``id``: the tensor's version (in-place writes) at the backward
    versions: dict[int, int] = field(default_factory=dict)
    #: the optimizers the backward's caller could name, by ``id``: the name (a ``zero_grad()``
    #: written before this backward must be spelled in its scope)
    names: dict[int, str] = field(default_factory=dict)
    #: the leaves (by ``id``) behind the values its graph reads uncut that the script
    #: ``.detach()``-ed at another read in the same iteration (PEARL's task variable, cut for
    #: the policy and the value function, read whole by the critic's loss)
    uncut: set[int] = field(default_factory=set)
    #: the leaves (by ``id``) its gradient reached through a gradient reversal
    #: (:mod:`~toolkit.audit.record.reversal`): trained against the loss on purpose
    reversed: set[int] = field(default_factory=set)
    #: the tensors an optimizer holds (by ``id``) that its loss reaches and its
    #: ``backward(inputs=...)`` left out: the script kept this loss's gradient from them
    kept_out: set[int] = field(default_factory=set)
    #: where it ``kept_out`` tensors: what it added to each tensor it wrote, by ``id``, and
    #: the ids of its graph's nodes that carry gradient into them
    added: dict[int, torch.Tensor] = field(default_factory=dict)
    toward: set[int] = field(default_factory=set)
    #: the earlier backward() calls of its iteration that ``kept_out`` tensors, whose graph
    #: it shares a node of that carries their gradient (one objective, differentiated twice)
    meets: list[Source] = field(default_factory=list)


def _empty(grad: torch.Tensor | None) -> bool:
    return grad is None or (grad.layout == torch.strided and not nonzero(grad))


def changed(old: torch.Tensor | None, new: torch.Tensor | None) -> bool:
    """Whether a ``.grad`` that held ``old`` (a copy, or ``None``) holds something else now."""
    return new is not None and (old is None or old.shape != new.shape
                                or not torch.equal(old, new))


class Ledger:
    """Per tensor (by ``id``), the sources whose gradient its ``.grad`` holds now, and those
    cleared from it since it was last stepped."""

    def __init__(self) -> None:
        self.live: dict[int, list[Source]] = {}
        self.cleared: dict[int, list[Source]] = {}
        self.tensors: dict[int, torch.Tensor] = {}
        self.wasted: list[tuple[Source, int]] = []   # (source, tensor) cleared unused
        # (the source's index, tensor) of every gradient ever cleared unused
        self.wasted_ever: set[tuple[int, int]] = set()
        # (the source's index, tensor) of every gradient a backward wrote
        self.written_ever: set[tuple[int, int]] = set()
        # (the source's index, tensor) of every gradient a step used
        self.used_ever: set[tuple[int, int]] = set()

    def observe(self, tensor: torch.Tensor, iteration: int, stepped_since: dict[int, int],
                stepped_at: dict[int, int] | None = None,
                cleared_at: dict[int, int] | None = None) -> None:
        """Bring the tensor's entry up to date with its ``.grad``: cleared when it is ``None`` or
        zero; an unknown gradient becomes a source of its own. ``stepped_at`` and ``cleared_at``
        (every iteration's last step and ``zero_grad`` of each tensor, watched or not) tell an
        unknown gradient that a step already used, and no ``zero_grad`` cleared since: it is
        paired with that step, so the next step finds it stale."""
        key = id(tensor)
        self.tensors[key] = tensor
        live = self.live.get(key)
        if _empty(tensor.grad):
            if live:
                for src in live:
                    if stepped_since.get(key, -1) < src.index:
                        self.wasted.append((src, key))
                        self.wasted_ever.add((src.index, key))
                self.cleared.setdefault(key, []).extend(live)
                self.live[key] = []
        elif not live:
            used = (stepped_at or {}).get(key, -1)
            if used >= 0 and used > (cleared_at or {}).get(key, -1):
                self.live[key] = [Source(-1, None, "no zero_grad() cleared it since a step "
                                         "used it", iteration - 1, step=used)]
            else:
                self.live[key] = [Source(-1, None, "gradient already in .grad", iteration - 1)]

    def snapshot(self, tensors: dict[int, torch.Tensor]) -> dict[int, torch.Tensor | None]:
        return {k: (t.grad.detach().clone() if t.grad is not None else None)
                for k, t in tensors.items()}

    def record(self, source: Source, tensors: dict[int, torch.Tensor],
               before: dict[int, torch.Tensor | None]) -> None:
        """After the backward of ``source``: the tensors whose ``.grad`` it changed."""
        for key, tensor in tensors.items():
            old, new = before.get(key), tensor.grad
            if changed(old, new) and not (old is None and _empty(new)):
                source.wrote.add(key)
                self.written_ever.add((source.index, key))
                source.versions[key] = tensor._version
                if source.kept_out and new is not None and new.layout == torch.strided:
                    source.added[key] = new.detach() - old if old is not None and \
                        old.shape == new.shape else new.detach().clone()
                self.tensors[key] = tensor
                self.live.setdefault(key, []).append(source)

    def written(self, sources: list[Source], tensor: torch.Tensor, since: int) -> None:
        """The script wrote into ``tensor``'s ``.grad`` itself what ``sources`` took
        (``torch.autograd.grad``), in place of what it held from before the event ``since``
        (the last step): a gradient written by hand replaces an old one (``p.grad = g``,
        ``p.grad.copy_(g)``) and joins a backward's of the same window (added to it)."""
        key = id(tensor)
        for source in sources:
            source.wrote.add(key)
            source.versions[key] = tensor._version
        self.tensors[key] = tensor
        kept = [s for s in self.live.get(key, []) if s.index > since
                and not any(s is new for new in sources)]
        self.live[key] = [*kept, *sources]

    def stepped(self, key: int) -> None:
        """A step used the tensor's gradient: what it held is used, what was cleared before
        is forgotten."""
        self.used_ever.update((s.index, key) for s in self.live.get(key, ()))
        self.cleared.pop(key, None)
