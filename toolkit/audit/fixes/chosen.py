"""The fix a rule chose among several, written: the first of its options whose edits can be
written.

A rule that would fix one failure in one of several ways, each only where its edits can be
written (a cut where the state is stored, else where it is read, else a reset), gives every
option in its order as the places each writes (:data:`~toolkit.audit.truth.proof.Place`);
:func:`first_written` writes them here, with the edits of :mod:`toolkit.audit.fixes.edits`.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import cut_assigned, cut_written, reset_before
from toolkit.audit.fixes.location import cut_edits
from toolkit.audit.fixes.stored import stored_at
from toolkit.audit.record.sites import Line
from toolkit.audit.truth.proof import (
    AssignedAt,
    HandedAt,
    MadeAt,
    Place,
    ReadAt,
    ResetAt,
    StoredAt,
    WrittenAt,
)

__all__ = ["first_written", "written_at"]


def written_at(places: Sequence[Place]) -> tuple[tuple[Line, ...], tuple[Edit, ...]]:
    """The edits that write ``places`` (all of one kind), each once, and the lines they are
    written at; no edit when they cannot all be written (a fix half written is no fix).
    Expressions (:data:`~toolkit.audit.truth.proof.Site`) are cut where they are; values
    stored into a container are cut where they are not cut yet (a line that stores a cut value
    already is left out: :func:`~toolkit.audit.fixes.stored.stored_at`)."""
    if not places:
        return (), ()
    first = places[0]
    if isinstance(first, (MadeAt, HandedAt, ReadAt)):
        return tuple(p.line for p in places), cut_edits((tuple(places),))  # type: ignore[arg-type]
    if isinstance(first, StoredAt):
        kept = stored_at((p.line, p.container, p.key) for p in places)  # type: ignore[union-attr]
        return ((), ()) if kept is None else kept
    if isinstance(first, WrittenAt):
        written = [cut_written(p.line) for p in places]
        if any(not found for found in written):
            return (), ()
        return (tuple(p.line for p in places),
                tuple(dict.fromkeys(e for found in written for e in found)))
    if isinstance(first, AssignedAt):
        edit = cut_assigned(first.line)
        return (first.line,), () if edit is None else (edit,)
    assert isinstance(first, ResetAt)
    return (first.line,), (reset_before(first.line, first.indent, first.owner, first.name),)


def first_written(options: Sequence[tuple[Sequence[Place] | None, Sequence[Place]]]
                  ) -> tuple[int, tuple[Line, ...], tuple[Edit, ...]]:
    """The first of ``options`` chosen, with the lines and edits of what it writes: each
    option is ``(needs, places)``, chosen when ``needs`` is ``None`` or can be written
    (:func:`written_at` gives edits), and it writes ``places`` (often ``needs`` itself)."""
    for k, (needs, places) in enumerate(options):
        tried = None if needs is None else written_at(needs)
        if tried is not None and not tried[1]:
            continue
        return (k, *(tried if tried is not None and places is needs else written_at(places)))
    raise ValueError("no option of the fix is chosen: the last one must need nothing")
