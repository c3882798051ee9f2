"""Checks of a drawn figure against the visual grammar of :mod:`toolkit.lab.style`.

:func:`layout_problems` returns one line per defect a reader would see (an empty list for a
good figure), next to :func:`tests.lab.report.figure_hits.text_problems` (texts that overlap or
leave the canvas):

- a legend whose box covers plotted data (lines, markers, bars, bands, images);
- lines of different series that lie on each other everywhere with nothing to tell them
  apart (no note "identical …" in the figure, no different markers); lines drawn alike are
  one series' seeds;
- text smaller than 9 pt where the report shows the figure;
- an annotation drawn across a data line;
- the blocked or the unblocked colour (or a colour of the same hue) on something that is not
  that variant, a variant in another colour, or one colour naming two things in the figure.

:func:`colour_problems` checks colours across the figures of a whole report: a colour of the
other categories means one thing within an experiment's figures, and the blocked and unblocked
colours mean their variant everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from matplotlib.collections import Collection
from matplotlib.colors import to_hex, to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tests.lab.report.figure_hits import (
    artist_name,
    cielab,
    has_line,
    has_marker,
    legend_overlaps,
    role_of,
    same_hue,
    shown_texts,
    text_on_lines,
)
from toolkit.lab.report.figures import close_negatives
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import (
    COLORS,
    DISPLAY_WIDTH_PX,
    MIN_FONT_PT,
    REPORT_DPI,
)

__all__ = ["colour_meanings", "colour_problems", "layout_problems", "legend_overlaps",
           "text_on_lines"]

_RESERVED = (BLOCKED, UNBLOCKED)


def _legends(fig: Figure) -> list[Legend]:
    out = [ax.get_legend() for ax in fig.axes if ax.get_visible()]
    return [leg for leg in [*out, *fig.legends] if leg is not None and leg.get_visible()]


def _small_text(fig: Figure) -> list[str]:
    scale = min(1.0, DISPLAY_WIDTH_PX / (fig.get_figwidth() * REPORT_DPI))
    small: dict[float, list[str]] = {}
    for text in shown_texts(fig):
        size = text.get_fontsize() * scale
        if size < MIN_FONT_PT - 1e-6:
            small.setdefault(round(size, 1), []).append(text.get_text().strip().split("\n")[0])
    out = []
    for size, names in sorted(small.items()):
        shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        out.append(f"{len(names)} text{'s' * (len(names) != 1)} at {size:g} pt on the page "
                   f"(under {MIN_FONT_PT:g} pt; figure {fig.get_figwidth():.3g} in wide): "
                   f"{shown}")
    return out


def _coincide(a: Line2D, b: Line2D) -> float | None:
    """Largest pixel distance between two lines' points when they have the same number of
    points and lie within a pixel of each other everywhere; else ``None``."""
    pa = a.get_transform().transform(np.asarray(a.get_xydata(), dtype=float))
    pb = b.get_transform().transform(np.asarray(b.get_xydata(), dtype=float))
    if pa.shape != pb.shape or len(pa) < 2:
        return None
    fa, fb = np.isfinite(pa).all(axis=1), np.isfinite(pb).all(axis=1)
    if (fa != fb).any() or fa.sum() < 2:
        return None
    gap = float(np.abs(pa[fa] - pb[fb]).max())
    return gap if gap <= 1.0 else None


def _distinct_markers(a: Line2D, b: Line2D) -> bool:
    """Whether markers keep two coinciding lines apart: markers on one line only (they sit on
    the other), or of different shapes, or at different points."""
    if has_marker(a) != has_marker(b):
        return True
    return has_marker(a) and (a.get_marker() != b.get_marker()
                               or a.get_markevery() != b.get_markevery())


def _same_style(a: Line2D, b: Line2D) -> bool:
    """Whether two lines are drawn alike (colour, line, marker): the seeds of one series."""
    return (to_hex(a.get_color()) == to_hex(b.get_color())
            and a.get_linestyle() == b.get_linestyle() and a.get_marker() == b.get_marker())


def _hidden_lines(fig: Figure, notes: str) -> list[str]:
    if "identical" in notes or "indistinguishable" in notes:
        return []
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        lines = [ln for ln in ax.get_lines() if ln.get_visible()
                 and (has_line(ln) or has_marker(ln)) and to_rgba(ln.get_color())[3] > 0]
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                if _same_style(a, b):  # one series drawn per seed: seeds that agree
                    continue
                gap = _coincide(a, b)
                if gap is not None and not _distinct_markers(a, b):
                    out.append(f"{artist_name(a)!r} and {artist_name(b)!r} lie on each other "
                               f"(at most {gap:.2g} px apart) and nothing tells them apart: "
                               f"add the note 'identical to …' or 'indistinguishable from "
                               f"…: max difference x' (note_identical) or distinct markers")
    return out


def _pixel_gap(a: Line2D, b: Line2D) -> float:
    """Largest pixel distance between two lines' finite points (``inf``: not comparable)."""
    pa = a.get_transform().transform(np.asarray(a.get_xydata(), dtype=float))
    pb = b.get_transform().transform(np.asarray(b.get_xydata(), dtype=float))
    if pa.shape != pb.shape or len(pa) < 2:
        return np.inf
    both = np.isfinite(pa).all(axis=1) & np.isfinite(pb).all(axis=1)
    return float(np.abs(pa[both] - pb[both]).max()) if both.any() else np.inf


_IDENTICAL = re.compile(r"(?:identical to|indistinguishable from) (.+?): max difference "
                        r"([-+0-9.eE]+|inf|nan)")


def _identical_claims(fig: Figure) -> list[str]:
    """Legend notes "identical to X: max difference d" that the drawn axes contradict: the
    lines they name must lie on each other as drawn (within 2 px), and ``d`` must be at most
    1 % of the axis's span, and be the lines' largest difference (to its two digits)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        lines = [ln for ln in ax.get_lines() if ln.get_visible()]
        low, high = ax.get_ylim()
        for line in lines:
            match = _IDENTICAL.search(line.get_label())
            if match is None:
                continue
            quoted = float(match.group(2))
            label = line.get_label().split("\n")[0]
            if ax.get_yscale() == "linear" and not quoted <= 0.01 * abs(high - low):
                out.append(f"{label!r} is called identical with a difference of {quoted:.2g}, "
                           f"{quoted / abs(high - low):.0%} of its axis")
            partners = [ln for ln in lines if ln is not line and _pixel_gap(ln, line) <= 2.0]
            if not partners:
                out.append(f"{label!r} is called identical, but no line lies on it as drawn")
                continue
            diffs = [float(np.nanmax(np.abs(np.asarray(ln.get_ydata(), float)
                                            - np.asarray(line.get_ydata(), float))))
                     for ln in partners]
            if not any(f"{d:.2g}" == match.group(2) for d in diffs):
                out.append(f"{label!r} quotes a max difference {match.group(2)} where the "
                           f"lines differ by {', '.join(f'{d:.2g}' for d in diffs)}")
    return out


def _text_over_lines(fig: Figure, renderer: Any) -> list[str]:
    return [f"the text {text.get_text().strip()!r} lies on the line {name!r}"
            for ax in fig.axes if ax.get_visible() for text in ax.texts
            if text.get_visible() and text.get_text().strip()
            for name in text_on_lines(text, renderer)]


def _hex(color: Any) -> str | None:
    try:
        rgba = to_rgba(color)
    except ValueError:
        return None
    return None if rgba[3] == 0 else to_hex(rgba, keep_alpha=False)


def _handle_colour(handle: Any) -> str | None:
    if isinstance(handle, Line2D):
        if has_line(handle):
            return _hex(handle.get_color())
        face = handle.get_markerfacecolor()
        return _hex(face) if _hex(face) else _hex(handle.get_markeredgecolor())
    if isinstance(handle, Patch):
        return _hex(handle.get_facecolor()) or _hex(handle.get_edgecolor())
    if isinstance(handle, Collection):
        faces = handle.get_facecolors()
        if len(faces) and faces[0][3] > 0:
            return _hex(faces[0])
        edges = handle.get_edgecolors()
        return _hex(edges[0]) if len(edges) else None
    return None


def _chroma(color: str) -> float:
    _, a, b = cielab(color)
    return float(np.hypot(a, b))


def _tick_labels(axis: Any) -> dict[float, str]:
    """Tick location → label text as last drawn (read without updating the ticks: asking an
    axis that is off for its labels would fill them in)."""
    locs = axis.get_majorticklocs()  # the ticks in use are the first len(locs) tick objects
    return {loc: tick.label1.get_text() for loc, tick in zip(locs, axis.majorTicks)}


def colour_meanings(fig: Figure) -> list[tuple[str, str, str]]:
    """What each colour of ``fig`` names: ``(hex colour, words, where)`` from legend entries,
    unlabelled bars (their tick label) and coloured (not grey) text, as drawn (a figure
    changed since its last drawing is drawn first)."""
    if fig.stale:
        fig.canvas.draw()
    out = []
    for legend in _legends(fig):
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            colour = _handle_colour(handle)
            if colour and text.get_text().strip():
                out.append((colour, text.get_text().split("\n")[0].strip(), "legend"))
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for container in ax.containers:
            if not hasattr(container, "orientation") or not container.get_label().startswith(
                    "_"):
                continue
            axis = ax.xaxis if container.orientation == "vertical" else ax.yaxis
            ticks = _tick_labels(axis)
            for bar in container.patches:
                mid = bar.get_x() + bar.get_width() / 2 if container.orientation == \
                    "vertical" else bar.get_y() + bar.get_height() / 2
                half = (bar.get_width() if container.orientation == "vertical"
                        else bar.get_height()) / 2
                names = [t for loc, t in ticks.items() if abs(loc - mid) <= half and t]
                colour = _hex(bar.get_facecolor())
                if names and colour:
                    out.append((colour, names[0], "bar"))
    for text in shown_texts(fig):
        colour = _hex(text.get_color())
        if colour and _chroma(colour) >= 20:
            out.append((colour, text.get_text().strip().split("\n")[0], "text"))
    return out


def _tokens(words: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", re.sub(r"\(.*?\)", " ", words.lower())))


def _same_meaning(a: str, b: str) -> bool:
    ta, tb = _tokens(a), _tokens(b)
    return ta <= tb or tb <= ta


def _role_problems(meanings: Iterable[tuple[str, str, str]]) -> list[str]:
    out = []
    for colour, words, where in meanings:
        role = role_of(words)
        for reserved in _RESERVED:
            if same_hue(colour, COLORS[reserved]) and role not in (reserved, "difference"):
                out.append(f"{words!r} ({where}) is drawn in {colour}, the {reserved} colour's "
                           f"hue, but is not the {reserved} variant")
        if role in _RESERVED and where != "text" and not same_hue(colour, COLORS[role]):
            out.append(f"{words!r} ({where}) is the {role} variant but is drawn in {colour}, "
                       f"not {COLORS[role]}")
    return out


def _double_meanings(meanings: Iterable[tuple[str, str, str]], where: str) -> list[str]:
    """A colour of the other categories (not blocked, unblocked or a grey) that names two
    different things."""
    seen: dict[str, list[str]] = {}
    out = []
    for colour, words, _ in meanings:
        if _chroma(colour) < 20 or any(same_hue(colour, COLORS[r]) for r in _RESERVED):
            continue
        names = seen.setdefault(colour, [])
        clash = next((n for n in names if not _same_meaning(n, words)), None)
        if clash is not None:
            out.append(f"{colour} means both {clash!r} and {words!r} {where}")
        if words not in names:
            names.append(words)
    return list(dict.fromkeys(out))


def _artist_colours(artist: Any) -> list[str]:
    if isinstance(artist, Line2D):
        return [c for c in (_handle_colour(artist),) if c]
    if isinstance(artist, Patch):
        return [c for c in (_hex(artist.get_facecolor()) if artist.get_fill() else
                            _hex(artist.get_edgecolor()),) if c]
    if isinstance(artist, Collection):
        colours = [_hex(c) for c in (*artist.get_facecolors(), *artist.get_edgecolors())]
        return list(dict.fromkeys(c for c in colours if c))
    return []


def _unnamed_reserved(fig: Figure) -> list[str]:
    """Data in the blocked or unblocked hue in axes where nothing labelled says that variant
    (e.g. mixture components in blue and orange)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        artists = [a for a in (*ax.get_lines(), *ax.patches, *ax.collections) if a.get_visible()]
        named = {role_of(a.get_label()) for a in artists
                 if not str(a.get_label()).startswith("_")}
        named |= {role_of(c.get_label()) for c in ax.containers
                  if not str(c.get_label()).startswith("_")}
        for axis, siblings in ((ax.xaxis, ax.get_shared_x_axes()),
                               (ax.yaxis, ax.get_shared_y_axes())):
            for other in siblings.get_siblings(ax):  # shared axes label the ticks once
                ticks = other.xaxis if axis is ax.xaxis else other.yaxis
                named |= {role_of(t) for t in _tick_labels(ticks).values()}
        title = ax.get_title()
        named.add(role_of(title))
        for reserved in _RESERVED:
            if reserved in named or "difference" in named:
                continue
            bad = [a for a in artists if any(same_hue(c, COLORS[reserved])
                                             for c in _artist_colours(a))]
            if bad:
                out.append(f"{len(bad)} artist{'s' * (len(bad) != 1)} in "
                           f"{ax.get_title() or 'a panel'!r} drawn in the {reserved} colour's "
                           f"hue, where nothing says {reserved}")
    return out


def _bars_from_zero(fig: Figure) -> list[str]:
    """Negative bars (log-likelihoods) hanging from 0 whose differences are a sliver of
    their length: a difference axis shows what they hide."""
    out = []
    for ax in fig.axes:
        values = np.asarray([v for c in ax.containers if hasattr(c, "datavalues")
                             for v in c.datavalues], dtype=float)
        if close_negatives(values.tolist()):
            values = values[np.isfinite(values)]
            out.append(f"bars {ax.get_title()!r} hang from 0 to {values.min():.4g} where "
                       f"they differ by {values.max() - values.min():.2g}: draw the "
                       f"differences")
    return out


def layout_problems(fig: Figure) -> list[str]:
    """Defects of ``fig`` that the visual grammar rules out, one line each (after drawing it):
    legends over data, lines hidden under each other, text under 9 pt on the page, text drawn
    across a line, and colours that say the wrong variant or two things. See the module's
    docstring; `tests.lab.report.figure_hits.text_problems` checks overlapping text."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    for legend in _legends(fig):
        hits = legend_overlaps(legend, fig, renderer)
        if hits:
            first = legend.get_texts()[0].get_text().split("\n")[0] if legend.get_texts() else ""
            shown = ", ".join(repr(h) for h in dict.fromkeys(hits))
            problems.append(f"the legend ({first!r}, ...) covers data: {shown}")
    notes = " ".join(t.get_text() for t in shown_texts(fig)).lower()
    problems += _hidden_lines(fig, notes)
    problems += _identical_claims(fig)
    problems += _small_text(fig)
    problems += _text_over_lines(fig, renderer)
    problems += _bars_from_zero(fig)
    problems += _unnamed_reserved(fig)
    meanings = colour_meanings(fig)
    problems += _role_problems(meanings)
    problems += _double_meanings(meanings, "in one figure")
    return problems


def colour_problems(figures: Mapping[str, Figure],
                    section: Callable[[str], str] = lambda name: name.split("__")[0]
                    ) -> list[str]:
    """Colours that mean two things across the figures of one report: the blocked and
    unblocked colours (and their hues) on anything but their variant, or a colour of the other
    categories naming two things within one section (``section(name)``: the experiment; the
    report names figures ``<experiment>__<figure>``). Figures need not be drawn."""
    by_section: dict[str, list[tuple[str, str, str]]] = {}
    out = []
    for name, fig in figures.items():
        meanings = colour_meanings(fig)
        out += [f"{name}: {p}" for p in _role_problems(meanings)]
        by_section.setdefault(section(name), []).extend(meanings)
    for sec, meanings in by_section.items():
        out += _double_meanings(meanings, f"in the figures of {sec}")
    return list(dict.fromkeys(out))
