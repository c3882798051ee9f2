"""The classes a :class:`~toolkit.audit.record.recording.Recording` patches while it records:
``nn.Module.__setattr__`` (the line that keeps a tensor with a graph in a module's attribute),
``threading.Thread.start`` (a thread the step starts), the reentrant checkpoint's ``forward``
(what a checkpointed function reads, by its backward node) and the ``step`` or ``update`` of
schedulers and ``GradScaler`` (their state saved before the step first moves it). Each patch
passes its call through while the recording is suspended, or held but not entered
(:meth:`~toolkit.audit.record.recording.Recording.hold_patches`)."""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any

import torch
import torch.utils.checkpoint
from torch import nn

from toolkit.audit.record.sites import user_line
from toolkit.audit.record.state import STATEFUL

__all__ = ["SETATTR", "ClassPatches"]

#: torch's own ``nn.Module.__setattr__``, put back when the patches go
SETATTR = nn.Module.__setattr__


class ClassPatches:
    """The patches of one recording (``rec``), installed by :meth:`install`."""

    def __init__(self, recording: Any) -> None:  # the Recording it serves (recording.py)
        self.rec = recording

    def install(self, stack: contextlib.ExitStack) -> None:
        """Patch the classes, each put back by ``stack``."""
        start = threading.Thread.start

        def start_noted(thread: threading.Thread) -> None:
            self._start_thread(thread)
            start(thread)

        threading.Thread.start = start_noted  # type: ignore[method-assign]
        stack.callback(setattr, threading.Thread, "start", start)
        nn.Module.__setattr__ = lambda module, name, value: self._assign(module, name, value)
        stack.callback(setattr, nn.Module, "__setattr__", SETATTR)
        self._watch_checkpoints(stack)
        self._watch_stateful(stack)

    def _assign(self, module: nn.Module, name: str, value: Any) -> None:
        """``Module.__setattr__`` while recording: the line that assigns a tensor with a graph
        to a module's attribute or buffer (a state kept in the module)."""
        rec = self.rec
        if rec.suspended:
            SETATTR(module, name, value)
            return
        if isinstance(value, torch.Tensor) and not rec.busy:
            # whether the attribute was None before the step first stored a tensor there (a
            # memory made lazily: setting it to None again runs a call as the first ran)
            rec.first_none.setdefault((id(module), name), getattr(module, name, None) is None)
        if isinstance(value, torch.Tensor) and value.grad_fn is not None and not rec.busy:
            line = user_line(installed=True)
            if line is not None:
                rec.lines[("assign", id(module), name)] = line
                rec.assigned[id(value.grad_fn)] = (value.grad_fn, line)
        SETATTR(module, name, value)

    def _start_thread(self, thread: threading.Thread) -> None:
        """Note a thread the step starts, with the user's line that starts it."""
        rec = self.rec
        if threading.get_ident() == rec.thread and not rec.busy and not rec.suspended:
            line = user_line(3, installed=True)
            at = "" if line is None else f"started at {line.file}:{line.number}"
            rec.threads.setdefault(rec.call, {}).setdefault(thread.name, []).insert(0, at)

    def _watch_stateful(self, stack: contextlib.ExitStack) -> None:
        """Save a ``GradScaler`` or a scheduler before the step first moves it (``update()``,
        ``step()``: :data:`~toolkit.audit.record.state.STATEFUL`), so that the audit can put
        its state back."""
        rec = self.rec

        def saving(original: Any) -> Any:
            @functools.wraps(original)
            def method(obj: Any, *args: Any, **kwargs: Any) -> Any:
                if rec.snapshot is not None and not rec.suspended:
                    rec.snapshot.save_stateful(obj)
                return original(obj, *args, **kwargs)
            return method

        for owner, name in STATEFUL:
            original = owner.__dict__[name]
            setattr(owner, name, saving(original))
            stack.callback(setattr, owner, name, original)

    def _watch_checkpoints(self, stack: contextlib.ExitStack) -> None:
        """Record what each reentrant ``torch.utils.checkpoint`` reads, by its backward node.

        With ``use_reentrant=True`` the checkpointed function runs with gradients off and is run
        again during backward: the parameters it reads are reached through the checkpoint's
        node, not through any edge of the graph. The node is the ``ctx`` of the checkpoint's
        ``forward``, so the reads are filed under it.
        """
        function = getattr(torch.utils.checkpoint, "CheckpointFunction", None)
        if function is None:  # pragma: no cover - a torch without the reentrant variant
            return
        original = function.__dict__["forward"]
        rec = self.rec

        def forward(ctx: Any, *args: Any) -> Any:
            if rec.suspended:
                return original.__func__(ctx, *args)
            rec.lines[("checkpoint", id(ctx))] = user_line()
            rec._checkpointing.append(set())
            try:
                return original.__func__(ctx, *args)
            finally:
                rec.checkpoints[id(ctx)] = (ctx, rec._checkpointing.pop())

        function.forward = staticmethod(forward)
        stack.callback(setattr, function, "forward", original)
