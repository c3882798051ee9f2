"""The fix a rule chose among several, written: the first of its options whose edits can be
written.

A rule that would fix one failure in one of several ways, each only where its edits can be
written (a cut where the state is stored, else where it is read, else a reset), gives every
option in its order as the places each writes (:data:`~toolkit.audit.truth.proof.Place`);
:func:`first_written` writes them here, with the edits of :mod:`toolkit.audit.fixes.edits`
and :mod:`toolkit.audit.fixes.optimizer_edits`, and the registrations of
:mod:`toolkit.audit.fixes.registration` (each kept to be run on the live objects before it is
printed).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import (
    cut_assigned,
    cut_written,
    default_mode,
    extend_argument,
    grad_on,
    insert_before,
    keyword_value,
    recompute,
    remove_detach,
    reset_before,
    stack_values,
    straight_through,
    straight_through_integer,
)
from toolkit.audit.fixes.location import edit_of
from toolkit.audit.fixes.optimizer_edits import join, leave_out
from toolkit.audit.fixes.registration import registered, remember
from toolkit.audit.fixes.script_edits import empty_with
from toolkit.audit.fixes.stored import stored_at
from toolkit.audit.fixes.switch_edits import out_of_no_grad
from toolkit.audit.record.sites import Line
from toolkit.audit.truth.proof import (
    ArgumentAt,
    AssignedAt,
    BuiltAt,
    CopiedAt,
    CutBefore,
    DetachedAt,
    EmptiedAt,
    HandedAt,
    IntegerAt,
    JoinedAt,
    KeywordAt,
    MadeAt,
    ModeAt,
    NoGradAt,
    Place,
    ReadAt,
    RecomputedAt,
    RegisteredAt,
    ResetAt,
    StoredAt,
    WrittenAt,
    ZeroDerivativeAt,
)

__all__ = ["first_written", "written_at"]


def _edits_at(place: Place, namespace: dict[str, object]) -> tuple[Edit, ...]:
    """The edits that write ``place`` (none where it cannot be written)."""
    if isinstance(place, WrittenAt):
        return cut_written(place.line)
    if isinstance(place, (MadeAt, HandedAt, ReadAt)):
        edit = edit_of(place)
    elif isinstance(place, AssignedAt):
        edit = cut_assigned(place.line)
    elif isinstance(place, CutBefore):
        edit = insert_before(place.line, place.indent, place.statement)
    elif isinstance(place, ResetAt):
        edit = reset_before(place.line, place.indent, place.owner, place.name)
    elif isinstance(place, DetachedAt):
        edit = remove_detach(place.line)
    elif isinstance(place, EmptiedAt):
        edit = empty_with(place.line.path, place.line.number, place.container)
    elif isinstance(place, NoGradAt):
        moved = None if place.call is None else out_of_no_grad(place.call.path,
                                                               place.call.number)
        if moved is not None:
            return tuple(moved[1])
        edit = grad_on(place.line)
    elif isinstance(place, CopiedAt):
        edit = stack_values(place.line)
    elif isinstance(place, IntegerAt):
        edit = straight_through_integer(place.line)
    elif isinstance(place, ZeroDerivativeAt):
        edit = straight_through(place.line)
    elif isinstance(place, ModeAt):
        edit = default_mode(place.line, namespace)
    elif isinstance(place, KeywordAt):
        edit = keyword_value(place.line, place.function, place.argument, place.value)
    elif isinstance(place, ArgumentAt):
        edit = extend_argument(place.line, place.function, place.argument, list(place.extra))
    elif isinstance(place, BuiltAt):
        edit = leave_out(place.line, place.optimizer, namespace, list(place.tensors))
    elif isinstance(place, RecomputedAt):
        edit = recompute(place.line, place.position, place.made)
    elif isinstance(place, JoinedAt):
        edit = join(place.line, place.optimizer, place.names, place.joining)
        if edit is not None:  # run on the live objects before it is printed
            remember([edit], place.optimizer, place.line, place.names)
    elif isinstance(place, RegisteredAt):
        registration = registered(place.found)
        remember(registration.edits, place.optimizer, place.line, namespace,
                 registration.apply)
        return registration.edits
    else:
        raise TypeError(f"not a place a fix writes: {place!r}")
    return () if edit is None else (edit,)


def written_at(places: Sequence[Place], namespace: dict[str, object]
               ) -> tuple[tuple[Line, ...], tuple[Edit, ...]]:
    """The edits that write ``places``, each once, and the lines they are written at; no edit
    when they cannot all be written (a fix half written is no fix). Values stored into a
    container (:class:`~toolkit.audit.truth.proof.StoredAt`, all of that kind) are cut where
    they are not cut yet (a line that stores a cut value already is left out:
    :func:`~toolkit.audit.fixes.stored.stored_at`). ``namespace``: the step's, where a place
    reads a value (a mode's default, an optimizer's holder)."""
    if not places:
        return (), ()
    if isinstance(places[0], StoredAt):
        kept = stored_at((p.line, p.container, p.key) for p in places)  # type: ignore[union-attr]
        return ((), ()) if kept is None else kept
    found = [_edits_at(place, namespace) for place in places]
    if any(not edits for edits in found):
        return (), ()
    return (tuple(place.line for place in places),
            tuple(dict.fromkeys(e for edits in found for e in edits)))


def first_written(options: Sequence[tuple[Sequence[Place] | None, Sequence[Place]]],
                  namespace: dict[str, object]
                  ) -> tuple[int, tuple[Line, ...], tuple[Edit, ...]]:
    """The first of ``options`` chosen, with the lines and edits of what it writes: each
    option is ``(needs, places)``, chosen when ``needs`` is ``None`` or can be written
    (:func:`written_at` gives edits), and it writes ``places`` (often ``needs`` itself)."""
    for k, (needs, places) in enumerate(options):
        tried = None if needs is None else written_at(needs, namespace)
        if tried is not None and not tried[1]:
            continue
        if tried is not None and places is needs:
            return (k, *tried)
        return (k, *written_at(places, namespace))
    raise ValueError("no option of the fix is chosen: the last one must need nothing")
