"""``AuditCallback`` for Lightning: the step audit on the module's real ``training_step``.

::

    trainer = Trainer(max_epochs=1, callbacks=[AuditCallback()])
    trainer.fit(gan, loader)    # GradientLeakError before the first step if the step leaks

On the first training batch (or every ``every_n_steps`` batches), before Lightning runs the
step, the callback runs the module's ``training_step`` on that batch through
:func:`toolkit.audit_step` (twice, with ``restore_state``: parameters, buffers, flags and the
random generators are put back) and checks its losses against ``trainer.optimizers``:

- **automatic optimization**: the loss ``training_step`` returns (a tensor, or the ``"loss"``
  of a dict) against the module's optimizer (Lightning 2 allows one; several param groups
  are fine);
- **manual optimization**: while the audit runs ``training_step``, ``self.manual_backward(loss)``
  (or ``loss.backward()``) only records the loss, and ``opt.step()`` records which optimizer
  steps the losses recorded since the previous step (a ``closure`` passed to ``step`` is
  called, so its loss is recorded too); ``zero_grad``, ``clip_gradients``, the schedulers'
  ``step`` and ``self.log`` do nothing. ``toggle_optimizer`` runs for real, since it shapes
  the graph: a generator frozen by it is not reached. Each loss is named by the variable
  passed to ``manual_backward`` (``d_loss``) and paired with the optimizers that stepped it.

Nothing Lightning does is run twice: the step is called directly (not through DDP's
wrapper), inside the precision plugin's context, and neither backward nor any optimizer or
scheduler step happens; the weights after ``fit`` are the same with and without the
callback. Side effects that live outside torch (a logger's ``experiment`` written by hand, a
counter in a plain attribute) happen once more per audit call.

In distributed training every process audits its own batch, and all raise (or warn) when any
process found something, so that none is left waiting.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from toolkit.audit import StepAudit, audit_step
from toolkit.integrations._common import AuditOptions, patched, report, require

__all__ = ["AuditCallback"]

# ``lightning.pytorch``, or the same code under its older name, ``pytorch_lightning``
pl = require(("lightning.pytorch", "pytorch_lightning"), "lightning",
             "toolkit.integrations.lightning")
_signature = importlib.import_module(f"{pl.__name__}.utilities.signature_utils")
_LIBRARIES = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))


class _NothingToAudit(Exception):
    """This batch cannot be audited: ``str()`` says why; ``final``: no batch can be."""

    def __init__(self, why: str, final: bool = False) -> None:
        super().__init__(why)
        self.final = final


# --- manual optimization, recorded instead of run ------------------------------------------------


def _loss_name(loss: torch.Tensor, taken: set[str]) -> str:
    """The user's variable holding ``loss`` (``d_loss``), else ``backward at file.py:LINE``."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
        frame = frame.f_back
    name = None
    if frame is not None:
        name = next((k for k, v in frame.f_locals.items() if v is loss and k != "self"), None)
        name = name or f"backward at line {frame.f_lineno}"
    name = name or f"loss {len(taken) + 1}"
    base, k = name, 2
    while name in taken:
        name, k = f"{base} ({k})", k + 1
    return name


class _Manual:
    """Records ``manual_backward`` and ``optimizer.step`` calls of one call of the step."""

    def __init__(self) -> None:
        self.losses: dict[str, tuple[torch.Tensor, list[Any]]] = {}
        self._group: list[str] = []
        self._stepping = False

    def start(self) -> None:
        self.losses, self._group, self._stepping = {}, [], False

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        if self._stepping:
            self._group, self._stepping = [], False
        name = _loss_name(loss, set(self.losses))
        self.losses[name] = (loss, [])
        self._group.append(name)

    def step(self, optimizer: Any, closure: Any = None) -> None:
        if closure is not None:
            closure()
        self._stepping = True
        for name in self._group:
            stepped = self.losses[name][1]
            if not any(o is optimizer for o in stepped):
                stepped.append(optimizer)

    def stepped(self) -> dict[str, torch.Tensor]:
        """The losses some optimizer steps (an accumulation batch's others are left out)."""
        out = {name: loss for name, (loss, opts) in self.losses.items() if opts}
        if not out:
            raise _NothingToAudit("no optimizer stepped a loss (gradient accumulation?)")
        return out

    def pairing(self) -> dict[str, Any]:
        return {name: opts[0] if len(opts) == 1 else opts
                for name, (_, opts) in self.losses.items() if opts}


class _NoBackward(TorchFunctionMode):
    """``loss.backward()`` / ``torch.autograd.backward`` called by the step only record."""

    def __init__(self, manual: _Manual) -> None:
        super().__init__()
        self.manual = manual

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if func is torch.Tensor.backward or func is torch.autograd.backward:
            loss = args[0] if args else (kwargs or {}).get("tensors")
            if isinstance(loss, (list, tuple)):
                loss = sum(loss)
            self.manual.backward(loss)
            return None
        return func(*args, **(kwargs or {}))


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


@contextlib.contextmanager
def _recorded(trainer: Any, module: Any, manual: _Manual) -> Iterator[None]:
    """Lightning's backward, optimizer, scheduler, clipping and logging calls, recorded or
    skipped; the parameters' ``.grad`` put back after."""
    grads = [(p, p.grad, None if p.grad is None else p.grad.clone())
             for p in module.parameters()]
    with contextlib.ExitStack() as stack:
        for name in ("log", "log_dict", "clip_gradients"):
            stack.enter_context(patched(module, name, _noop))
        stack.enter_context(patched(module, "manual_backward", manual.backward))
        wrapped = module.optimizers(use_pl_optimizer=True) if trainer.optimizers else []
        for lightning_opt in wrapped if isinstance(wrapped, list) else [wrapped]:
            raw = getattr(lightning_opt, "optimizer", lightning_opt)
            for opt in {id(lightning_opt): lightning_opt, id(raw): raw}.values():
                stack.enter_context(patched(opt, "step", lambda closure=None, _o=raw, **_:
                                            manual.step(_o, closure)))
                stack.enter_context(patched(opt, "zero_grad", _noop))
        for config in trainer.lr_scheduler_configs:
            stack.enter_context(patched(config.scheduler, "step", _noop))
        stack.enter_context(_NoBackward(manual))
        try:
            yield
        finally:
            with torch.no_grad():
                for p, grad, saved in grads:
                    if p.grad is not grad:
                        p.grad = grad
                    if grad is not None and not torch.equal(grad, saved):
                        grad.copy_(saved)


def _training_step_args(module: Any, batch: Any, batch_idx: int) -> tuple[Any, ...]:
    """``(batch, batch_idx)`` or ``(batch,)``, as Lightning's loop passes them."""
    fn = module.training_step
    if _signature.is_param_in_hook_signature(fn, "dataloader_iter", explicit=True):
        raise _NothingToAudit("training_step reads a dataloader_iter, so it cannot run again "
                              "on the same batch", final=True)
    if _signature.is_param_in_hook_signature(fn, "batch_idx", min_args=2):
        return (batch, batch_idx)
    return (batch,)


def audit_lightning_step(trainer: Any, module: Any, batch: Any, batch_idx: int,
                         **kwargs: bool) -> StepAudit:
    """:func:`~toolkit.audit_step` of ``module.training_step(batch, batch_idx)`` against
    ``trainer.optimizers`` (see the module's docstring); raises ``_NothingToAudit`` when the
    step returns no loss or steps no optimizer."""
    args = _training_step_args(module, batch, batch_idx)
    manual = _Manual()
    automatic = module.automatic_optimization

    def step() -> dict[str, torch.Tensor]:
        manual.start()
        with trainer.precision_plugin.train_step_context():
            out = module.training_step(*args)
        if not automatic:
            return manual.stepped()
        loss = out.get("loss") if isinstance(out, dict) else out
        if not isinstance(loss, torch.Tensor):
            raise _NothingToAudit("training_step returned no loss")
        return {"loss": loss}

    if automatic and not trainer.optimizers:
        raise _NothingToAudit("the module has no optimizer", final=True)
    optimizers: Any = trainer.optimizers[0] if automatic else manual.pairing
    with _recorded(trainer, module, manual):
        return audit_step(step, optimizers, modules=module, restore_state=True, **kwargs)


class AuditCallback(pl.Callback):
    """Audit the module's training step before Lightning runs it (see the module docstring).

    Args:
        every_n_steps: ``None`` (default) audits the first training batch only; ``n`` audits
            batches 0, n, 2n, ... (counted over the whole fit).
        on_finding: ``"raise"`` (default): :class:`~toolkit.GradientLeakError` with the
            audit's report (``err.audit`` is the :class:`~toolkit.StepAudit`), before the
            step runs; ``"warn"``: an :class:`~toolkit.integrations.AuditWarning` with the
            report, and training goes on.
        allow_pass_through, allow_trained_target: passed to :func:`~toolkit.audit_step`.

    Attributes:
        audits: ``(batch counted from 0, StepAudit)`` for every audited batch.
    """

    def __init__(self, *, every_n_steps: int | None = None, on_finding: str = "raise",
                 allow_pass_through: bool = True, allow_trained_target: bool = False) -> None:
        super().__init__()
        self.options = AuditOptions(every_n_steps, on_finding, allow_pass_through,
                                    allow_trained_target)
        self.audits: list[tuple[int, StepAudit]] = []
        self._batches = self._skipped = 0

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        n, self._batches = self._batches, self._batches + 1
        if not self.options.due(n):
            return
        audit = None
        try:
            audit = audit_lightning_step(trainer, pl_module, batch, batch_idx,
                                         **self.options.audit_kwargs())
            self.audits.append((n, audit))
        except _NothingToAudit as why:
            if why.final:
                self.options.next_step = math.inf
            if why.final or not self._skipped:
                then = "nothing will be audited" if why.final else "the audit moves on"
                pl.utilities.rank_zero_warn(f"AuditCallback: batch {n} cannot be audited: {why}; "
                                            f"{then}")
            self._skipped += 1
        # every process takes part in both decisions, audited or not, so that none waits
        strategy = trainer.strategy
        if strategy.reduce_boolean_decision(audit is not None, all=True):
            self.options.audited(n)
        found = strategy.reduce_boolean_decision(audit is not None and not audit.ok, all=False)
        report(audit, self.options, f"AuditCallback: training_step of batch {n} "
               f"(batch_idx {batch_idx}, epoch {trainer.current_epoch})", found)
