"""The figure checker of the tests: what a box covers on a drawn matplotlib figure (the data a
legend hides, the lines a text sits on), texts that overlap or leave the canvas, the variant a
label names and whether two colours share a hue.

Geometry in display pixels, on the figure as last drawn; :mod:`tests.lab.report.layout` turns it
into the defects a reader would see.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from matplotlib.collections import Collection, LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

__all__ = ["cielab", "legend_overlaps", "role_of", "same_hue", "shown_texts", "text_on_lines",
           "text_problems"]


def artist_name(artist: Any) -> str:
    label = str(artist.get_label() or "")
    return label.split("\n")[0] if label and not label.startswith("_") else \
        type(artist).__name__


def _runs(xy: np.ndarray) -> list[np.ndarray]:
    """Stretches of finite points (a line is not drawn across NaN)."""
    ok = np.isfinite(xy).all(axis=1)
    runs, start = [], None
    for i, good in enumerate([*ok, False]):
        if good and start is None:
            start = i
        elif not good and start is not None:
            runs.append(xy[start:i])
            start = None
    return runs


def has_line(line: Line2D) -> bool:
    return line.get_linestyle() not in ("None", "none", "", " ") and line.get_linewidth() > 0


def has_marker(line: Line2D) -> bool:
    return line.get_marker() not in (None, "None", "none", "", " ") and \
        line.get_markersize() > 0


def _line_hits(line: Line2D, box: Bbox, dpi: float) -> bool:
    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
    if has_line(line):
        for run in _runs(xy):
            if len(run) == 1 and box.contains(*run[0]):
                return True
            if len(run) > 1 and Path(run).intersects_bbox(box, filled=False):
                return True
    if has_marker(line):
        r = line.get_markersize() * dpi / 72 / 2
        pts = xy[np.isfinite(xy).all(axis=1)]
        every = line.get_markevery()
        if isinstance(every, int):
            pts = pts[::every]
        elif isinstance(every, tuple) and len(every) == 2 and all(isinstance(e, int)
                                                                   for e in every):
            pts = pts[every[0]::every[1]]
        inside = ((pts[:, 0] + r > box.x0) & (pts[:, 0] - r < box.x1)
                  & (pts[:, 1] + r > box.y0) & (pts[:, 1] - r < box.y1))
        if inside.any():
            return True
    return False


def _overlap_area(a: Bbox, b: Bbox) -> float:
    dx = min(a.x1, b.x1) - max(a.x0, b.x0)
    dy = min(a.y1, b.y1) - max(a.y0, b.y0)
    return dx * dy if dx > 0 and dy > 0 else 0.0


def _collection_hits(coll: Collection, box: Bbox, dpi: float) -> bool:
    if isinstance(coll, PathCollection) and len(coll.get_offsets()):
        pts = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float))
        sizes = coll.get_sizes()
        r = np.sqrt(sizes.max() if len(sizes) else 36.0) * dpi / 72 / 2
        pts = pts[np.isfinite(pts).all(axis=1)]
        return bool(((pts[:, 0] + r > box.x0) & (pts[:, 0] - r < box.x1)
                     & (pts[:, 1] + r > box.y0) & (pts[:, 1] - r < box.y1)).any())
    filled = not isinstance(coll, LineCollection)
    transform = coll.get_transform()
    for path in coll.get_paths():
        if len(path.vertices) and transform.transform_path(path).intersects_bbox(
                box, filled=filled):
            return True
    return False


def _data_hits(ax: Any, box: Bbox, renderer: Any) -> list[str]:
    """Names of the data artists of ``ax`` drawn inside ``box`` (display pixels)."""
    dpi = ax.figure.dpi
    hits = []
    for line in ax.get_lines():
        if line.get_visible() and len(line.get_xdata()) and _line_hits(line, box, dpi):
            hits.append(artist_name(line))
    for patch in ax.patches:
        if patch.get_visible() and _overlap_area(patch.get_window_extent(renderer), box) > 0.5:
            hits.append(artist_name(patch))
    for coll in ax.collections:
        if coll.get_visible() and _collection_hits(coll, box, dpi):
            hits.append(artist_name(coll))
    for image in ax.images:
        if image.get_visible() and _overlap_area(image.get_window_extent(renderer), box) > 0.5:
            hits.append("image")
    return hits


def _shrunk(box: Bbox, px: float = 1.0) -> Bbox:
    return Bbox.from_extents(box.x0 + px, box.y0 + px, box.x1 - px, box.y1 - px)


def legend_overlaps(legend: Legend, fig: Figure, renderer: Any = None) -> list[str]:
    """The data artists (by label) that ``legend``'s box covers, in any axes of ``fig``, on the
    figure as last drawn (draw it first)."""
    renderer = renderer or fig.canvas.get_renderer()
    box = _shrunk(legend.get_window_extent(renderer))
    hits = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        clip = Bbox.intersection(box, ax.bbox)
        if clip is None or clip.width <= 0 or clip.height <= 0:
            continue
        hits += _data_hits(ax, clip, renderer)
    return hits


def _segments_hit(line: Line2D, box: Bbox) -> bool:
    """Whether the segments of ``line`` (not its markers) pass through ``box``."""
    if not has_line(line):
        return False
    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
    return any(len(run) > 1 and Path(run).intersects_bbox(box, filled=False)
               for run in _runs(xy))


def text_on_lines(text: Text, renderer: Any) -> list[str]:
    """The lines (by label) of ``text``'s axes that pass through its box, on the figure as
    last drawn."""
    ax = text.axes
    box = _shrunk(text.get_window_extent(renderer))
    return [artist_name(line) for line in ax.get_lines() if line.get_visible()
            and _segments_hit(line, box)] + \
        [artist_name(coll) for coll in ax.collections if isinstance(coll, LineCollection)
         and coll.get_visible() and _collection_hits(coll, box, ax.figure.dpi)]


_UNBLOCKED = re.compile(r"\bunblocked\b|\bwithout (the )?blocks?\b|\bno blocks?\b|"
                        r"\bnot blocked\b")
_BLOCKED = re.compile(r"\bblocked\b|\bwith the block\b|\ball blocks\b")


def role_of(label: str) -> str | None:
    """The variant a label names: ``"unblocked"``, ``"blocked"``, ``"difference"`` (both, as
    in ``"|blocked − unblocked|"``) or ``None`` (a method, a peer, anything else).

    >>> role_of("PGD-AT (blocked)"), role_of("DiCE without the block"), role_of("sampled")
    ('blocked', 'unblocked', None)
    """
    text = label.lower().replace("_", " ")
    unblocked = bool(_UNBLOCKED.search(text))
    blocked = bool(_BLOCKED.search(_UNBLOCKED.sub(" ", text)))
    if unblocked and blocked:
        return "difference"
    return UNBLOCKED if unblocked else BLOCKED if blocked else None


def cielab(color: Any) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a matplotlib colour: sRGB → linear → XYZ → Lab."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
              for c in to_rgb(color)]
    matrix = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    x, y, z = (sum(m * c for m, c in zip(row, linear)) for row in matrix)

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x / 0.95047), f(y), f(z / 1.08883)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def same_hue(a: Any, b: Any, *, degrees: float = 35.0, chroma: float = 20.0) -> bool:
    """Whether two colours read as the same colour name: both saturated (CIE chroma above
    ``chroma``) with hues less than ``degrees`` apart. Orange and vermillion do; blue and sky
    blue do; any colour and a grey do not.

    >>> same_hue("#D55E00", "#E69F00"), same_hue("#0072B2", "#009E73")
    (True, False)
    """
    _, a1, b1 = cielab(a)
    _, a2, b2 = cielab(b)
    if math.hypot(a1, b1) < chroma or math.hypot(a2, b2) < chroma:
        return False
    gap = abs(math.degrees(math.atan2(b1, a1)) - math.degrees(math.atan2(b2, a2))) % 360
    return min(gap, 360 - gap) < degrees


def _undrawn_tick_labels(fig: Figure) -> set[int]:
    """Tick labels that exist but are not drawn (their tick lies outside the view interval,
    compared on the axis's scale: a log axis in decades)."""
    out: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            scale = axis.get_transform().transform
            lo, hi = sorted(float(v) for v in scale(np.asarray(axis.get_view_interval())))
            span = (hi - lo) or 1.0
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                loc = tick.get_loc()
                at = float(scale(np.asarray([loc]))[0]) if loc is not None else math.nan
                if not (lo - 1e-9 * span <= at <= hi + 1e-9 * span):
                    out.update((id(tick.label1), id(tick.label2)))
    return out


def shown_texts(fig: Figure) -> list[Text]:
    """The texts of ``fig`` a reader sees: visible, not empty, in a visible axes (or none), and
    not a tick label outside its axis's view."""
    hidden = _undrawn_tick_labels(fig)
    out = []
    for text in fig.findobj(Text):
        if id(text) in hidden or not text.get_visible() or not text.get_text().strip():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        out.append(text)
    return out


def text_problems(fig: Figure) -> list[str]:
    """Texts of ``fig`` that overlap another text or leave the canvas (after drawing it).

    Every visible, non-empty :class:`~matplotlib.text.Text` (titles, labels, tick labels,
    legend entries, annotations) is measured by the renderer; two boxes that intersect by more
    than a pixel, or a box outside the figure, is a problem.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    boxes = []
    for text in shown_texts(fig):
        box = text.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            continue
        boxes.append((text.get_text().strip().replace("\n", " "), box))
    problems = []
    for label, box in boxes:
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            problems.append(f"{label!r} leaves the canvas")
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if dx > 1 and dy > 1:
                problems.append(f"{a!r} overlaps {b!r}")
    return problems
