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

from toolkit.audit.kinds import Proof
from toolkit.audit.record.sites import Line
from toolkit.audit.truth.proof import Place, Site

__all__ = ["BuildAfter", "CutAt", "FirstOf", "LeaveOut", "Option", "Wanted"]

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
class Option:
    """One way to fix a finding: what it writes (``places``, all of one kind; none: advice
    only), the finding's ``fix`` and ``lines`` when it is the way chosen (``None``: the lines
    its edits are written at), and when it is chosen: ``needs`` can be written in full
    (``None``: always). ``proved``: ``False`` where the cut is not proved on the recorded
    graph: the way is chosen as any other, and then neither lines nor edits are given.
    ``proof``: the proof the finding states when this way is chosen (``None``: settled from
    its edits, :class:`~toolkit.audit.kinds.Proof`)."""

    places: tuple[Place, ...]
    fix: str
    lines: tuple[Line, ...] | None = None
    needs: tuple[Place, ...] | None = None
    proved: bool = True
    proof: Proof | None = None


@dataclass(frozen=True, eq=False)
class FirstOf:
    """Write the first of ``options``, in the order the rule prefers them, that is chosen
    (:func:`~toolkit.audit.fixes.chosen.first_written`); the last needs nothing."""

    options: tuple[Option, ...]


@dataclass(frozen=True, eq=False)
class BuildAfter:
    """Build the optimizer of ``loss`` after the module ``owner`` (``None``: a module or
    tensor the named modules hold) was replaced: its statement moved below the replacement
    (:func:`~toolkit.audit.fixes.optimizer_edits.rebuild_fix`, which words the fix, with the
    line that builds the optimizer, from where it moves). ``proof``: the proof the finding
    states (``None``: settled from the edits)."""

    loss: str
    owner: str | None
    proof: Proof | None = None


@dataclass(frozen=True, eq=False)
class Wanted(Generic[F]):
    """``finding``, given without edits, and the fix it wants written as edits (with
    :class:`FirstOf` and :class:`BuildAfter`, its fix text and lines too: those of the option
    chosen, or of where the optimizer's statement moves)."""

    finding: F
    fix: LeaveOut | CutAt | FirstOf | BuildAfter
