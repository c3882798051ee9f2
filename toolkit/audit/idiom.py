"""The idiom a fix's words are written in. ``audit_step`` is run on a step written with this
toolkit, and its fixes offer the toolkit's ``stop_gradient(x, name=...)`` and its own options
beside plain torch; ``toolkit audit train.py`` reads a plain torch script, whose user is
offered plain torch only (``.detach()``, ``torch.no_grad()``): :data:`PLAIN_TORCH` is set
while the script mode runs the step audit's rules."""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["PLAIN_TORCH", "toolkit_only"]

#: whether the fixes are written for a plain torch script
PLAIN_TORCH: ContextVar[bool] = ContextVar("plain_torch", default=False)


def toolkit_only(text: str) -> str:
    """``text`` (words about the toolkit's own API), or nothing for a plain torch script."""
    return "" if PLAIN_TORCH.get() else text
