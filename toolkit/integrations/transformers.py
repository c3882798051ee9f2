"""``AuditCallback`` for the Hugging Face ``Trainer``: the step audit on its ``compute_loss``.

::

    trainer = Trainer(model, args, train_dataset=data, callbacks=[AuditCallback()])
    trainer.train()     # GradientLeakError before the first step if the loss leaks or skips

A ``TrainerCallback`` is handed neither the ``Trainer`` nor the batch, so at ``on_train_begin``
the callback finds the ``Trainer`` that called it (on the call stack) and wraps its
``compute_loss`` (a subclass's override included) for the length of ``train()``. On the first
training step (or every ``every_n_steps`` optimizer steps), the first call of ``compute_loss``
with the model in training mode and gradients on is audited before it runs: the same call,
on the same inputs, inside the same autocast context, through :func:`toolkit.audit_step`
(twice, with ``restore_state``; each call gets its own shallow copy of the inputs, since
``compute_loss`` may ``pop`` the labels) against the Trainer's optimizer. The model is the
unwrapped one (``accelerator.unwrap_model``): a DDP forward without its backward would break
DDP's next iteration. Then ``compute_loss`` runs as it would have: the weights after
``train()`` are the same with and without the callback.

The Trainer's own optimizer holds only parameters that require grad (``create_optimizer``
filters them), so a frozen embedding is neither stepped nor audited: it audits clean. One
passed in ``optimizers=(opt, sched)`` that holds frozen tensors shows them as ``frozen``
(information). A loss that leaves out part of the model (BERT's pooler, when the loss reads
the ``[CLS]`` hidden state) is ``dead``, with the reason and the line that calls the part.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

from toolkit.audit import StepAudit, audit_step
from toolkit.integrations._common import AuditOptions, report, require

__all__ = ["AuditCallback"]

transformers = require(("transformers",), "transformers", "toolkit.integrations.transformers")


def _calling_trainer() -> Any:
    """The ``transformers.Trainer`` whose method is on the call stack (it fires the events)."""
    frame = sys._getframe(2)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, transformers.Trainer):
            return candidate
        frame = frame.f_back
    raise RuntimeError("AuditCallback: on_train_begin was not called by a transformers.Trainer; "
                       "pass the callback to Trainer(callbacks=[...]) and call trainer.train()")


def audit_compute_loss(trainer: Any, compute_loss: Any, model: Any, inputs: Any,
                       args: tuple[Any, ...], kwargs: dict[str, Any],
                       **options: bool) -> StepAudit:
    """:func:`~toolkit.audit_step` of ``compute_loss(model, inputs, *args, **kwargs)``
    against ``trainer.optimizer`` (see the module's docstring)."""
    accelerator = getattr(trainer, "accelerator", None)
    inner = accelerator.unwrap_model(model) if accelerator is not None else model
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate's wrapper

    def step() -> torch.Tensor:
        out = compute_loss(inner, dict(inputs), *args, **kwargs)
        return out[0] if isinstance(out, tuple) else out

    return audit_step(step, optimizer, modules=inner, restore_state=True, **options)


class AuditCallback(transformers.TrainerCallback):
    """Audit the Trainer's ``compute_loss`` before its first step (see the module docstring).

    Args:
        every_n_steps: ``None`` (default) audits the first optimizer step only; ``n`` audits
            steps 0, n, 2n, ... (each on its first micro-batch).
        on_finding: ``"raise"`` (default): :class:`~toolkit.GradientLeakError` with the
            audit's report (``err.audit`` is the :class:`~toolkit.StepAudit`), before the
            step runs; ``"warn"``: an :class:`~toolkit.integrations.AuditWarning` with the
            report, and training goes on.
        allow_pass_through, allow_trained_target: passed to :func:`~toolkit.audit_step`.

    Attributes:
        audits: ``(optimizer step, StepAudit)`` for every audited step.
    """

    def __init__(self, *, every_n_steps: int | None = None, on_finding: str = "raise",
                 allow_pass_through: bool = True, allow_trained_target: bool = False) -> None:
        self.options = AuditOptions(every_n_steps, on_finding, allow_pass_through,
                                    allow_trained_target)
        self.audits: list[tuple[int, StepAudit]] = []
        self._trainer: Any = None
        self._due: int | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = _calling_trainer()
        self._unwrap(trainer)  # a train() that raised left it wrapped
        original = trainer.compute_loss
        callback = self

        @functools.wraps(original)
        def compute_loss(model: Any, inputs: Any, *rest: Any, **options: Any) -> Any:
            step = callback._due
            if step is not None and model.training and torch.is_grad_enabled():
                callback._due = None
                try:
                    callback._audit(trainer, original, model, inputs, rest, options, step)
                finally:
                    if not callback.options.due(sys.maxsize):  # no audit left to do
                        callback._unwrap(trainer)
            return original(model, inputs, *rest, **options)

        compute_loss._toolkit_audit = True  # type: ignore[attr-defined]
        trainer.compute_loss = compute_loss
        self._trainer = trainer

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.options.due(state.global_step):
            self._due = state.global_step

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is not None:
            self._unwrap(self._trainer)
            self._trainer = None

    @staticmethod
    def _unwrap(trainer: Any) -> None:
        """Give the Trainer its own ``compute_loss`` back."""
        if getattr(vars(trainer).get("compute_loss"), "_toolkit_audit", False):
            del vars(trainer)["compute_loss"]

    def _audit(self, trainer: Any, compute_loss: Any, model: Any, inputs: Any,
               args: tuple[Any, ...], kwargs: dict[str, Any], step: int) -> None:
        audit = audit_compute_loss(trainer, compute_loss, model, inputs, args, kwargs,
                                   **self.options.audit_kwargs())
        self.options.audited(step)
        self.audits.append((step, audit))
        found = not audit.ok
        accelerator = getattr(trainer, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1:
            flag = torch.tensor(float(found), device=accelerator.device)
            found = bool(accelerator.reduce(flag, reduction="sum").item() > 0)
        report(audit, self.options, f"AuditCallback: compute_loss of optimizer step {step} "
               f"(epoch {trainer.state.epoch or 0:.3g})", found)
