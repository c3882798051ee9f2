"""What a backward-graph figure shows, and where: collapsing, and the layered layout.

:func:`~toolkit.lens.graph_draw.draw_gradient_graph` draws a :class:`View`: the graph after
collapsing (1) chains of elementwise operations into one node and, for a graph still larger
than ``max_nodes``, (2) everything behind each cut into one node per cut, then (3) the
operations and parameters that lead to one parameter group into one node each, then (4) the
operations shared by the same several groups. The loss and the cuts are never merged, so the
cut stays marked.

The layout is layered (Sugiyama, Tagawa & Toda 1981): ranks from the loss down, node order per
rank chosen to reduce edge crossings, coordinates that keep boxes apart. It is graphviz's
``dot`` when the binary exists (Gansner et al. 1993), else grandalf's ``SugiyamaLayout``
(barycentre ordering, Brandes & Köpf 2001 coordinates), a pure-Python implementation on PyPI.
Both take each node's real box size. :func:`edge_crossings` counts the crossings of what is
drawn (tests bound it).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolkit.lens.backward_graph import GradientGraph
from toolkit.lens.graph_walk import closure

__all__ = ["ELEMENTWISE", "View", "collapse_view", "edge_crossings", "layout_dot", "layout_grandalf"]

#: Operations that act element by element; chains of them are collapsed into one node.
ELEMENTWISE = frozenset("""
Abs Acos Add Addcdiv Addcmul Alias Asin Atan Clamp ClampMax ClampMin Clone Cos Cosh Div Elu Erf
Erfc Exp Exp2 Expm1 Floor Gelu Hardsigmoid Hardswish Hardtanh LeakyRelu Lerp Log Log10 Log1p Log2
LogSigmoid MaskedFill Maximum Minimum Mish Mul NativeDropout Neg Pow Reciprocal Relu Rsqrt Rsub
Sigmoid Sign Silu Sin Sinh Softplus Sqrt Square Sub Tan Tanh Threshold ToCopy Where
""".split())

Point = tuple[float, float]
#: One drawn edge: its points, and whether they are Bézier control points (dot) or a polyline.
EdgePath = tuple[list[Point], bool]


@dataclass
class View:
    """What is drawn: nodes (after collapsing) and edges ``(src, dst, kind)``.

    ``n_chains``/``n_collapsed``: chains of elementwise ops merged and the ops in them;
    ``merged``: what the size limit merged, in words (empty when nothing was).
    """

    nodes: list[dict[str, Any]]
    edges: list[tuple[int, int, str]]
    n_chains: int = 0
    n_collapsed: int = 0
    merged: str = ""


def _adjacency(n: int, edges: Iterable[tuple[int, int, str]]
               ) -> tuple[list[list[int]], list[list[int]]]:
    parents: list[list[int]] = [[] for _ in range(n)]
    kids: list[list[int]] = [[] for _ in range(n)]
    for src, dst, _ in edges:
        kids[src].append(dst)
        parents[dst].append(src)
    return parents, kids


def _chains(graph: GradientGraph, min_chain: int) -> View:
    """Replace maximal chains (one parent, one child, same style) of elementwise ops by one node."""
    n = len(graph.nodes)
    parents, kids = _adjacency(n, graph.edges)

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
    head_of = {c[0]: c for c in chains}
    inside = {i for c in chains for i in c}
    clusters = [head_of[i] if i in head_of else [i]
                for i in range(n) if i in head_of or i not in inside]
    nodes = []
    for members in clusters:
        node = graph.nodes[members[0]]
        if len(members) == 1:
            nodes.append(dict(node))
        else:
            nodes.append({**node, "kind": "collapsed", "count": len(members),
                          "label": f"×{len(members)} elementwise ops",
                          "ops": [graph.nodes[j]["label"] for j in members]})
    view = View(nodes, _merged_edges(clusters, graph.edges, n))
    view.n_chains, view.n_collapsed = len(chains), sum(len(c) for c in chains)
    return view


def _merged_edges(clusters: list[list[int]], edges: Iterable[Any], n: int
                  ) -> list[tuple[int, int, str]]:
    """The edges between clusters (old node ids → cluster index), loops and repeats dropped."""
    new_id = [0] * n
    for k, members in enumerate(clusters):
        for i in members:
            new_id[i] = k
    return list(dict.fromkeys((new_id[s], new_id[d], kind) for s, d, kind in edges
                              if new_id[s] != new_id[d]))


def _ops(node: dict[str, Any]) -> int:
    return int(node.get("count", 1))


def _merge(view: View, key_of: list[Any], label: Any) -> View:
    """Merge the nodes of ``view`` that share a key (``None``: never merged) into one node each,
    labelled ``label(nodes)``; nodes keep their first member's position in the order."""
    clusters: dict[Any, list[int]] = {}
    for i, key in enumerate(key_of):
        clusters.setdefault(("alone", i) if key is None else key, []).append(i)
    groups = list(clusters.values())
    nodes = []
    for members in groups:
        first = view.nodes[members[0]]
        if len(members) == 1:
            nodes.append(first)
            continue
        inner = [view.nodes[i] for i in members]
        names = list(dict.fromkeys(g for node in inner for g in node["groups"]))
        nodes.append({"id": first["id"], "kind": "collapsed", "label": label(inner),
                      "behind": all(node["behind"] for node in inner), "groups": names,
                      "count": sum(_ops(node) for node in inner if node["kind"] != "leaf"),
                      "leaves": sum(node["kind"] == "leaf" for node in inner)})
    return View(nodes, _merged_edges(groups, view.edges, len(view.nodes)), view.n_chains,
                view.n_collapsed, view.merged)


def _count(inner: list[dict[str, Any]]) -> str:
    """``"44 ops, 1 leaf"``: leaves that lead to a group are parameters, the others inputs."""
    ops = sum(_ops(node) for node in inner if node["kind"] != "leaf")
    params = sum(node["kind"] == "leaf" and bool(node["groups"]) for node in inner)
    inputs = sum(node["kind"] == "leaf" and not node["groups"] for node in inner)
    words = [f"{n} {word}{'s' * (n != 1)}" for n, word in
             ((ops, "op"), (params, "parameter"), (inputs, "input")) if n]
    return ", ".join(words)


def _behind_cuts(view: View) -> list[Any]:
    """For each node behind a cut, the cuts it lies behind (as a key); ``None`` for the others."""
    _, kids = _adjacency(len(view.nodes), view.edges)
    key: list[Any] = [None] * len(view.nodes)
    reached: list[set[int]] = [set() for _ in view.nodes]

    def behind(i: int) -> list[int]:
        return [d for d in kids[i] if view.nodes[d]["behind"]]

    for c, node in enumerate(view.nodes):
        if node["kind"] == "cut":
            for i in closure(behind(c), behind):
                reached[i].add(c)
    for i, cuts in enumerate(reached):
        if cuts and view.nodes[i]["kind"] != "cut":
            key[i] = ("behind", tuple(sorted(cuts)))
    return key


def _keep(node: dict[str, Any]) -> bool:
    """The loss and the cuts are never merged."""
    return node["id"] == 0 or node["kind"] == "cut"


def collapse_view(graph: GradientGraph, min_chain: int = 3, max_nodes: int = 0) -> View:
    """The view of ``graph`` to draw: chains of at least ``min_chain`` elementwise ops merged
    (0: never), then, while more than ``max_nodes`` nodes remain (0: no limit), what lies behind
    each cut, then each parameter group's own ops and parameters, then the ops shared by the
    same groups (see the module docstring)."""
    view = _chains(graph, min_chain)
    if not max_nodes or len(view.nodes) <= max_nodes:
        return view
    steps = []
    keys = _behind_cuts(view)
    if any(k is not None for k in keys):
        view = _merge(view, keys, lambda inner: f"{_count(inner)} behind the cut")
        steps.append("what lies behind each cut")
    if len(view.nodes) > max_nodes:
        view = _merge(view, [None if _keep(n) or n["behind"] or len(n["groups"]) != 1 else
                             (n["kind"] == "leaf", n["groups"][0]) for n in view.nodes],
                      lambda inner: f"{inner[0]['groups'][0]}: {_count(inner)}")
        steps.append("each group's own ops and parameters")
    if len(view.nodes) > max_nodes:
        view = _merge(view, [None if _keep(n) or n["behind"] or len(n["groups"]) < 2 else
                             ("shared", tuple(n["groups"])) for n in view.nodes],
                      lambda inner: f"{_count(inner)} shared by {len(inner[0]['groups'])} groups")
        steps.append("the ops groups share")
    view.merged = (f"{len(view.nodes)} nodes drawn (limit {max_nodes}): merged "
                   f"{', then '.join(steps)}")
    return view


def layout_dot(view: View, boxes: list[Point], gap: float, ranksep: float
               ) -> tuple[list[Point], list[EdgePath | None]]:
    """Node centres and, per edge, graphviz ``dot``'s spline (Bézier points, arrow tip last)."""
    import graphviz

    g = graphviz.Digraph(graph_attr={"rankdir": "TB", "nodesep": f"{gap / 72:.3f}",
                                     "ranksep": f"{ranksep / 72:.3f}"},
                         node_attr={"shape": "box", "fixedsize": "true", "label": ""})
    for i, (w, h) in enumerate(boxes):
        g.node(str(i), width=f"{w / 72:.4f}", height=f"{h / 72:.4f}")
    for src, dst, _ in view.edges:
        g.edge(str(src), str(dst))
    out = json.loads(g.pipe(format="json0", engine="dot"))
    pos: dict[int, Point] = {}
    for obj in out.get("objects", []):
        x, y = (float(v) for v in obj["pos"].split(","))
        pos[int(obj["name"])] = (x, y)
    name = {o["_gvid"]: int(o["name"]) for o in out.get("objects", [])}
    splines: dict[tuple[int, int], EdgePath] = {}
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
        if len(points) >= 4 and (len(points) - 1) % 3 == 0:
            splines[(name[edge["tail"]], name[edge["head"]])] = (
                [*points, *([end] if end is not None else [])], True)
    return ([pos[i] for i in range(len(boxes))],
            [splines.get((s, d)) for s, d, _ in view.edges])


class _Box:
    """A vertex's view for grandalf: its size in, its centre out."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy: Point = (0.0, 0.0)


class _Route:
    """An edge's view for grandalf: the polyline through its dummy vertices."""

    def __init__(self) -> None:
        self.points: list[Point] = []

    def setpath(self, points: list[Point]) -> None:
        self.points = [(float(x), float(y)) for x, y in points]


def layout_grandalf(view: View, boxes: list[Point], gap: float, ranksep: float
                    ) -> tuple[list[Point], list[EdgePath | None]]:
    """Node centres (y up, the loss on top) and each edge's polyline, from grandalf's
    Sugiyama layout; separate components side by side."""
    from grandalf.graphs import Edge, Vertex, graph_core
    from grandalf.layouts import SugiyamaLayout

    vertices = [Vertex(i) for i in range(len(boxes))]
    for v, (w, h) in zip(vertices, boxes):
        v.view = _Box(w, h)
    edges = []
    for src, dst, _ in view.edges:
        edge = Edge(vertices[src], vertices[dst])
        edge.view = _Route()
        edges.append(edge)
    # connected components, built in a fixed order (grandalf's Graph keeps edges in a set,
    # which would make the layout depend on memory addresses)
    root = list(range(len(vertices)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for src, dst, _ in view.edges:
        root[find(src)] = find(dst)
    members: dict[int, list[int]] = {}
    for i in range(len(vertices)):
        members.setdefault(find(i), []).append(i)
    offset = 0.0
    shift: dict[int, float] = {}
    for nodes in sorted(members.values()):
        inside = set(nodes)
        component = graph_core([vertices[i] for i in nodes],
                               [e for e, (s, _, _) in zip(edges, view.edges) if s in inside])
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = gap, ranksep
        sugiyama.dw, sugiyama.dh = 1.0, min(h for _, h in boxes)  # thin lanes for long edges
        roots = [v for v in component.sV if not v.e_in()] or [min(component.sV,
                                                                   key=lambda v: v.data)]
        sugiyama.init_all(roots=roots)
        sugiyama.draw(3)
        left = min(vertices[i].view.xy[0] - boxes[i][0] / 2 for i in nodes)
        right = max(vertices[i].view.xy[0] + boxes[i][0] / 2 for i in nodes)
        for i in nodes:
            shift[i] = offset - left
        for e in component.sE:
            e.view.points = [(x + offset - left, y) for x, y in e.view.points]
        offset += right - left + 2 * gap
    positions = [(v.view.xy[0] + shift[v.data], -v.view.xy[1]) for v in vertices]
    paths: list[EdgePath | None] = []
    for edge in edges:
        points = edge.view.points
        paths.append(([(x, -y) for x, y in points], False) if len(points) >= 2 else None)
    return positions, paths


def _segments(path: EdgePath) -> list[tuple[Point, Point]]:
    points, bezier = path
    if bezier:  # the chord of each cubic piece is close enough to count crossings
        points = points[: 1 + 3 * ((len(points) - 1) // 3)][::3]
    return list(itertools.pairwise(points))


def _cross(a: Point, b: Point, c: Point, d: Point) -> bool:
    """Whether segments ab and cd cross at a point inside both (touching ends do not count)."""
    def orient(p: Point, q: Point, r: Point) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    d1, d2, d3, d4 = orient(c, d, a), orient(c, d, b), orient(a, b, c), orient(a, b, d)
    eps = 1e-9 * max(1.0, *(abs(v) for p in (a, b, c, d) for v in p)) ** 2
    return d1 * d2 < -eps and d3 * d4 < -eps


def edge_crossings(paths: list[EdgePath | None]) -> int:
    """How many pairs of drawn edges cross (two edges that meet at a node only touch there:
    not a crossing)."""
    drawn = [_segments(p) for p in paths if p is not None]
    return sum(any(_cross(a, b, c, d) for a, b in segs for c, d in other)
               for segs, other in itertools.combinations(drawn, 2))
