"""The fix a rule wants, said plainly: the rule decides, the fixes stage writes it.

A rule that finds a failure whose fix is an edit of the user's code returns the finding
without its edits, wrapped in :class:`Wanted` with a typed description of the fix (which
line, which tensors); the orchestrator (:func:`toolkit.audit.step.run_rules`), right after
the rule, has the fixes stage write those edits into the finding. The description holds no
edit and no text: only what the rule decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolkit.audit.record.sites import Line
from toolkit.audit.truth.proof import Site

__all__ = ["CutAt", "LeaveOut", "Wanted"]

F = TypeVar("F")


@dataclass(frozen=True, eq=False)
class LeaveOut:
    """Take ``tensors`` out of one optimizer: the first of ``optimizers`` (each with the line
    of the user's code that builds it, in the order the rule prefers them) whose line can
    be written without them (:func:`~toolkit.audit.fixes.optimizer_edits.leave_out_of_first`)."""

    optimizers: tuple[tuple[Line, Any], ...]
    tensors: tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class CutAt:
    """Write the cuts proved for one finding, one cut per term of its loss (``None``: no cut
    proved for that term), each as the expressions it cuts; all of them or none
    (:func:`~toolkit.audit.fixes.location.cut_edits`)."""

    terms: tuple[tuple[Site, ...] | None, ...]


@dataclass(frozen=True, eq=False)
class Wanted(Generic[F]):
    """``finding``, given without edits, and the fix it wants written as edits."""

    finding: F
    fix: LeaveOut | CutAt
