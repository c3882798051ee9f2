"""Where the step's code reads a node of the recorded graph: the line of the step's own
operation that reads it, or of the module call it was handed to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkit.audit.record.sites import Line

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["event_of", "reader_line"]


def event_of(step: RecordedStep, reader: Any, node: Any, inner: bool
             ) -> tuple[str, tuple[Line, ...], int] | None:
    """``(module, the user's frames, start)`` of the call ``node`` was handed to and inside
    which ``reader`` was made (the latest such call that began before ``reader`` and had not
    returned: ``F.cosine_similarity(h(z), z)`` reads ``z`` after ``h`` returned)."""
    entries = [e for e in step.rec.handed.get(id(node), ())
               if e[0] is node and (inner or e[4])]
    seq = reader._sequence_nr()
    ends = step.rec.call_ends
    before = [e for e in entries if e[3] <= seq < ends.get((e[1], e[3]), seq + 1)]
    if not before:
        return None
    # the calls in the order they began: two with no node made between them share a start
    _, module, stack, start, _ = before[-1]
    return module, stack, start


def reader_line(step: RecordedStep, reader: Any, node: Any, inner: bool = True
                ) -> tuple[Line, str] | None:
    """``(line, how)`` where the code has ``reader`` read ``node``: the line that made
    ``reader`` when the step's own code did, else the line of the module call ``node`` was
    handed to when ``reader`` runs inside it (``inner=False``: only lines outside every
    module's forward)."""
    made = step.rec.made.get(id(reader))
    if made is not None and made[0] is reader and made[2] == "op":
        return made[1][0], "where it is read"
    event = event_of(step, reader, node, inner)
    if event is None:
        return None
    line = next((x for x in event[1] if inner or not x.inside), None)
    return None if line is None else (line, f"where it is handed to {event[0]}")
