"""Draw a backward graph with its named cuts marked (matplotlib).

The layout is layered (:mod:`toolkit.lens.graph_layout`): graphviz's ``dot`` (through the
``graphviz`` Python package) when the ``dot`` binary is on ``PATH``, otherwise grandalf's
Sugiyama layout. Node boxes are measured with matplotlib's renderer first and handed to the
layout at their real size, so that labels never overlap. Long chains of elementwise operations
are drawn as one node (``×12 elementwise ops``), a graph larger than ``max_nodes`` is merged
(behind each cut, then by parameter group), and the figure says so. Which engine drew it is no
part of the image: the figure carries it as the attribute ``LAYOUT_NOTE`` (empty for ``dot``),
and a missing ``dot`` is logged once per process. matplotlib, graphviz and grandalf are
imported when a figure is drawn.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import torch

from toolkit._utils.param_validation import Instance, Integer, Options, Real, check_params
from toolkit.lens.backward_graph import GradientGraph, gradient_graph
from toolkit.lens.graph_layout import EdgePath, Point, View, collapse_view, layout_grandalf
from toolkit.lens.graph_layout import layout_dot as _layout_dot

__all__ = ["LAYOUT_NOTE", "draw_gradient_graph"]

log = logging.getLogger(__name__)

#: The figure attribute naming a fallback layout ("" when graphviz's dot drew it).
LAYOUT_NOTE = "gradient_graph_layout_note"
_WARNED: set[str] = set()  # fallback reasons already logged in this process
_ARGS = {"layout": [Options("auto", "dot", "grandalf")], "collapse": [Integer(0)],
         "max_nodes": [Integer(0)], "title": [None, Instance(str, name="a str")],
         "fontsize": [Real(0, closed="neither")]}

# colours: parameter groups avoid C0/C1 (blocked/unblocked everywhere else) and C3 (the cut)
GROUP_COLORS = ["C2", "C4", "C9", "C6", "C8", "C5", "C7"]
SEVERAL, NO_GROUP, CUT_COLOR, BEHIND_COLOR, EDGE_COLOR = "#a0a0a0", "white", "C3", "#9a9a9a", "#444"


def _dot_binary() -> str | None:
    """The ``dot`` executable on ``PATH`` (tests replace this to force the fallback)."""
    return shutil.which("dot")


def _as_graph(loss: Any, groups: Mapping[str, Any] | None) -> GradientGraph:
    if isinstance(loss, GradientGraph):
        return loss
    if isinstance(loss, Mapping) and "nodes" in loss:
        return GradientGraph.from_dict(loss)
    if isinstance(loss, torch.Tensor) or callable(loss):
        return gradient_graph(loss, groups)
    raise TypeError(f"draw_gradient_graph: loss must be a tensor, a callable returning the loss, "
                    f"a GradientGraph or its to_dict(), got {type(loss).__name__}")


def _measure(texts: list[str], fontsize: float) -> list[tuple[float, float]]:
    """Width and height in points of each single-line text, as matplotlib will draw it."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = RendererAgg(100, 100, 72)  # 72 dpi: one pixel is one point
    prop = FontProperties(size=fontsize)
    sizes = []
    for text in texts:
        w, h, _ = renderer.get_text_width_height_descent(text, prop, ismath=False)
        sizes.append((float(w), float(h)))
    return sizes


def _boxes(view: View, fs: float) -> tuple[list[Point], float, float]:
    """Each node's box (its label measured, padded), the gap between boxes and between ranks."""
    sizes = _measure([_display_label(n) for n in view.nodes], fs)
    return [(w + 1.2 * fs, h + 0.9 * fs) for w, h in sizes], 1.2 * fs, 2.2 * fs


def _style(node: dict[str, Any], colors: dict[str, str]) -> dict[str, Any]:
    """Box fill/outline and text colour of a node."""
    groups = node["groups"]
    fill = colors[groups[0]] if len(groups) == 1 else (SEVERAL if groups else NO_GROUP)
    if node["kind"] == "cut":
        return {"fc": "white", "ec": CUT_COLOR, "ls": "--", "lw": 1.4, "text": CUT_COLOR}
    if node["behind"]:
        return {"fc": _with_alpha(fill, 0.3), "ec": BEHIND_COLOR, "ls": "--", "lw": 0.9,
                "text": "#666"}
    return {"fc": _with_alpha(fill, 0.55 if fill != NO_GROUP else 1.0), "ec": "#333",
            "ls": "-", "lw": 1.6 if node["id"] == 0 else 0.8, "text": "#111"}


def draw_gradient_graph(loss: Any, groups: Mapping[str, Any] | None = None, *,
                        collapse: int = 3, max_nodes: int = 40, layout: str = "auto",
                        title: str | None = None, fontsize: float = 9.0) -> Any:
    """A matplotlib ``Figure`` of the backward graph, each named block's cut marked.

    Arrows point the way gradient flows, from the loss (top) to the parameters. A cut made
    inside :func:`~toolkit.lens.trace_cuts` is a red dashed node named after its block; the edge
    it removes and everything only reachable behind it are dashed and grey (they receive no
    gradient). Nodes are coloured by the parameter group of ``groups`` they lead to (grey:
    several groups). The footnote says what was merged. Without graphviz's ``dot`` the layout
    is grandalf's Sugiyama layout; the image does not say so (it is the same kind of layout):
    the figure's attribute ``LAYOUT_NOTE`` does, and the first fallback in a process is logged.

    Args:
        loss: a loss tensor (drawn as it is: cuts show if it was built inside ``trace_cuts()``),
            a callable returning one (run inside ``trace_cuts()``), or a
            :class:`~toolkit.lens.GradientGraph` / its ``to_dict()`` (e.g. read back from JSON).
        groups: name -> parameters (module, list or dict of tensors), for colours and names.
        collapse: chains of at least this many elementwise ops become one node (0: never).
        max_nodes: a larger graph is merged until it fits: first everything behind each cut,
            then each parameter group's own ops and parameters, then the ops the same groups
            share; the loss and the cuts stay (0: draw every node).
        layout: ``"auto"`` (graphviz ``dot`` when found, else grandalf), ``"dot"`` or
            ``"grandalf"``.
        title: the figure's title (default: the cuts shown); ``""`` for none.
        fontsize: label size in points; the figure grows to fit the labels.

    Returns:
        ``matplotlib.figure.Figure`` (not shown; save it with ``fig.savefig``).
    """
    from matplotlib.figure import Figure

    where = "draw_gradient_graph"
    check_params(where, {"layout": layout, "collapse": collapse, "max_nodes": max_nodes,
                         "title": title, "fontsize": fontsize}, _ARGS)
    graph = _as_graph(loss, groups)
    view = collapse_view(graph, collapse, max_nodes)
    colors = {g: GROUP_COLORS[i % len(GROUP_COLORS)] for i, g in enumerate(graph.groups)}
    fs = float(fontsize)
    boxes, gap, ranksep = _boxes(view, fs)
    positions, paths, engine_note = _layout(view, boxes, layout, gap, ranksep)
    cuts = ", ".join(repr(b) for b in graph.blocks) or "none"
    title = f"backward graph (cuts: {cuts})" if title is None else title
    notes = ["arrows: the way gradient flows, from the loss to the parameters"]
    if view.n_chains:
        notes.append(f"{view.n_chains} chain{'s' if view.n_chains > 1 else ''} of elementwise ops "
                     f"collapsed ({view.n_collapsed} ops in all)")
    if view.merged:
        notes.append(f"{view.merged}; max_nodes=0 draws every node")
    notes = [line for note in notes for line in textwrap.wrap(note, 90)]
    handles, labels = _legend_entries(view, colors)
    fig = _render(Figure, view, boxes, positions, paths, colors, title, notes,
                  (handles, labels), fs)
    setattr(fig, LAYOUT_NOTE, engine_note)
    return fig


def _layout(view: View, boxes: list[Point], layout: str, gap: float, ranksep: float
            ) -> tuple[list[Point], list[EdgePath | None], str]:
    """Positions, each edge's path and the note on a fallback ("" for dot); ``"auto"`` falls
    back to grandalf when dot is missing or fails, logging it once per process."""
    found = _dot_binary() is not None
    if found:
        try:
            import graphviz  # noqa: F401
        except ImportError:
            found = False
    if layout == "dot" and not found:
        raise RuntimeError("draw_gradient_graph: layout='dot' needs the graphviz Python package "
                           "and the 'dot' binary on PATH (Debian: apt install graphviz); use "
                           "layout='grandalf' or 'auto'")
    why = "not found on PATH"
    if not view.nodes:
        return [], [], ""
    if found and layout != "grandalf":
        try:
            positions, paths = _layout_dot(view, boxes, gap, ranksep)
            return positions, paths, ""
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            if layout == "dot":
                raise
            why = f"failed: {exc}".splitlines()[0][:80]
    note = ""
    if layout == "auto":
        note = (f"backward graphs laid out by grandalf's Sugiyama layout: graphviz 'dot' {why} "
                f"(install graphviz for dot's layout)")
        if why not in _WARNED:
            _WARNED.add(why)
            log.warning("draw_gradient_graph: graphviz 'dot' %s; laying graphs out with "
                        "grandalf's Sugiyama layout", why)
    positions, paths = layout_grandalf(view, boxes, gap, ranksep)
    return positions, paths, note


def _legend_entries(view: View, colors: dict[str, str]) -> tuple[list[Any], list[str]]:
    """Legend handles and labels for what the figure shows, and only that."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    used = {tuple(n["groups"]) for n in view.nodes if n["kind"] != "cut"}
    kinds = {n["kind"] for n in view.nodes}
    entries: list[tuple[Any, str]] = [
        (Patch(fc=_with_alpha(c, 0.55), ec="#333"), f"leads to {g}")
        for g, c in colors.items() if (g,) in used]
    if any(len(u) > 1 for u in used):
        entries.append((Patch(fc=_with_alpha(SEVERAL, 0.55), ec="#333"),
                        "leads to several groups"))
    if () in used:
        entries.append((Patch(fc=NO_GROUP, ec="#333"),
                        "leads to no group" if colors else "operation or leaf"))
    if "cut" in kinds:
        entries.append((Patch(fc="white", ec=CUT_COLOR, ls="--", lw=1.4), "cut (a named block)"))
    if any(n["behind"] for n in view.nodes):
        entries.append((Patch(fc="white", ec=BEHIND_COLOR, ls="--"), "behind a cut: no gradient"))
    edge_kinds = {kind for _, _, kind in view.edges}
    entries.append((Line2D([], [], color=EDGE_COLOR, lw=1.0), "gradient flows"))
    if "cut" in edge_kinds:
        entries.append((Line2D([], [], color=CUT_COLOR, ls="--", lw=1.2),
                        "edge removed by the cut"))
    if "behind" in edge_kinds:
        entries.append((Line2D([], [], color=BEHIND_COLOR, ls="--", lw=1.0), "edge behind a cut"))
    return [h for h, _ in entries], [label for _, label in entries]


def _render(Figure: Callable[..., Any], view: View, boxes: list[Point], positions: list[Point],
            paths: list[EdgePath | None], colors: dict[str, str], title: str, notes: list[str],
            legend: tuple[list[Any], list[str]], fs: float) -> Any:
    """Lay the figure out in points: graph (1 data unit = 1 pt), legend right, notes below."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    margin = 10.0  # points around the graph
    if positions:
        bends = [p for path in paths if path is not None for p in path[0]]
        x0 = min([x - w / 2 for (x, _), (w, _) in zip(positions, boxes)]
                 + [x for x, _ in bends]) - margin
        x1 = max([x + w / 2 for (x, _), (w, _) in zip(positions, boxes)]
                 + [x for x, _ in bends]) + margin
        y0 = min(y - h / 2 for (_, y), (_, h) in zip(positions, boxes)) - margin
        y1 = max(y + h / 2 for (_, y), (_, h) in zip(positions, boxes)) + margin
    else:
        x0, x1, y0, y1 = 0.0, 72.0, 0.0, 36.0
    graph_w, graph_h = x1 - x0, y1 - y0
    handles, labels = legend
    text_w = [w for w, _ in _measure([title, *notes], fs + 2)]
    legend_w = max(w for w, _ in _measure(labels, fs)) + 3.5 * fs + 2 * margin
    legend_h = len(labels) * 1.6 * fs + 2 * margin
    title_h = (2.6 * (fs + 2)) if title else margin
    notes_h = len(notes) * 1.5 * (fs + 2) + margin
    width = max(graph_w + legend_w, max(text_w) + 2 * margin) / 72
    height = (max(graph_h, legend_h) + title_h + notes_h) / 72
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # fig.canvas.draw() and savefig work without pyplot
    left = (width * 72 - legend_w - graph_w) / 2 / 72
    ax = fig.add_axes((left / width, notes_h / 72 / height, graph_w / 72 / width,
                       graph_h / 72 / height))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_axis_off()
    for i, node in enumerate(view.nodes):
        (x, y), (w, h) = positions[i], boxes[i]
        style = _style(node, colors)
        ax.add_artist(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                    boxstyle=f"round,pad=0,rounding_size={0.3 * fs}",
                                    fc=style["fc"], ec=style["ec"], ls=style["ls"],
                                    lw=style["lw"], zorder=2))
        ax.text(x, y, _display_label(node), ha="center", va="center", fontsize=fs, color=style["text"],
                zorder=3, parse_math=False)
    for (src, dst, kind), path in zip(view.edges, paths):
        color = {"flow": EDGE_COLOR, "cut": CUT_COLOR, "behind": BEHIND_COLOR}[kind]
        ls = "-" if kind == "flow" else "--"
        style = {"arrowstyle": "-|>", "mutation_scale": 0.9 * fs, "color": color, "lw": 0.8,
                 "ls": ls, "zorder": 1, "shrinkA": 0, "shrinkB": 0}
        if path is not None and path[1]:  # dot's spline: cubic Bézier pieces, maybe a tip
            points = path[0]
            curves = len(points) - 1 - (len(points) - 1) % 3
            codes = [Path.MOVETO, *[Path.CURVE4] * curves,
                     *[Path.LINETO] * (len(points) - 1 - curves)]
        else:  # a polyline from box edge to box edge
            points = list(path[0]) if path is not None else [positions[src], positions[dst]]
            points[0] = _clip(points[0], boxes[src], points[1])
            points[-1] = _clip(points[-1], boxes[dst], points[-2])
            codes = [Path.MOVETO, *[Path.LINETO] * (len(points) - 1)]
        ax.add_artist(FancyArrowPatch(path=Path(points, codes), **style))
    top = 1 - (title_h / 2) / 72 / height
    if title:
        fig.text(0.5, top, title, ha="center", va="center", fontsize=fs + 2, parse_math=False)
    for k, note in enumerate(notes):
        fig.text(margin / 72 / width, (notes_h - margin / 2 - (k + 0.75) * 1.5 * (fs + 2)) / 72
                 / height, note, ha="left", va="center", fontsize=fs, color="#555",
                 parse_math=False)
    fig.legend(handles, labels, loc="upper left", fontsize=fs, frameon=False,
               bbox_to_anchor=((width * 72 - legend_w + margin / 2) / 72 / width,
                               1 - title_h / 72 / height))
    return fig


def _clip(centre: Point, box: Point, toward: Point) -> Point:
    """Where the segment from a box's centre toward a point leaves the box."""
    (x, y), (w, h), (tx, ty) = centre, box, toward
    dx, dy = tx - x, ty - y
    if dx == 0 and dy == 0:
        return centre
    t = min(w / 2 / abs(dx) if dx else float("inf"), h / 2 / abs(dy) if dy else float("inf"))
    return (x + min(t, 1.0) * dx, y + min(t, 1.0) * dy)


def _display_label(node: dict[str, Any]) -> str:
    return f"{node['label']} (loss)" if node["id"] == 0 else node["label"]


def _with_alpha(color: Any, alpha: float) -> tuple[float, float, float, float]:
    from matplotlib.colors import to_rgba

    r, g, b, _ = to_rgba(color)
    return (r, g, b, alpha)
