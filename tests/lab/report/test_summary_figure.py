"""Figure 1 of a report: a lettered panel per experiment's headline finding, thresholds drawn,
every value where it is (an exact 0 on a log axis on a row marked 0), a caption that explains the
marks the figure uses and only those."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
from layout import layout_problems

from tests.lab.report.figure_hits import text_problems
from toolkit.lab import Finding, Headline
from toolkit.lab.report.render import glance
from toolkit.lab.report.summary import MARKS, headline_of, summary_caption, summary_figure
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


def _titles(fig) -> list[str]:
    """Each panel's text above it (name, verdict, seeds off the axis), in order."""
    return [panel._suptitle.get_text() for panel in fig.subfigs
            if panel._suptitle is not None]


def _readings(fig) -> list[str]:
    return [panel._supxlabel.get_text() if panel._supxlabel is not None else ""
            for panel in fig.subfigs]


def test_one_lettered_panel_per_headline_with_its_thresholds_and_verdict() -> None:
    sections = [_section("simsiam", [(0.9, 0.02), (0.95, 0.04), (0.88, 0.01)],
                         thresholds=(0.1, 0.5)),
                ("no_headline", _verdicts([(1.0, 2.0)] * 3, head=None)),
                _section("td", [(1e3, 1e30), (2e3, math.inf), (1.5e3, 1e28)], log=True)]
    fig = summary_figure(sections)
    try:
        axes = [panel.axes[0] for panel in fig.subfigs]
        titles = _titles(fig)
        assert [t.splitlines()[0] for t in titles] == ["(a) simsiam", "(b) td"]
        assert titles[0].splitlines()[1] == "as predicted · 3/3 seeds"
        assert "1 seed off the axis" in titles[1]  # the infinite seed
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


def test_a_seed_independent_verdict_says_so_as_the_findings_do() -> None:
    per_seed = {seed: {"x": [Finding("Exactly {b} with the block, {u} without.", True,
                                     basis=BASIS, values={"b": 1.0, "u": 2.0},
                                     seed_independent=True,
                                     headline=Headline("count", "b", "u"))]}
                for seed in range(3)}
    fig = summary_figure([("exact", aggregate(per_seed)[0]["x"])])
    try:
        (title,) = _titles(fig)
        assert title.splitlines()[-1].endswith("seed-independent"), title  # never "any seed"
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
        assert _titles(fig)[0].endswith("did not hold · 0/2 seeds")
    finally:
        plt.close(fig)


@pytest.mark.parametrize(("n", "rows"), [
    (5, 1), (10, 2),  # the most panels in one row; the showcase's ten
    *(pytest.param(n, rows, marks=pytest.mark.slow) for n, rows in [(1, 1), (4, 1), (8, 2)])])
def test_panels_fit_the_report_width_in_rows_of_at_most_five(n: int, rows: int) -> None:
    # what to see in a few words, or in none; long axis labels, as the showcase's are
    readings = ["identical: PGD's sign() passes no gradient through the attack", "",
                "0 with the block: ∇Q = ∇LL exactly (Fisher's identity)"]
    sections = [(f"experiment_{i}", _verdicts([(1.0, 2.0), (1.5, 2.5)], head=Headline(
        "PGD-AT accuracy under PGD-10 (target network's drift)", "b", "u",
        reading=readings[i % 3]))) for i in range(n)]
    fig = summary_figure(sections)
    try:
        assert fig.get_figwidth() <= 9.0 + 1e-9
        assert len(fig.subfigs) == n
        assert fig.get_figheight() == pytest.approx(2.6 * rows + 0.3)
        # whole, wrapped
        assert [" ".join(r.split()) for r in _readings(fig)] == [readings[i % 3]
                                                                  for i in range(n)]
        # every text inside the canvas and apart from the others, at 9 pt or more
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)


def test_ten_panels_leave_the_first_screen_room_for_the_title_and_the_finding() -> None:
    """The showcase's ten panels are two rows: at the report's 100 dpi Figure 1 is at most
    560 px tall, so that under the title, the run line and the sentence of what was found
    (about 250 px at 1400 × 900) it is whole on a laptop's first screen."""
    fig = summary_figure([_section(f"e{i}", [(1.0, 2.0)], reading="a few words " * 4)
                          for i in range(10)])
    try:
        assert fig.get_figheight() * 100 <= 560
    finally:
        plt.close(fig)


def test_an_exact_zero_on_a_log_axis_is_drawn_and_labelled_zero() -> None:
    """EM's blocked error is exactly 0 on a log axis: a dot on the row marked 0 below a break,
    never the triangle of a diverged run; the caption says zero and says nothing of triangles."""
    sections = [_section("em_gmm", [(0.0, 0.3), (0.0, 0.5)], thresholds=(1e-6, 1e-3),
                         log=True, reading="0 with the block: Fisher's identity")]
    fig = summary_figure(sections)
    caption = summary_caption(sections)
    try:
        (ax,) = fig.subfigs[0].axes
        assert ax.get_yscale() == "log"
        zero_row = ax.get_yticks()[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels[0] == "0" and all(label != "0" for label in labels[1:])
        low, high = ax.get_ylim()
        assert low < zero_row < 1e-6 < high  # the row of 0 is on the axis, under the decades
        blocked = [line for line in ax.get_lines() if line.get_marker() == "o"
                   and line.get_color() == COLORS["blocked"]]
        assert [list(line.get_ydata()) for line in blocked] == [[zero_row, zero_row]]
        assert not [line for line in ax.get_lines() if line.get_marker() in ("^", "v")]
        assert "off the axis" not in _titles(fig)[0]
        assert MARKS["zero"] in caption and "exactly 0" in caption
        assert "triangle" not in caption and "diverged" not in caption
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)


def test_the_caption_explains_each_mark_the_figure_uses_and_only_those() -> None:
    plain = [_section("a", [(1.0, 2.0)])]
    assert not any(text in summary_caption(plain) for text in MARKS.values())
    diverged = [_section("a", [(1.0, math.inf)], thresholds=(0.5,))]
    caption = summary_caption(diverged)
    assert MARKS["diverged"] in caption and MARKS["thresholds"] in caption
    assert MARKS["zero"] not in caption and MARKS["negative"] not in caption
    fig = summary_figure(diverged)
    try:
        (ax,) = fig.subfigs[0].axes
        assert [line.get_marker() for line in ax.get_lines() if line.get_marker() == "^"] == ["^"]
    finally:
        plt.close(fig)
    # a zero on a linear axis is an ordinary value: no row of its own, nothing to explain
    assert MARKS["zero"] not in summary_caption([_section("a", [(0.0, 2.0)])])


def test_the_glance_cell_of_a_headline_is_the_whole_finding() -> None:
    words = " ".join(["word"] * 60)
    (verdict,) = aggregate({0: {"x": [Finding(words + " {b} {u}.", True, basis=BASIS,
                                              values={"b": 1.0, "u": 2.0},
                                              headline=Headline("m", "b", "u"))]}})[0]["x"]
    assert headline_of([verdict]) is verdict
    assert glance(verdict, whole=True)["text"] == words + " 1 2."
    assert glance(verdict)["text"].endswith("…")
