"""What a script does with gradients outside ``backward()``, while the watch records an iteration
(the ``.grad`` side of :class:`~toolkit.audit.script.session.Watch`): the ``zero_grad()`` that
clears them, the clipping that rescales them, the code that reads them (a ``.grad`` read, a
``GradScaler``'s step, a hook on a value the script computes) and the code that writes them
itself (``p.grad = g`` from a ``torch.autograd.grad`` it took), each noted for the rules that
judge it at the step."""

from __future__ import annotations

import weakref

import torch
from torch import nn

from toolkit.audit.record.frames import site_of, user_file_lines, user_frame
from toolkit.audit.record.ledger import Source, changed
from toolkit.audit.rules.running import clipped, lost, summed
from toolkit.audit.rules.running.state import WatchState

__all__ = ["GradientAccess"]


class GradientAccess(WatchState):
    """The hooks on gradients outside ``backward()`` (on only while an iteration is recorded,
    but for the clear's place, kept always)."""

    def zero_grad(self, tensors: list[torch.Tensor]) -> None:
        self.cleared_at.update(dict.fromkeys(map(id, tensors), self.events))
        if not self.recording():
            return
        frame = user_frame(2)
        if frame is not None:
            keys = {id(t) for t in tensors}
            self.clears.append((site_of(frame), keys, self.events))
            lines = tuple(user_file_lines(frame))
            self.clearing.setdefault(lines, set()).update(keys)
            # a gradient this iteration's backward wrote, cleared under a condition on the run's
            # progress (the source read only for such a clear: most clear before the backward)
            # (``.grad`` read last: while the watch records, each read calls the hook)
            wrote = {id(t) for t in tensors if self.reached_at.get(id(t), -1) >
                     self.last_step_event and t.grad is not None}
            if wrote and self.progress_conditions(lines):
                self.scheduled.update(wrote)

    def clipped(self, tensors: list[torch.Tensor]) -> None:
        """``clip_grad_norm_`` (or ``clip_grad_value_``) ran over ``tensors``."""
        if self.recording():
            # each held one's ``.grad`` as it is now: a gradient a step never used (a loop
            # that updated by hand before this optimizer was built) may have been cleared
            # since the last backward or step read it
            held = self.stepped_map()
            for t in tensors:
                if id(t) in held:
                    self.ledger.observe(t, self.iteration, self.last_step_of, self.stepped_at,
                                        self.cleared_at)
            frame = user_frame(2)
            clipped.noted(self, tensors, site_of(frame) if frame is not None else None)

    def grad_read(self, tensors: list[torch.Tensor]) -> None:
        """The script's code (or a ``GradScaler``'s step) read these tensors' ``.grad``."""
        if self.recording():
            for t in tensors:
                summed.read(self, t)
                lost.read(self, t)
                given = t.grad_fn is None and not isinstance(t, nn.Parameter)
                if not given and not (t.retains_grad and self.last_backward >= 0):
                    continue
                # by the name read: an input's gradient (a sampler's, an attack's), or a
                # value computed with a graph, its gradient kept: a backward taken for it
                # (LEO's ``latents.grad`` after a backward)
                frame = user_frame(1)
                scope = {} if frame is None else frame.f_locals
                name = next((n for n, v in scope.items() if v is t), None)
                if given:
                    # and the list that holds it there, with its place and length (a loop
                    # over a model's states reads each by one name)
                    held = next(((n, i, len(v)) for n, v in scope.items()
                                 if isinstance(v, list | tuple)
                                 for i, x in enumerate(v) if x is t), None)
                    self.input_reads[id(t)] = (name, self.events, held)
                elif name is not None:
                    names = self.retained_reads.setdefault(self.last_backward, [])
                    if name not in names:
                        names.append(name)

    def hook_read(self) -> None:
        """A hook the script put on a value it computes ran in a backward: that backward's
        gradient is read (RigL's dense gradient, read for the growth of its masks in place of
        a step, Evci et al. 2020), not lost when it is cleared."""
        if self.recording() and self.last_backward < self.events:
            self.read_sources.add(self.events)

    def grad_computed(self, grads: object, over: set[int] | None = None) -> None:
        """The script's code called ``torch.autograd.grad``, which returned ``grads``: audited
        as a backward over the tensors whose ``id`` are in ``over`` (see
        :mod:`~toolkit.audit.script.hooks`), or not (``None``)."""
        if self.grad_results:  # those of earlier calls, gone or not, are not looked for again
            self.grad_results = {}
        for g in grads if isinstance(grads, tuple | list) else (grads,):
            if isinstance(g, torch.Tensor):
                self.grad_results[id(g)] = (weakref.ref(g), over)

    def grad_written(self, tensor: torch.Tensor, value: object) -> None:
        """The script's code set ``tensor.grad = value``: noted (its first place) when
        ``value`` is what a ``torch.autograd.grad`` over other tensors returned, a gradient no
        audited backward took over ``tensor`` (one taken over it is found at the step,
        :meth:`_written_by_hand`, however the script writes it)."""
        found = self.grad_results.get(id(value))
        if found is None or found[0]() is not value or id(tensor) in self.hand_written or \
                (found[1] is not None and id(tensor) in found[1]):
            return
        frame = user_frame(2)
        self.hand_written[id(tensor)] = (tensor, site_of(frame) if frame is not None else None)

    def _written_by_hand(self) -> None:
        """Before a step: each tensor whose ``.grad`` changed since the first gradient the
        script took itself over it after the last step (``torch.autograd.grad``, audited as a
        backward, which writes no ``.grad``) holds what those backwards took, as the script
        wrote it (``p.grad = g``, ``p.grad.copy_(g)``, PCGrad's combination, DP-SGD's noised
        sum): the ledger has them write it. A tensor a ``backward()`` wrote after such a call
        is that backward's (a gradient norm taken to be logged before it)."""
        taken, self.by_hand = self.by_hand, []   # all of them since the last step
        sources: dict[int, list[Source]] = {}
        first: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        for source, leaves, before in taken:
            for key, tensor in leaves.items():
                first.setdefault(key, (tensor, before.get(key)))
                sources.setdefault(key, []).append(source)
        for key, (tensor, old) in first.items():
            if changed(old, tensor.grad):
                self.ledger.written(sources[key], tensor, self.previous_step_event)
                self.written_at[key] = max(s.index for s in sources[key])
