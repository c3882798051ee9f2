"""Transitional: the script's syntax is read in :mod:`toolkit.audit.record.syntax`, and its
edits are written in :mod:`toolkit.audit.fixes.script_edits`; this module goes when the last
watch module imports them from there."""

import ast  # noqa: F401
import os  # noqa: F401

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.script_edits import *  # noqa: F403
from toolkit.audit.fixes.script_edits import edit_at
from toolkit.audit.record.syntax import *  # noqa: F403


def ScriptEdit(path: str, start: tuple[int, int], end: tuple[int, int], new: str,
               what: str = "") -> Edit:
    """Transitional spelling of :func:`~toolkit.audit.fixes.script_edits.edit_at`."""
    return edit_at(path, start, end, new)
