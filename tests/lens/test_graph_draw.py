"""draw_gradient_graph: both layout engines, the cut's style, collapsed chains and large graphs,
few edge crossings, no text overlap, the fallback noted outside the image."""

from __future__ import annotations

import copy
import itertools
import json
import logging
import shutil

import pytest
import torch
from matplotlib.colors import to_rgba
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.text import Text
from torch import nn

import toolkit.lens.graph_draw as graph_draw
from toolkit import as_constant
from toolkit.lens import GradientGraph, draw_gradient_graph, gradient_graph, trace_cuts
from toolkit.lens.graph_layout import collapse_view, edge_crossings, layout_grandalf

has_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")


def _texts(fig) -> list[Text]:
    """Every text the figure draws (hidden axes' tick labels excluded)."""
    hidden = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
              for t in axis.findobj(Text)}
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text() and id(t) not in hidden]


def assert_readable(fig) -> None:
    """No text overlaps another, and every text lies inside the canvas."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    for text, box in boxes:
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, text
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), f"{a!r} overlaps {b!r}"


def _footnotes(fig) -> list[str]:
    return [t.get_text() for t in fig.texts]


def _dqn():
    torch.manual_seed(0)
    online = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    target = copy.deepcopy(online)
    s, s2, r = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6)

    def loss_fn():
        nxt = as_constant(lambda: target(s2).max(1).values, name="test.target")
        return ((online(s).max(1).values - r - 0.9 * nxt) ** 2).mean()

    return loss_fn, {"online": online, "target": target}


@pytest.fixture
def no_dot(monkeypatch):
    monkeypatch.setattr(graph_draw, "_dot_binary", lambda: None)


@has_dot
def test_graphviz_layout_marks_the_cut_and_colours_the_groups():
    loss_fn, groups = _dqn()
    fig = draw_gradient_graph(loss_fn, groups)
    assert getattr(fig, graph_draw.LAYOUT_NOTE) == ""
    assert not any("layout" in note for note in _footnotes(fig))
    assert fig.texts[0].get_text() == "backward graph (cuts: 'test.target')"
    assert_readable(fig)
    ax = fig.axes[0]
    labels = {t.get_text() for t in ax.texts}
    assert {"cut 'test.target'", "online.0.weight", "target.0.weight", "Mean (loss)"} <= labels
    # the removed edge: dashed, in the cut's colour; edges behind the cut dashed grey
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    dashed_red = [p for p in arrows if p.get_linestyle() == "--"
                  and p.get_edgecolor() == to_rgba(graph_draw.CUT_COLOR)]
    dashed_grey = [p for p in arrows if p.get_linestyle() == "--"
                   and p.get_edgecolor() == to_rgba(graph_draw.BEHIND_COLOR)]
    assert len(dashed_red) == 1 and len(dashed_grey) >= 8
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    by_label = dict(zip([t.get_text() for t in ax.texts], boxes))
    assert by_label["online.0.weight"].get_facecolor()[:3] == to_rgba("C2")[:3]
    assert by_label["target.0.weight"].get_facecolor()[:3] == to_rgba("C4")[:3]
    assert by_label["target.0.weight"].get_linestyle() == "--"  # behind the cut
    assert by_label["online.0.weight"].get_linestyle() == "-"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == ["leads to online", "leads to target"]
    assert "edge removed by the cut" in legend and "behind a cut: no gradient" in legend


def _no_layout_text(fig) -> None:
    texts = [t.get_text() for t in _texts(fig)]
    assert not any("grandalf" in t or "graphviz" in t or "layout" in t for t in texts), texts


def test_without_dot_grandalf_lays_out_and_the_fallback_is_logged_once_not_drawn(
        no_dot, caplog, monkeypatch):
    monkeypatch.setattr(graph_draw, "_WARNED", set())
    loss_fn, groups = _dqn()
    with caplog.at_level(logging.WARNING, logger="toolkit.lens.graph_draw"):
        figs = [draw_gradient_graph(loss_fn, groups) for _ in range(3)]
    assert caplog.text.count("laying graphs out with grandalf's Sugiyama layout") == 1
    for fig in figs:
        assert getattr(fig, graph_draw.LAYOUT_NOTE) == (
            "backward graphs laid out by grandalf's Sugiyama layout: graphviz 'dot' not found "
            "on PATH (install graphviz for dot's layout)")
        _no_layout_text(fig)
        assert "cut 'test.target'" in {t.get_text() for t in fig.axes[0].texts}
        assert_readable(fig)
    explicit = draw_gradient_graph(loss_fn, groups, layout="grandalf")
    assert getattr(explicit, graph_draw.LAYOUT_NOTE) == ""  # asked for: no fallback to note
    with pytest.raises(RuntimeError, match=r"draw_gradient_graph: layout='dot' needs the "
                       r"graphviz Python package and the 'dot' binary on PATH"):
        draw_gradient_graph(loss_fn, groups, layout="dot")


@has_dot
def test_a_failing_dot_falls_back_in_auto_mode_only(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("dot crashed")

    monkeypatch.setattr(graph_draw, "_layout_dot", broken)
    monkeypatch.setattr(graph_draw, "_WARNED", set())
    loss_fn, groups = _dqn()
    with caplog.at_level(logging.WARNING, logger="toolkit.lens.graph_draw"):
        fig = draw_gradient_graph(loss_fn, groups)
    assert "graphviz 'dot' failed: dot crashed; laying graphs out with grandalf" in caplog.text
    assert "graphviz 'dot' failed: dot crashed" in getattr(fig, graph_draw.LAYOUT_NOTE)
    _no_layout_text(fig)
    with pytest.raises(RuntimeError, match="dot crashed"):
        draw_gradient_graph(loss_fn, groups, layout="dot")


def _node(i: int, label: str, kind: str = "op") -> dict:
    return {"id": i, "label": label, "kind": kind, "behind": False, "groups": []}


def _crossings(graph: GradientGraph, max_nodes: int = 0) -> tuple[int, int]:
    """Nodes drawn and edge crossings of grandalf's layout, with the boxes the figure uses."""
    view = collapse_view(graph, 3, max_nodes)
    boxes, gap, ranksep = graph_draw._boxes(view, 9.0)
    _, paths = layout_grandalf(view, boxes, gap, ranksep)
    return len(view.nodes), edge_crossings(paths)


def test_edge_crossings_counts_what_crosses():
    assert edge_crossings([([(0, 0), (2, 2)], False), ([(0, 2), (2, 0)], False)]) == 1
    assert edge_crossings([([(0, 0), (2, 2)], False), ([(0, 0), (2, 0)], False)]) == 0  # touch
    assert edge_crossings([([(0, 0), (0, 2)], False), ([(1, 0), (1, 2)], False), None]) == 0


def test_the_layered_layout_uncrosses_what_the_discovery_order_crosses():
    # discovery order puts p4 (child of m3) left of p6 (child of m1): three crossings unless
    # the layers are reordered
    nodes = [_node(0, "loss"), *(_node(i, f"m{i}") for i in (1, 2, 3)),
             *(_node(i, f"p{i}", "leaf") for i in (4, 5, 6))]
    edges = [[0, 1, "flow"], [0, 2, "flow"], [0, 3, "flow"], [1, 6, "flow"], [2, 5, "flow"],
             [3, 4, "flow"]]
    assert _crossings(GradientGraph(nodes, edges, [], [])) == (7, 0)
    loss_fn, groups = _dqn()
    assert _crossings(gradient_graph(loss_fn, groups))[1] == 0


def test_a_large_graph_is_merged_and_the_cut_stays_marked(no_dot):
    loss_fn, groups = _dqn()
    graph = gradient_graph(loss_fn, groups)
    assert len(graph.nodes) > 12
    fig = draw_gradient_graph(graph, max_nodes=12)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert len(labels) <= 12
    assert "cut 'test.target'" in labels and "Mean (loss)" in labels
    behind = [t for t in labels if t.endswith("behind the cut")]
    assert behind == ["6 ops, 4 parameters behind the cut"]  # target network: 2 layers
    assert (f"{len(labels)} nodes drawn (limit 12): merged what lies behind each cut"
            in " ".join(_footnotes(fig)))
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert sum(p.get_edgecolor() == to_rgba(graph_draw.CUT_COLOR) for p in arrows) == 1
    assert_readable(fig)


def test_chains_of_elementwise_ops_are_collapsed_and_counted():
    w = torch.ones(3, requires_grad=True)

    def loss_fn():
        h = w
        for _ in range(12):
            h = h.exp()
        return h.sum()

    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="grandalf")
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["Sum (loss)", "×12 elementwise ops", "w"]
    assert "1 chain of elementwise ops collapsed (12 ops in all)" in _footnotes(fig)
    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="grandalf", collapse=0)
    assert [t.get_text() for t in fig.axes[0].texts].count("Exp") == 12
    assert not any("collapsed" in note for note in _footnotes(fig))
    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="grandalf", collapse=13)
    assert [t.get_text() for t in fig.axes[0].texts].count("Exp") == 12


@pytest.mark.parametrize("layout", [pytest.param("dot", marks=has_dot), "grandalf"])
def test_a_few_hundred_nodes_stay_readable_and_are_merged_by_group(layout, seed: int):
    torch.manual_seed(seed)
    net = nn.Sequential(*[m for _ in range(40) for m in (nn.Linear(4, 4), nn.Tanh())])
    x = torch.randn(2, 4)
    graph = gradient_graph(lambda: net(x).pow(2).mean(), {"front": net[:40], "back": net[40:]})
    assert len(graph.nodes) > 200
    fig = draw_gradient_graph(graph, layout=layout, fontsize=6, max_nodes=0)
    assert len(fig.axes[0].texts) > 200
    assert_readable(fig)
    if layout == "grandalf":  # a chain of layers: nothing needs to cross
        assert _crossings(graph) == (len(fig.axes[0].texts), 0)
    merged = draw_gradient_graph(graph, layout=layout)
    labels = {t.get_text() for t in merged.axes[0].texts}
    assert {"front: 40 parameters", "back: 40 parameters", "Mean (loss)"} <= labels
    assert len(labels) <= 40
    assert_readable(merged)


def test_accepts_a_traced_tensor_a_graph_or_its_json(no_dot):
    loss_fn, groups = _dqn()
    with trace_cuts():
        loss = loss_fn()
    graph = gradient_graph(loss, groups)
    texts = {t.get_text() for t in draw_gradient_graph(loss, groups).axes[0].texts}
    from_json = draw_gradient_graph(json.loads(json.dumps(graph.to_dict())))
    assert {t.get_text() for t in from_json.axes[0].texts} == texts
    plain = draw_gradient_graph(loss_fn(), groups)  # not traced: nothing marks the cut
    assert plain.texts[0].get_text() == "backward graph (cuts: none)"
    assert not any(t.get_text().startswith("cut ") for t in plain.axes[0].texts)


def test_long_titles_empty_graphs_and_no_groups_fit_the_canvas(no_dot):
    w = torch.ones(2, requires_grad=True)
    fig = draw_gradient_graph((w * 2).sum(), title="a title much wider than this small graph "
                              "of three nodes, which must still fit")
    assert_readable(fig)
    assert "operation or leaf" in [t.get_text() for t in fig.legends[0].get_texts()]
    assert_readable(draw_gradient_graph(torch.ones(2).sum()))


def test_draw_gradient_graph_errors():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"draw_gradient_graph: layout must be one of 'auto', "
                       r"'dot', 'grandalf', got 'neato'"):
        draw_gradient_graph(w.sum(), layout="neato")
    with pytest.raises(ValueError, match=r"draw_gradient_graph: collapse must be an int >= 0, "
                       r"got -1"):
        draw_gradient_graph(w.sum(), collapse=-1)
    with pytest.raises(TypeError, match=r"draw_gradient_graph: max_nodes must be an int >= 0, "
                       r"got 2.5"):
        draw_gradient_graph(w.sum(), max_nodes=2.5)
    with pytest.raises(ValueError, match=r"draw_gradient_graph: fontsize must be a number > 0"):
        draw_gradient_graph(w.sum(), fontsize=0)
    with pytest.raises(TypeError, match=r"draw_gradient_graph: title must be None or a str, "
                       r"got object <object object"):
        draw_gradient_graph(w.sum(), title=object())
    with pytest.raises(TypeError, match=r"draw_gradient_graph: loss must be a tensor, a callable "
                       r"returning the loss, a GradientGraph or its to_dict\(\), got int"):
        draw_gradient_graph(3)


def test_the_readability_check_catches_overlaps_and_overflow():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1))
    FigureCanvasAgg(fig)
    fig.text(0.1, 0.5, "one")
    fig.text(0.12, 0.5, "two")
    with pytest.raises(AssertionError, match="'one' overlaps 'two'"):
        assert_readable(fig)
    fig = Figure(figsize=(2, 1))
    FigureCanvasAgg(fig)
    fig.text(0.9, 0.5, "far too long to fit")
    with pytest.raises(AssertionError, match="far too long"):
        assert_readable(fig)
