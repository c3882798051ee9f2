"""Figure 1 of a report: a lettered panel per experiment's headline finding, thresholds drawn."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
from layout import layout_problems

from toolkit.lab import Finding, Headline
from toolkit.lab.report.figures import text_problems
from toolkit.lab.report.render import glance
from toolkit.lab.report.summary import headline_of, summary_figure
from toolkit.lab.results.findings import aggregate
from toolkit.lab.style import COLORS

BASIS = "a named theorem"


def _verdicts(pairs: list[tuple[float, float]], *, head: Headline | None, holds: bool = True):
    per_seed = {seed: {"x": [Finding("Spread {b} with the block, {u} without.", holds,
                                     basis=BASIS, values={"b": b, "u": u}, headline=head),
                             Finding("A second finding: {b}.", None, values={"b": b})]}
                for seed, (b, u) in enumerate(pairs)}
    return aggregate(per_seed)[0]["x"]


def _section(name: str, pairs, **head):
    return name, _verdicts(pairs, head=Headline("std × √d", "b", "u", **head))


def test_one_lettered_panel_per_headline_with_its_thresholds_and_verdict() -> None:
    sections = [_section("simsiam", [(0.9, 0.02), (0.95, 0.04), (0.88, 0.01)],
                         thresholds=(0.1, 0.5)),
                ("no_headline", _verdicts([(1.0, 2.0)] * 3, head=None)),
                _section("td", [(1e3, 1e30), (2e3, math.inf), (1.5e3, 1e28)], log=True)]
    fig = summary_figure(sections)
    try:
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title(loc="left").splitlines()[0] for ax in axes] == ["(a) simsiam",
                                                                             "(b) td"]
        assert axes[0].get_title(loc="left").splitlines()[1] == "as predicted · 3/3 seeds"
        assert "1 seed off the axis" in axes[1].get_title(loc="left")  # the infinite seed
        assert axes[1].get_yscale() == "log"
        dashed = sorted(line.get_ydata()[0] for line in axes[0].get_lines()
                        if line.get_color() == COLORS["reference"])
        assert dashed == [0.1, 0.5]
        low, high = axes[0].get_ylim()
        assert low < 0.01 and high > 0.95  # every seed and threshold on the axis
        seeds = [line for line in axes[0].get_lines() if line.get_marker() == "o"]
        assert sorted(len(line.get_ydata()) for line in seeds) == [3, 3]
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)


def test_no_headline_no_figure_and_a_verdict_that_did_not_hold_says_so() -> None:
    assert summary_figure([("x", _verdicts([(1.0, 2.0)], head=None))]) is None
    assert summary_figure([]) is None
    sections = [_section("x", [(0.9, 0.3), (0.9, 0.05)], thresholds=(0.1,))]
    sections[0][1][0] = _verdicts([(0.9, 0.3), (0.9, 0.05)], holds=False,
                                  head=Headline("m", "b", "u", thresholds=(0.1,)))[0]
    fig = summary_figure(sections)
    try:
        assert fig.axes[0].get_title(loc="left").endswith("did not hold · 0/2 seeds")
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n", [1, 4, 5, 8])
def test_panels_fit_the_report_width_in_rows_of_four(n: int) -> None:
    fig = summary_figure([_section(f"e{i}", [(1.0, 2.0), (1.5, 2.5)]) for i in range(n)])
    try:
        assert fig.get_figwidth() <= 9.0 + 1e-9
        assert len([ax for ax in fig.axes if ax.get_visible()]) == n
        assert fig.get_figheight() == pytest.approx(2.3 * math.ceil(n / 4))
        assert text_problems(fig) == []
    finally:
        plt.close(fig)


def test_the_glance_cell_of_a_headline_is_the_whole_finding() -> None:
    words = " ".join(["word"] * 60)
    (verdict,) = aggregate({0: {"x": [Finding(words + " {b} {u}.", True, basis=BASIS,
                                              values={"b": 1.0, "u": 2.0},
                                              headline=Headline("m", "b", "u"))]}})[0]["x"]
    assert headline_of([verdict]) is verdict
    assert glance(verdict, whole=True)["text"] == words + " 1 2."
    assert glance(verdict)["text"].endswith("…")
