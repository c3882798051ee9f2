"""draw_gradient_graph: both layout engines, the cut's style, collapsed chains, no text overlap."""

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

import toolkit.core.graph_draw as graph_draw
from toolkit import as_constant
from toolkit.core import draw_gradient_graph, gradient_graph, trace_cuts

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
    assert _footnotes(fig)[1] == "layout: graphviz dot"
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


def test_networkx_fallback_says_so_in_the_figure_and_the_log(no_dot, caplog):
    loss_fn, groups = _dqn()
    with caplog.at_level(logging.WARNING, logger="toolkit.core.graph_draw"):
        fig = draw_gradient_graph(loss_fn, groups)
    assert "falling back to networkx's layered layout" in caplog.text
    assert _footnotes(fig)[1] == ("layout: networkx multipartite_layout (graphviz 'dot' not "
                                  "found on PATH)")
    assert "cut 'test.target'" in {t.get_text() for t in fig.axes[0].texts}
    assert_readable(fig)
    with pytest.raises(RuntimeError, match=r"draw_gradient_graph: layout='dot' needs the "
                       r"graphviz Python package and the 'dot' binary on PATH"):
        draw_gradient_graph(loss_fn, groups, layout="dot")


@has_dot
def test_a_failing_dot_falls_back_in_auto_mode_only(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("dot crashed")

    monkeypatch.setattr(graph_draw, "_layout_dot", broken)
    loss_fn, groups = _dqn()
    with caplog.at_level(logging.WARNING, logger="toolkit.core.graph_draw"):
        fig = draw_gradient_graph(loss_fn, groups)
    assert "graphviz 'dot' failed: dot crashed; falling back" in caplog.text
    assert _footnotes(fig)[1] == ("layout: networkx multipartite_layout (graphviz 'dot' failed: "
                                  "dot crashed)")
    with pytest.raises(RuntimeError, match="dot crashed"):
        draw_gradient_graph(loss_fn, groups, layout="dot")


def test_chains_of_elementwise_ops_are_collapsed_and_counted():
    w = torch.ones(3, requires_grad=True)

    def loss_fn():
        h = w
        for _ in range(12):
            h = h.exp()
        return h.sum()

    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="networkx")
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["Sum (loss)", "×12 elementwise ops", "w"]
    assert "1 chain of elementwise ops collapsed (12 ops in all)" in _footnotes(fig)
    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="networkx", collapse=0)
    assert [t.get_text() for t in fig.axes[0].texts].count("Exp") == 12
    assert not any("collapsed" in note for note in _footnotes(fig))
    fig = draw_gradient_graph(loss_fn, {"w": w}, layout="networkx", collapse=13)
    assert [t.get_text() for t in fig.axes[0].texts].count("Exp") == 12


@pytest.mark.parametrize("layout", [pytest.param("dot", marks=has_dot), "networkx"])
def test_a_few_hundred_nodes_stay_readable(layout, seed: int):
    torch.manual_seed(seed)
    net = nn.Sequential(*[m for _ in range(40) for m in (nn.Linear(4, 4), nn.Tanh())])
    x = torch.randn(2, 4)
    graph = gradient_graph(lambda: net(x).pow(2).mean(), {"front": net[:40], "back": net[40:]})
    assert len(graph.nodes) > 200
    fig = draw_gradient_graph(graph, layout=layout, fontsize=6)
    assert len(fig.axes[0].texts) > 200
    assert_readable(fig)


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
                       r"'dot', 'networkx', got 'neato'"):
        draw_gradient_graph(w.sum(), layout="neato")
    with pytest.raises(ValueError, match=r"draw_gradient_graph: collapse must be an int >= 0, "
                       r"got -1"):
        draw_gradient_graph(w.sum(), collapse=-1)
    with pytest.raises(ValueError, match=r"draw_gradient_graph: fontsize must be a number > 0"):
        draw_gradient_graph(w.sum(), fontsize=0)
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
