"""A proved cut written at its place in the user's code.

The search of :mod:`toolkit.audit.truth.cuts` proves a cut on the recorded graph and says which
expression each of its cuts cuts (a :data:`~toolkit.audit.truth.proof.Site`); :func:`edit_of`
writes one as an edit of the user's line (:mod:`toolkit.audit.fixes.edits`), and
:func:`cut_edits` the edits of a fix made of a cut per term of its loss (a trained target's;
a leak's, of one term).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.audit.fixes.edits import cut_argument, cut_made, cut_operand
from toolkit.audit.truth.proof import HandedAt, MadeAt, Site

if TYPE_CHECKING:
    from toolkit.audit.edit import Edit

__all__ = ["cut_edits", "edit_of"]


def edit_of(site: Site) -> Edit | None:
    """The edit that cuts the expression ``site`` names; ``None`` where it is not known."""
    if isinstance(site, MadeAt):
        return cut_made(site.line)
    if isinstance(site, HandedAt):
        return cut_argument(site.line, site.position)
    return cut_operand(site.line, site.position)



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
