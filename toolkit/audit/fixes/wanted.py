"""The fixes the rules want, written as edits of the user's code after the rules decided.

A rule returns a finding wrapped in :class:`~toolkit.audit.rules.wanted.Wanted` with a typed
description of its fix; :func:`written` returns the finding with the edits that fix it (none
when the line cannot be written so), as the rule itself once built them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.optimizer_edits import leave_out
from toolkit.audit.rules.wanted import LeaveOut, Wanted

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["written"]


def written(step: RecordedStep, found: Any) -> Any:
    """``found`` as the audit reports it: a :class:`Wanted` finding with the edits of its
    fix (its proof then settled from them), anything else as it is."""
    if not isinstance(found, Wanted):
        return found
    return dataclasses.replace(found.finding, edits=_edits(step, found.fix), proof=None)


def _edits(step: RecordedStep, fix: LeaveOut) -> tuple[Edit, ...]:
    edit = next((e for line, optimizer in fix.optimizers
                 if (e := leave_out(line, optimizer, step.namespace, list(fix.tensors)))
                 is not None), None)
    return () if edit is None else (edit,)
