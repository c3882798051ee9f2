"""One visual grammar for every figure: ``blocked`` solid blue, ``unblocked`` dashed vermillion,
a ``reference`` dotted dark grey, other categories one of :data:`EXTRA_COLORS` (Okabe & Ito 2008,
https://jfly.uni-koeln.de/color/, and Paul Tol's muted scheme, https://personal.sron.nl/~pault/:
told apart in the common forms of colour blindness). A figure is shown at its own size up to
:data:`MAX_WIDTH_IN` inches: a font size is its size on the page (at least :data:`MIN_FONT_PT`).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import numpy as np

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

COLORS: dict[str, str] = {BLOCKED: "#0072B2", UNBLOCKED: "#D55E00", "reference": "#404040"}
LINESTYLES: dict[str, str] = {BLOCKED: "-", UNBLOCKED: "--", "reference": ":"}
_ZORDER = {BLOCKED: 2.0, UNBLOCKED: 2.5, "reference": 2.2}
#: Other categories, in order: green, reddish purple, olive, purple, teal, wine.
EXTRA_COLORS = ["#009E73", "#CC79A7", "#999933", "#6A3D9A", "#44AA99", "#882255"]
MARKERS = ["o", "s", "^", "D", "v", "P"]
REPORT_DPI = 100          # the report's PNGs: pixels per inch of figure
DISPLAY_WIDTH_PX = 900    # the widest the report shows a figure (CSS pixels)
MAX_WIDTH_IN = DISPLAY_WIDTH_PX / REPORT_DPI  # wider figures are shrunk, and their text with them
MIN_FONT_PT = 9.0         # the smallest text on the page
_REFERENCE_WORDS = ("reference", "closed_form", "closed form", "exact", "sklearn", "torch",
                    "peer", "truth", "torchattacks", "pixels")
_RELATIONS = ("identical to ", "indistinguishable from ")
NOTE_WIDTH = 44  # characters per line of a note in a shared legend


def variant_style(variant: str, others: list[str] | None = None) -> dict[str, Any]:
    """``color``, ``linestyle`` and ``zorder`` of a variant: ``blocked``/``unblocked`` (or a
    name starting with one) and references (``closed_form``, ``sklearn``, ...) get their role's;
    any other name the next of :data:`EXTRA_COLORS`, remembered in ``others``."""
    lowered = variant.lower()
    role = next((k for k in (UNBLOCKED, BLOCKED) if lowered.startswith(k)), None) or \
        ("reference" if any(w in lowered.replace("_", " ") for w in _REFERENCE_WORDS) else None)
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

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator("auto", integer=True))


def note_identical(ax: Any, *, tol_px: float = 1.5) -> list[str]:
    """Mark labelled lines of ``ax`` that lie within ``tol_px`` pixels of each other (call it
    once the lines and scales are set): the upper one's label gains ``"identical to <other>:
    max difference 0"`` or ``"indistinguishable from <other>: max difference <x>"`` (data
    units), and it is drawn dashed and thinner than the lower one. Returns the notes."""
    lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata()) > 1
             and not ln.get_label().startswith("_")]
    ax.get_xlim(), ax.get_ylim()  # autoscale now
    px = {id(ln): ln.get_transform().transform(np.asarray(ln.get_xydata(), float))
          for ln in lines}
    notes, done = [], set()
    for i, a in enumerate(lines):
        for b in lines[i + 1:]:
            xa, xb = np.asarray(a.get_xdata(), float), np.asarray(b.get_xdata(), float)
            if id(a) in done or id(b) in done or xa.shape != xb.shape or \
                    not np.allclose(xa, xb, equal_nan=True):
                continue
            with np.errstate(invalid="ignore"):
                gap = np.nanmax(np.abs(px[id(a)] - px[id(b)])) \
                    if np.isfinite(px[id(a)]).any() else np.inf
                d = np.asarray(a.get_ydata(), float) - np.asarray(b.get_ydata(), float)
                diff = float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 0.0
            if not gap <= tol_px:
                continue
            top, under = (b, a) if b.get_zorder() >= a.get_zorder() else (a, b)
            mine = set(re.findall(r"[\w.\-]+", top.get_label().lower()))
            other = " ".join(w for w in re.findall(r"[\w.\-]+", under.get_label())
                             if w.lower() not in mine) or under.get_label()
            note = f"{_RELATIONS[diff != 0]}{other}: max difference {diff:.2g}"
            top.set_label(f"{top.get_label()}\n{note}")
            if top.get_linestyle() in ("-", "solid"):
                top.set_linestyle("--")
            width = max(under.get_linewidth(), top.get_linewidth())
            under.set_linewidth(1.6 * width)  # the lower line shows on both sides of the upper
            top.set_linewidth(0.7 * width)
            done.add(id(top))
            notes.append(note)
    return notes


def legend_entries(axes: Any) -> tuple[list[Any], list[str]]:
    """Handles and labels of several axes for one legend: each entry once, with the notes of
    :func:`note_identical` of any panel, wrapped at :data:`NOTE_WIDTH` characters. A note of
    several panels gives each panel's difference in its own units, named by the panel's title;
    one found in only some of the panels that draw the entry names them."""
    handles: dict[str, Any] = {}
    seen: dict[str, int] = {}
    notes: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for i, ax in enumerate(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            key, *lines = label.split("\n")
            handles.setdefault(key, handle)
            seen[key] = seen.get(key, 0) + 1
            for line in lines:
                what, _, diff = line.rpartition(": max difference ")
                other = what.split(" ", 2)[2] if what.startswith(_RELATIONS) else what
                notes.setdefault(key, {}).setdefault(other, []).append(
                    (ax.get_title() or f"panel {i + 1}", float(diff)))
    labels = []
    for key in handles:
        lines = [key]
        for other, panels in notes.get(key, {}).items():
            same = all(d == 0 for _, d in panels)
            if len(panels) == 1 or same:
                where = "" if len(panels) == seen[key] else \
                    f" ({', '.join(t for t, _ in panels)})" if len(panels) <= 2 else \
                    f" ({len(panels)} panels)"
                diff = f"{max(d for _, d in panels):.2g}"
            else:
                where, diff = "", ", ".join(f"{d:.2g} ({t})" for t, d in panels)
            note = f"{_RELATIONS[not same]}{other}{where}: max difference {diff}"
            lines += textwrap.wrap(note, NOTE_WIDTH, break_long_words=False) or [note]
        labels.append("\n".join(lines))
    return list(handles.values()), labels


def place_legend(ax: Any, *args: Any, outside: str | None = None, **kwargs: Any) -> Any:
    """The legend of ``ax``, placed by matplotlib: ``loc="best"``; ``outside="right"``, right
    of the axes; ``outside="below"``, under the figure (constrained layout makes room)."""
    if outside == "below":
        return ax.figure.legend(*(args or ax.get_legend_handles_labels()),
                                loc="outside lower center", **kwargs)
    if outside not in (None, "right"):
        raise ValueError(f"place_legend: outside must be None, 'right' or 'below', got "
                         f"{outside!r}")
    where = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0} \
        if outside else {"loc": "best"}
    return ax.legend(*args, **where, **kwargs)


def nudge_labels(*axes: Any, offset: float = 4.0) -> None:
    """Move each annotation of ``axes`` (``textcoords="offset points"``) to the first corner
    around its point (upper right, upper left, lower right, lower left) that no line of its
    axes passes through (the figure laid out once)."""
    from matplotlib.path import Path

    if not axes:
        return
    fig = axes[0].figure
    if fig.get_layout_engine() is not None:  # the axes where they will be drawn, not drawn
        fig.get_layout_engine().execute(fig)
    else:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for text in (t for ax in axes for t in ax.texts if hasattr(t, "xyann")):
        for sx, sy, ha, va in ((1, 1, "left", "bottom"), (-1, 1, "right", "bottom"),
                               (1, -1, "left", "top"), (-1, -1, "right", "top")):
            text.xyann = (sx * offset, sy * offset)
            text.set(ha=ha, va=va)
            box = text.get_window_extent(renderer).expanded(0.95, 0.9)
            xys = [ln.get_transform().transform(np.asarray(ln.get_xydata(), float))
                   for ln in text.axes.get_lines() if ln.get_visible()
                   and ln.get_linestyle() not in ("None", "none", "", " ")]
            if not any(len(xy := p[np.isfinite(p).all(axis=1)]) > 1 and
                       Path(xy).intersects_bbox(box, filled=False) for p in xys):
                break
