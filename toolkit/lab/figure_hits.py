"""What a box covers on a drawn matplotlib figure: the data a legend hides, the lines a text sits on.

Shared by :mod:`toolkit.lab.style` (which places legends and labels where they cover nothing) and
:mod:`toolkit.lab.report.layout` (which reports those that do). Geometry only, in display pixels, on
the figure as last drawn; it knows nothing of the visual grammar.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.collections import Collection, LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = ["legend_overlaps", "text_on_lines"]


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
