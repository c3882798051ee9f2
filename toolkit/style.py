"""One look for every figure: the colours and line styles of blocked, unblocked and reference.

Experiments' ``figures(run)`` and the report's default figures draw with these, so "unblocked" is
the same colour in every figure of every report. Colours are from the Okabe–Ito palette, which
stays distinguishable for the common forms of colour blindness (Okabe & Ito 2008,
https://jfly.uni-koeln.de/color/).

The unblocked variant is drawn dashed *above* the blocked one (``zorder``), so that where the two
coincide (as theory often predicts) both stay visible.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLORS", "EXTRA_COLORS", "LINESTYLES", "integer_ticks", "variant_style"]

#: The three roles every comparison has.
COLORS: dict[str, str] = {
    "blocked": "#0072B2",    # blue: with the block (the method as published)
    "unblocked": "#D55E00",  # vermillion: the same code inside disable_blocks
    "reference": "#404040",  # dark grey: closed forms, peers (scikit-learn, torch, ...)
}
LINESTYLES: dict[str, str] = {"blocked": "-", "unblocked": "--", "reference": ":"}
_ZORDER = {"blocked": 2.0, "unblocked": 2.5, "reference": 2.2}
#: Further variants of an experiment (a peer, a second method), in order of appearance.
EXTRA_COLORS = ["#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#999999"]

_REFERENCE_WORDS = ("reference", "closed_form", "exact", "sklearn", "torch", "peer", "truth",
                    "torchattacks", "pixels")


def variant_style(variant: str, others: list[str] | None = None) -> dict[str, Any]:
    """Matplotlib keyword arguments (``color``, ``linestyle``, ``zorder``) for a variant name.

    ``blocked`` and ``unblocked`` (or names starting with them, e.g. ``"blocked cd1"``) get their
    colours; names that say they are a reference or a peer (``closed_form``, ``sklearn``, ...)
    get the reference grey; any other name gets the next of :data:`EXTRA_COLORS`, remembered in
    ``others`` so that one figure gives each name one colour.
    """
    role = None
    lowered = variant.lower()
    for key in ("unblocked", "blocked"):  # "unblocked" first: it contains "blocked"
        if lowered.startswith(key):
            role = key
            break
    if role is None and any(word in lowered for word in _REFERENCE_WORDS):
        role = "reference"
    if role is not None:
        return {"color": COLORS[role], "linestyle": LINESTYLES[role], "zorder": _ZORDER[role]}
    seen = others if others is not None else []
    if variant not in seen:
        seen.append(variant)
    return {"color": EXTRA_COLORS[seen.index(variant) % len(EXTRA_COLORS)], "linestyle": "-.",
            "zorder": 2.1}


def integer_ticks(ax: Any, axis: str = "x") -> None:
    """Ticks at whole numbers only (epochs, steps, iterations)."""
    from matplotlib.ticker import MaxNLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(MaxNLocator(integer=True))
