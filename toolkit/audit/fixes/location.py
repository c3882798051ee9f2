"""A proved cut written at its place in the user's code.

The search of :mod:`toolkit.audit.truth.cuts` proves a cut on the recorded graph and says which
expression each of its cuts cuts (a :data:`~toolkit.audit.truth.proof.Site`); :func:`edits_of`
writes them as edits of the user's lines (:mod:`toolkit.audit.fixes.edits`), and
:func:`cut_edits` the edits of a trained target's cuts, one per term of its loss.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from toolkit.audit.fixes.edits import cut_argument, cut_made, cut_operand
from toolkit.audit.truth import cuts
from toolkit.audit.truth.proof import Cut, HandedAt, MadeAt, Prover, Site

if TYPE_CHECKING:
    from toolkit.audit.edit import Edit
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["cut_edits", "edit_of", "edits_of", "leak_cut"]


def edit_of(site: Site) -> Edit | None:
    """The edit that cuts the expression ``site`` names; ``None`` where it is not known."""
    if isinstance(site, MadeAt):
        return cut_made(site.line)
    if isinstance(site, HandedAt):
        return cut_argument(site.line, site.position)
    return cut_operand(site.line, site.position)


def edits_of(cut: Cut) -> tuple[Edit | None, ...]:
    """Each of ``cut``'s cuts as an edit of its line (``None`` where it is not known)."""
    return tuple(edit_of(site) for site in cut.sites)


def cut_edits(terms: tuple[tuple[Site, ...] | None, ...]) -> tuple[Edit, ...]:
    """The edits of one fix made of a cut per term (``None``: no cut proved for that term):
    every cut's edits, each once, when every term's cut is proved and written in full; else
    none (a fix half written is no fix)."""
    edits: tuple[Edit, ...] = ()
    for k, sites in enumerate(terms):
        written = None if sites is None else tuple(edit_of(site) for site in sites)
        if written is None or None in written or (k and not edits):
            edits = ()
        else:
            edits = tuple(dict.fromkeys((*edits, *written)))  # type: ignore[arg-type]
    return edits


def leak_cut(step: RecordedStep, prover: Prover, loss: str, leaf: int, legit: set[int],
             known: list[Cut]) -> Cut | None:
    """:func:`toolkit.audit.truth.cuts.leak_cut`, its cuts written as ``edits``."""
    found = cuts.leak_cut(step, prover, loss, leaf, legit, known)
    return None if found is None else dataclasses.replace(found, edits=edits_of(found))
