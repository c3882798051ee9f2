"""One visual grammar for every figure: what colour, line, marker and size mean.

Experiments' ``figures(run)`` and the report's generic figures draw with these, so a reader
learns the grammar once:

- **Colour and line style say the variant.** ``blocked`` is solid blue, ``unblocked`` dashed
  vermillion, a ``reference`` (closed form, peer library, baseline) dotted dark grey, in every
  figure. Nothing else is drawn in blue or orange hues: :data:`EXTRA_COLORS`, the palette of
  other categories, keeps its hues away from both (the tests check it in CIE L*a*b*).
- **Other categories get other channels.** A method, a dtype or a mixture component is a
  marker (:data:`MARKERS`), a panel, or a colour of :data:`EXTRA_COLORS`, never blue or orange.
- **Curves that coincide stay visible.** :func:`note_identical` finds lines that lie on each
  other and writes "identical to …" (the same numbers) or "indistinguishable from …: max
  difference x" (within a pixel, x apart in the panel's units) into the upper one's legend
  entry; different marker shapes (or markers at alternating points) also keep both visible.
- **Legends stay off the data.** :func:`place_legend` leaves the place to matplotlib:
  ``loc="best"`` (the spot with the least data under it, found as the figure is drawn), or
  outside the axes, right of them or under the figure, where constrained layout makes room.
- **Text is at least 9 pt where the report shows it.** The report draws figures at
  :data:`REPORT_DPI` and shows them at most :data:`DISPLAY_WIDTH_PX` wide; a figure up to
  :data:`MAX_WIDTH_IN` inches wide is shown at its own size, so a font size is its size on the
  page. The tests check all of this on every drawn figure (``tests/lab/report/layout.py``).

Colours are from the Okabe–Ito palette and Paul Tol's muted scheme, which stay
distinguishable for the common forms of colour blindness (Okabe & Ito 2008,
https://jfly.uni-koeln.de/color/; Tol 2021, https://personal.sron.nl/~pault/).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

__all__ = [
    "COLORS",
    "DISPLAY_WIDTH_PX",
    "EXTRA_COLORS",
    "LINESTYLES",
    "MARKERS",
    "MAX_WIDTH_IN",
    "MIN_FONT_PT",
    "REPORT_DPI",
    "integer_ticks",
    "legend_entries",
    "note_identical",
    "nudge_labels",
    "place_legend",
    "variant_style",
]

#: The three roles every comparison has.
COLORS: dict[str, str] = {
    BLOCKED: "#0072B2",    # blue: with the block (the method as published)
    UNBLOCKED: "#D55E00",  # vermillion: the same code inside disable_blocks
    "reference": "#404040",  # dark grey: closed forms, peers (scikit-learn, torch, ...)
}
LINESTYLES: dict[str, str] = {BLOCKED: "-", UNBLOCKED: "--", "reference": ":"}
_ZORDER = {BLOCKED: 2.0, UNBLOCKED: 2.5, "reference": 2.2}
#: Other categories (a peer, a second method, a dtype, a mixture component), in order of
#: appearance: green, reddish purple, olive, purple, teal, wine; no blue or orange hue.
EXTRA_COLORS = ["#009E73", "#CC79A7", "#999933", "#6A3D9A", "#44AA99", "#882255"]
#: Markers for methods (a second channel next to the variant's colour).
MARKERS = ["o", "s", "^", "D", "v", "P"]

REPORT_DPI = 100          # the report's PNGs: pixels per inch of figure
DISPLAY_WIDTH_PX = 900    # the widest the report shows a figure (CSS pixels)
MAX_WIDTH_IN = DISPLAY_WIDTH_PX / REPORT_DPI  # wider figures are shrunk, and their text with them
MIN_FONT_PT = 9.0         # the smallest text on the page

_REFERENCE_WORDS = ("reference", "closed_form", "closed form", "exact", "sklearn", "torch",
                    "peer", "truth", "torchattacks", "pixels")


def variant_style(variant: str, others: list[str] | None = None) -> dict[str, Any]:
    """Matplotlib keyword arguments (``color``, ``linestyle``, ``zorder``) for a variant name.

    ``blocked`` and ``unblocked`` (or names starting with them, e.g. ``"blocked cd1"``) get their
    colours; names that say they are a reference or a peer (``closed_form``, ``sklearn``, ...)
    get the reference grey; any other name gets the next of :data:`EXTRA_COLORS`, remembered in
    ``others`` so that one figure gives each name one colour.
    """
    role = None
    lowered = variant.lower()
    for key in (UNBLOCKED, BLOCKED):  # "unblocked" first: it contains "blocked"
        if lowered.startswith(key):
            role = key
            break
    if role is None and any(word in lowered.replace("_", " ") for word in _REFERENCE_WORDS):
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
    target.set_major_locator(MaxNLocator(nbins="auto", integer=True))  # as many as fit


def _pixels(ax: Any, line: Any) -> Any:
    """A line's points in pixels, on the axes' current box and limits."""
    import numpy as np

    ax.get_xlim(), ax.get_ylim()  # autoscale now
    return line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))


def _short(label: str, other: str) -> str:
    """``other`` without the words it shares with ``label`` (``"PGD-AT (blocked)"`` next to
    ``"PGD-AT (unblocked)"`` → ``"blocked"``)."""
    mine = set(re.findall(r"[\w.\-]+", label.lower()))
    kept = [w for w in re.findall(r"[\w.\-]+", other) if w.lower() not in mine]
    return " ".join(kept) or other


def note_identical(ax: Any, *, tol_px: float = 1.5) -> list[str]:
    """Mark lines of ``ax`` that lie on each other, so that the reader knows both are there.

    Two labelled lines with the same x values whose points are within ``tol_px`` pixels of
    each other everywhere (on the axes as they are now: call it after plotting and setting the
    scales, before the legend) hide one another. The upper one's label gains, on a second
    line, ``"identical to <other>: max difference 0"`` when the numbers are the same, else
    ``"indistinguishable from <other>: max difference <x>"`` (x in data units: the curves
    differ, by less than the eye sees); the upper line is drawn dashed if it was solid, and
    thinner than the lower one, which then shows on both sides of it. Returns the notes.
    """
    import numpy as np

    lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata()) > 1
             and not ln.get_label().startswith("_")]
    notes = []
    done: set[int] = set()
    for i, a in enumerate(lines):
        for b in lines[i + 1:]:
            if id(a) in done or id(b) in done:
                continue
            xa, xb = np.asarray(a.get_xdata(), float), np.asarray(b.get_xdata(), float)
            if xa.shape != xb.shape or not np.allclose(xa, xb, equal_nan=True):
                continue
            pa, pb = _pixels(ax, a), _pixels(ax, b)
            with np.errstate(invalid="ignore"):
                gap = np.nanmax(np.abs(pa - pb)) if np.isfinite(pa).any() else np.inf
            if not gap <= tol_px:
                continue
            top, under = (b, a) if b.get_zorder() >= a.get_zorder() else (a, b)
            ya = np.asarray(a.get_ydata(), float)
            yb = np.asarray(b.get_ydata(), float)
            with np.errstate(invalid="ignore"):
                diff = float(np.nanmax(np.abs(ya - yb))) if np.isfinite(ya - yb).any() else 0.0
            relation = "identical to" if diff == 0 else "indistinguishable from"
            note = f"{relation} {_short(top.get_label(), under.get_label())}: " \
                   f"max difference {diff:.2g}"
            top.set_label(f"{top.get_label()}\n{note}")
            if top.get_linestyle() in ("-", "solid"):
                top.set_linestyle("--")
            # the lower line drawn wider than the upper: it shows on both sides of it
            width = max(under.get_linewidth(), top.get_linewidth())
            under.set_linewidth(1.6 * width)
            top.set_linewidth(0.7 * width)
            done.add(id(top))
            notes.append(note)
    return notes


def legend_entries(axes: Any) -> tuple[list[Any], list[str]]:
    """Handles and labels of several axes for one shared legend: each entry once (by its
    first line), with the notes :func:`note_identical` wrote in any of the axes, each note
    wrapped at ``NOTE_WIDTH`` characters so that no entry is wider than a column.

    A note found in several panels gives each panel's difference in that panel's units,
    named by the panel's title ("max difference 0.00014 (test MSE), 0.071 (perplexity)"): one
    number for panels of different units would misstate all but one. A note found in only
    some of the panels where the entry is drawn names them."""
    handles: dict[str, Any] = {}
    seen: dict[str, int] = {}
    notes: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for i, ax in enumerate(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            key, *lines = label.split("\n")
            handles.setdefault(key, handle)
            seen[key] = seen.get(key, 0) + 1
            kept = notes.setdefault(key, {})
            for line in lines:
                what, _, diff = line.rpartition(": max difference ")
                other = what.split(" ", 2)[2] if what.startswith(_RELATIONS) else what
                kept.setdefault(other, []).append((ax.get_title() or f"panel {i + 1}",
                                                   float(diff)))
    labels = []
    for key in handles:
        lines = [key]
        for other, panels in notes[key].items():
            relation = "identical to" if all(d == 0 for _, d in panels) else \
                "indistinguishable from"
            if len(panels) == 1 or relation == "identical to":
                where = "" if len(panels) == seen[key] else \
                    f" ({', '.join(t for t, _ in panels)})" if len(panels) <= 2 else \
                    f" ({len(panels)} panels)"
                diff = f"{max(d for _, d in panels):.2g}"
            else:
                where, diff = "", ", ".join(f"{d:.2g} ({t})" for t, d in panels)
            note = f"{relation} {other}{where}: max difference {diff}"
            lines += textwrap.wrap(note, NOTE_WIDTH, break_long_words=False) or [note]
        labels.append("\n".join(lines))
    return list(handles.values()), labels


#: the words :func:`note_identical` writes before the other curve's name
_RELATIONS = ("identical to ", "indistinguishable from ")


#: characters per line of a note in a shared legend (a panel title can make one long)
NOTE_WIDTH = 44

def place_legend(ax: Any, *args: Any, outside: str | None = None, **kwargs: Any) -> Any:
    """The legend of ``ax``, placed by matplotlib: ``loc="best"``, the spot of the axes with the
    least data under it (found when the figure is drawn); ``outside="right"``, right of the
    axes; ``outside="below"``, under the figure (constrained layout makes room for both).
    ``args`` and ``kwargs`` go to the legend. Returns it."""
    if outside == "below":
        handles = args or ax.get_legend_handles_labels()
        return ax.figure.legend(*handles, loc="outside lower center", **kwargs)
    if outside == "right":
        return ax.legend(*args, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                         **kwargs)
    if outside is not None:
        raise ValueError(f"place_legend: outside must be None, 'right' or 'below', got "
                         f"{outside!r}")
    return ax.legend(*args, loc="best", **kwargs)


def _crosses(text: Any, renderer: Any) -> bool:
    """Whether a line of ``text``'s axes passes through the text's box (as last drawn)."""
    import numpy as np
    from matplotlib.path import Path

    box = text.get_window_extent(renderer).expanded(0.95, 0.9)
    for line in text.axes.get_lines():
        if not line.get_visible() or line.get_linestyle() in ("None", "none", "", " "):
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) > 1 and Path(xy).intersects_bbox(box, filled=False):
            return True
    return False


def nudge_labels(*axes: Any, offset: float = 4.0) -> None:
    """Move each annotation of ``axes`` (text offset from a point, ``textcoords="offset
    points"``) to the first corner around its point, upper right, upper left, lower right or
    lower left, where no line of its axes passes through it (the figure drawn once)."""
    if not axes:
        return
    fig = axes[0].figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    corners = [(1, 1, "left", "bottom"), (-1, 1, "right", "bottom"), (1, -1, "left", "top"),
               (-1, -1, "right", "top")]
    for text in (t for ax in axes for t in ax.texts if hasattr(t, "xyann")):
        for sx, sy, ha, va in corners:
            text.xyann = (sx * offset, sy * offset)
            text.set(ha=ha, va=va)
            if not _crosses(text, renderer):
                break
