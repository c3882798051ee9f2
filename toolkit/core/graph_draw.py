"""Draw a backward graph with its named cuts marked (matplotlib).

The layout comes from a graph-layout library: graphviz's ``dot`` (through the ``graphviz``
Python package) when the ``dot`` binary is on ``PATH``, otherwise networkx's
``multipartite_layout`` over the graph's topological generations. Node boxes are measured with
matplotlib's renderer first and handed to the layout at their real size, so that labels never
overlap. Long chains of elementwise operations are drawn as one node (``×12 elementwise ops``)
and the figure says so. matplotlib, graphviz and networkx are imported when a figure is drawn.
"""

from __future__ import annotations

import itertools
import json
import logging
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from toolkit.core.backward_graph import GradientGraph, gradient_graph

__all__ = ["draw_gradient_graph"]

log = logging.getLogger(__name__)

#: Operations that act element by element; chains of them are collapsed into one node.
ELEMENTWISE = frozenset("""
Abs Acos Add Addcdiv Addcmul Alias Asin Atan Clamp ClampMax ClampMin Clone Cos Cosh Div Elu Erf
Erfc Exp Exp2 Expm1 Floor Gelu Hardsigmoid Hardswish Hardtanh LeakyRelu Lerp Log Log10 Log1p Log2
LogSigmoid MaskedFill Maximum Minimum Mish Mul NativeDropout Neg Pow Reciprocal Relu Rsqrt Rsub
Sigmoid Sign Silu Sin Sinh Softplus Sqrt Square Sub Tan Tanh Threshold ToCopy Where
""".split())

# colours: parameter groups avoid C0/C1 (blocked/unblocked everywhere else) and C3 (the cut)
GROUP_COLORS = ["C2", "C4", "C9", "C6", "C8", "C5", "C7"]
SEVERAL, NO_GROUP, CUT_COLOR, BEHIND_COLOR, EDGE_COLOR = "#a0a0a0", "white", "C3", "#9a9a9a", "#444"


@dataclass
class _View:
    """What is drawn: nodes (after collapsing chains) with their box sizes, and edges."""

    nodes: list[dict[str, Any]]
    edges: list[tuple[int, int, str]]
    n_chains: int
    n_collapsed: int


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


def _collapse(graph: GradientGraph, min_chain: int) -> _View:
    """Replace maximal chains (one parent, one child, same style) of elementwise ops by one node."""
    n = len(graph.nodes)
    parents: list[list[int]] = [[] for _ in range(n)]
    kids: list[list[int]] = [[] for _ in range(n)]
    for src, dst, _ in graph.edges:
        kids[src].append(dst)
        parents[dst].append(src)

    def key(i: int) -> Any:
        node = graph.nodes[i]
        return (node["behind"], tuple(node["groups"]))

    def links(a: int, b: int) -> bool:  # b continues a's chain
        return (kids[a] == [b] and parents[b] == [a] and key(a) == key(b)
                and graph.nodes[b]["kind"] == "op" and graph.nodes[b]["label"] in ELEMENTWISE)

    member = [graph.nodes[i]["kind"] == "op" and graph.nodes[i]["label"] in ELEMENTWISE
              for i in range(n)]
    chains: list[list[int]] = []
    for i in range(n):
        if not member[i] or (len(parents[i]) == 1 and links(parents[i][0], i)
                             and member[parents[i][0]]):
            continue  # not a chain start
        chain = [i]
        while len(kids[chain[-1]]) == 1 and links(chain[-1], kids[chain[-1]][0]):
            chain.append(kids[chain[-1]][0])
        if min_chain and len(chain) >= min_chain:
            chains.append(chain)
    new_id: dict[int, int] = {}
    nodes: list[dict[str, Any]] = []
    head_of = {c[0]: c for c in chains}
    inside = {i for c in chains for i in c}
    for i, node in enumerate(graph.nodes):
        if i in head_of:
            chain = head_of[i]
            for j in chain:
                new_id[j] = len(nodes)
            nodes.append({**node, "kind": "collapsed", "count": len(chain),
                          "label": f"×{len(chain)} elementwise ops",
                          "ops": [graph.nodes[j]["label"] for j in chain]})
        elif i not in inside:
            new_id[i] = len(nodes)
            nodes.append(dict(node))
    edges = list(dict.fromkeys((new_id[s], new_id[d], kind) for s, d, kind in graph.edges
                               if new_id[s] != new_id[d]))
    return _View(nodes, edges, len(chains), sum(len(c) for c in chains))


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


Point = tuple[float, float]


def _layout_dot(view: _View, boxes: list[Point], gap: float, ranksep: float
                ) -> tuple[list[Point], list[tuple[list[Point], Point | None] | None]]:
    """Node centres and, per edge, the Bézier points of its spline and its arrow tip."""
    import graphviz

    g = graphviz.Digraph(graph_attr={"rankdir": "TB", "nodesep": f"{gap / 72:.3f}",
                                     "ranksep": f"{ranksep / 72:.3f}"},
                         node_attr={"shape": "box", "fixedsize": "true", "label": ""})
    for i, (w, h) in enumerate(boxes):
        g.node(str(i), width=f"{w / 72:.4f}", height=f"{h / 72:.4f}")
    for src, dst, _ in view.edges:
        g.edge(str(src), str(dst))
    out = json.loads(g.pipe(format="json0", engine="dot"))
    pos: dict[int, tuple[float, float]] = {}
    for obj in out.get("objects", []):
        x, y = (float(v) for v in obj["pos"].split(","))
        pos[int(obj["name"])] = (x, y)
    name = {o["_gvid"]: int(o["name"]) for o in out.get("objects", [])}
    splines: dict[tuple[int, int], tuple[list[Point], Point | None]] = {}
    for edge in out.get("edges", []):
        points: list[Point] = []
        end: Point | None = None
        for token in edge["pos"].split():
            if token.startswith(("e,", "s,")):
                x, y = (float(v) for v in token[2:].split(","))
                if token[0] == "e":
                    end = (x, y)
                continue
            x, y = (float(v) for v in token.split(","))
            points.append((x, y))
        splines[(name[edge["tail"]], name[edge["head"]])] = (points, end)
    return ([pos[i] for i in range(len(boxes))],
            [splines.get((s, d)) for s, d, _ in view.edges])


def _layout_networkx(view: _View, boxes: list[Point], gap: float, ranksep: float
                     ) -> list[Point]:
    """Node centres: networkx's multipartite layout over topological generations, scaled."""
    import networkx as nx

    g = nx.DiGraph([(s, d) for s, d, _ in view.edges])
    g.add_nodes_from(range(len(view.nodes)))
    layer_of = {node: k for k, members in enumerate(nx.topological_generations(g))
                for node in members}
    # each row lists its nodes in depth-first order from the loss, so that the nodes of one
    # subtree sit next to each other (multipartite_layout keeps the order it is given)
    order = [*nx.dfs_preorder_nodes(g, 0), *range(len(view.nodes))]
    layers: dict[int, list[int]] = {}
    for node in dict.fromkeys(order):
        layers.setdefault(layer_of[node], []).append(node)
    raw = nx.multipartite_layout(g, subset_key=layers, align="horizontal")
    # scale the library's evenly spaced rows so that neighbouring boxes do not overlap
    scale = 1.0
    for members in layers.values():
        members = sorted(members, key=lambda i: raw[i][0])
        for a, b in itertools.pairwise(members):
            need = (boxes[a][0] + boxes[b][0]) / 2 + gap
            have = float(raw[b][0] - raw[a][0])
            scale = max(scale, need / have if have > 0 else need)
    row = max(h for _, h in boxes) + ranksep
    return [(float(raw[i][0]) * scale, -layer_of[i] * row) for i in range(len(boxes))]


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
                        collapse: int = 3, layout: str = "auto", title: str | None = None,
                        fontsize: float = 8.0) -> Any:
    """A matplotlib ``Figure`` of the backward graph, each named block's cut marked.

    Arrows point the way gradient flows, from the loss (top) to the parameters. A cut made
    inside :func:`~toolkit.core.trace_cuts` is a red dashed node named after its block; the edge
    it removes and everything only reachable behind it are dashed and grey (they receive no
    gradient). Nodes are coloured by the parameter group of ``groups`` they lead to (grey:
    several groups). The footnote names the layout engine and how many chains of elementwise
    operations were collapsed.

    Args:
        loss: a loss tensor (drawn as it is: cuts show if it was built inside ``trace_cuts()``),
            a callable returning one (run inside ``trace_cuts()``), or a
            :class:`~toolkit.core.GradientGraph` / its ``to_dict()`` (e.g. read back from JSON).
        groups: name -> parameters (module, list or dict of tensors), for colours and names.
        collapse: chains of at least this many elementwise ops become one node (0: never).
        layout: ``"auto"`` (graphviz ``dot`` when found, else networkx), ``"dot"`` or
            ``"networkx"``.
        title: the figure's title (default: the cuts shown); ``""`` for none.
        fontsize: label size in points; the figure grows to fit the labels.

    Returns:
        ``matplotlib.figure.Figure`` (not shown; save it with ``fig.savefig``).
    """
    from matplotlib.figure import Figure

    where = "draw_gradient_graph"
    if layout not in ("auto", "dot", "networkx"):
        raise ValueError(f"{where}: layout must be one of 'auto', 'dot', 'networkx', "
                         f"got {layout!r}")
    if isinstance(collapse, bool) or not isinstance(collapse, int) or collapse < 0:
        raise ValueError(f"{where}: collapse must be an int >= 0, got {collapse!r}")
    if isinstance(fontsize, bool) or not isinstance(fontsize, (int, float)) or fontsize <= 0:
        raise ValueError(f"{where}: fontsize must be a number > 0, got {fontsize!r}")
    graph = _as_graph(loss, groups)
    view = _collapse(graph, collapse)
    colors = {g: GROUP_COLORS[i % len(GROUP_COLORS)] for i, g in enumerate(graph.groups)}
    fs = float(fontsize)
    pad_x, pad_y, gap, ranksep = 0.6 * fs, 0.45 * fs, 1.2 * fs, 2.2 * fs
    boxes = [(w + 2 * pad_x, h + 2 * pad_y) for w, h in
             _measure([_display_label(n) for n in view.nodes], fs)]
    positions, splines, engine_note = _layout(view, boxes, layout, gap, ranksep)
    cuts = ", ".join(repr(b) for b in graph.blocks) or "none"
    title = f"backward graph (cuts: {cuts})" if title is None else title
    notes = [engine_note,
             "arrows: the way gradient flows, from the loss to the parameters"]
    if view.n_chains:
        notes.append(f"{view.n_chains} chain{'s' if view.n_chains > 1 else ''} of elementwise ops "
                     f"collapsed ({view.n_collapsed} ops in all)")
    handles, labels = _legend_entries(view, colors)
    return _render(Figure, view, boxes, positions, splines, colors, title, notes,
                   (handles, labels), fs)


def _layout(view: _View, boxes: list[Point], layout: str, gap: float, ranksep: float
            ) -> tuple[list[Point], list[Any], str]:
    """Positions, dot's edge splines (``None`` each for networkx) and the footnote naming the
    engine; ``"auto"`` falls back to networkx, with a logged warning, when dot is missing or
    fails."""
    splines: list[Any] = [None] * len(view.edges)
    found = _dot_binary() is not None
    if found:
        try:
            import graphviz  # noqa: F401
        except ImportError:
            found = False
    if layout == "dot" and not found:
        raise RuntimeError("draw_gradient_graph: layout='dot' needs the graphviz Python package "
                           "and the 'dot' binary on PATH (Debian: apt install graphviz); use "
                           "layout='networkx' or 'auto'")
    why = "not found on PATH"
    if found and layout != "networkx":
        try:
            positions, splines = _layout_dot(view, boxes, gap, ranksep) if view.nodes else ([], [])
            return positions, splines, "layout: graphviz dot"
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            if layout == "dot":
                raise
            why = f"failed: {exc}".splitlines()[0][:80]
    note = "layout: networkx multipartite_layout"
    if layout == "auto":
        log.warning("draw_gradient_graph: graphviz 'dot' %s; falling back to networkx's "
                    "layered layout", why)
        note += f" (graphviz 'dot' {why})"
    positions = _layout_networkx(view, boxes, gap, ranksep) if view.nodes else []
    return positions, splines, note


def _legend_entries(view: _View, colors: dict[str, str]) -> tuple[list[Any], list[str]]:
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


def _render(Figure: Callable[..., Any], view: _View, boxes: list[Point], positions: list[Point],
            splines: list[Any], colors: dict[str, str], title: str, notes: list[str],
            legend: tuple[list[Any], list[str]], fs: float) -> Any:
    """Lay the figure out in points: graph (1 data unit = 1 pt), legend right, notes below."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    margin = 10.0  # points around the graph
    if positions:
        x0 = min(x - w / 2 for (x, _), (w, _) in zip(positions, boxes)) - margin
        x1 = max(x + w / 2 for (x, _), (w, _) in zip(positions, boxes)) + margin
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
    for (src, dst, kind), spline in zip(view.edges, splines):
        color = {"flow": EDGE_COLOR, "cut": CUT_COLOR, "behind": BEHIND_COLOR}[kind]
        ls = "-" if kind == "flow" else "--"
        style = {"arrowstyle": "-|>", "mutation_scale": 0.9 * fs, "color": color, "lw": 0.8,
                 "ls": ls, "zorder": 1}
        if spline is not None and len(spline[0]) >= 4 and (len(spline[0]) - 1) % 3 == 0:
            points, tip = spline
            verts = [*points, *([tip] if tip is not None else [])]
            codes = [Path.MOVETO, *[Path.CURVE4] * (len(points) - 1),
                     *([Path.LINETO] if tip is not None else [])]
            ax.add_artist(FancyArrowPatch(path=Path(verts, codes), **style))
        else:
            (xs, ys), (xd, yd) = positions[src], positions[dst]
            ax.add_artist(FancyArrowPatch((xs, ys - boxes[src][1] / 2), (xd, yd + boxes[dst][1] / 2),
                                         shrinkA=0, shrinkB=0, **style))
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


def _display_label(node: dict[str, Any]) -> str:
    return f"{node['label']} (loss)" if node["id"] == 0 else node["label"]


def _with_alpha(color: Any, alpha: float) -> tuple[float, float, float, float]:
    from matplotlib.colors import to_rgba

    r, g, b, _ = to_rgba(color)
    return (r, g, b, alpha)
