"""The layout checks: each defect of issue 24 drawn on purpose is caught, and its fix passes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tests.lab.report.layout import colour_meanings, colour_problems, layout_problems
from toolkit.lab.style import COLORS, EXTRA_COLORS, note_identical, place_legend, variant_style


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _figure(width: float = 6.0, height: float = 3.5):
    return plt.subplots(figsize=(width, height), layout="constrained")


def test_a_good_figure_has_no_problems():
    fig, ax = _figure()
    x = np.arange(10)
    ax.plot(x, x, label="blocked", **variant_style("blocked"))
    ax.plot(x, 0.5 * x, label="unblocked", **variant_style("unblocked"))
    ax.set(xlabel="step", ylabel="loss", title="a good figure")
    place_legend(ax)
    assert layout_problems(fig) == []


def test_a_legend_over_a_line_is_caught_and_place_legend_avoids_it():
    # the softmax "naive vs stable" defect: the legend sits on a curve
    fig, ax = _figure()
    x = np.linspace(0, 1, 50)
    ax.plot(x, np.ones_like(x), label="flat at the top", color=EXTRA_COLORS[0])
    ax.plot(x, x, label="diagonal", color=EXTRA_COLORS[1])
    ax.legend(loc="upper left")
    problems = layout_problems(fig)
    assert any("covers data" in p and "flat at the top" in p for p in problems), problems
    ax.get_legend().remove()
    place_legend(ax)
    assert layout_problems(fig) == []


def test_a_legend_over_a_bar_is_caught():
    # the simsiam k-NN defect: the legend covers the unblocked bar
    fig, ax = _figure()
    ax.bar([0, 1], [0.9, 0.9], color=[COLORS["blocked"], COLORS["unblocked"]],
           label="_bars")
    ax.plot([], [], label="blocked", **variant_style("blocked"))
    ax.set_xticks([0, 1], ["blocked", "unblocked"])
    ax.legend(loc="lower right")
    assert any("covers data" in p and "Rectangle" in p for p in layout_problems(fig))


def test_a_legend_where_data_is_everywhere_goes_outside():
    fig, ax = _figure()
    rng = np.random.default_rng(0)
    ax.scatter(rng.random(400), rng.random(400), s=20, color=EXTRA_COLORS[0], label="points")
    place_legend(ax)
    assert any("covers data" in p for p in layout_problems(fig))  # no spot of the axes is free
    ax.get_legend().remove()
    place_legend(ax, outside="right")
    assert layout_problems(fig) == []
    ax.get_legend().remove()
    place_legend(ax, outside="below")
    assert layout_problems(fig) == []
    with pytest.raises(ValueError, match="place_legend: outside must be"):
        place_legend(ax, outside="left")


def test_identical_solid_lines_are_caught_and_the_note_fixes_them():
    # the vq_vae and adversarial defects: a curve hidden exactly under another
    fig, ax = _figure()
    x = np.arange(8)
    y = np.sqrt(x)
    ax.plot(x, y, label="blocked", **variant_style("blocked"))
    ax.plot(x, y, label="without commitment", color=EXTRA_COLORS[0], linestyle="-")
    place_legend(ax)
    problems = layout_problems(fig)
    assert any("lie on each other" in p for p in problems), problems
    ax.get_legend().remove()
    assert note_identical(ax) == ["identical to blocked: max difference 0"]
    place_legend(ax)
    assert layout_problems(fig) == []
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "without commitment\nidentical to blocked: max difference 0" in labels


def test_curves_within_a_pixel_are_indistinguishable_and_say_by_how_much_per_panel():
    # the vq_vae defect: "identical to blocked: max difference 0.071" under a panel whose
    # axis spans 0.03 to 0.08 (the 0.071 was the other panel's, in its own units)
    from toolkit.lab.style import legend_entries

    _fig, axes = plt.subplots(1, 2, figsize=(8, 3.5), layout="constrained")
    x = np.arange(12)
    for ax, (title, y, gap) in zip(axes, (("test MSE", 0.08 - 0.004 * x, 1.4e-4),
                                          ("perplexity", 5 + 2.0 * x, 0.071))):
        ax.set_title(title)
        ax.plot(x, y, label="blocked", **variant_style("blocked"))
        ax.plot(x, y + gap * (x == 5), label="without commitment", color=EXTRA_COLORS[0])
        assert note_identical(ax) == [f"indistinguishable from blocked: max difference "
                                      f"{gap:.2g}"]
    _, labels = legend_entries(axes)
    assert " ".join(labels[1].split("\n")) == (
        "without commitment indistinguishable from blocked: max difference 0.00014 (test "
        "MSE), 0.071 (perplexity)")
    # the same numbers in both panels: identical, one note
    _fig, axes = plt.subplots(1, 2, figsize=(8, 3.5), layout="constrained")
    for ax in axes:
        ax.plot(x, x, label="blocked", **variant_style("blocked"))
        ax.plot(x, x, label="unblocked", **variant_style("unblocked"))
        note_identical(ax)
    _, labels = legend_entries(axes)
    assert labels == ["blocked", "unblocked\nidentical to blocked: max difference 0"]


def test_identical_lines_with_distinct_markers_are_visible():
    fig, ax = _figure()
    x = np.arange(8)
    ax.plot(x, x, "o-", label="blocked", color=COLORS["blocked"])
    ax.plot(x, x, "s--", label="unblocked", color=COLORS["unblocked"], mfc="none")
    place_legend(ax)
    assert layout_problems(fig) == []


def test_lines_that_differ_are_not_identical():
    _, ax = _figure()
    x = np.arange(8)
    ax.plot(x, x, label="blocked", **variant_style("blocked"))
    ax.plot(x, x + 3, label="unblocked", **variant_style("unblocked"))
    assert note_identical(ax) == []


@pytest.mark.parametrize(("width", "size", "small"), [
    (6.0, 7.0, True),    # the em_gmm weight labels: 7 pt
    (14.4, 9.0, True),   # the softmax grid: 9 pt on a figure shrunk to 900 px
    (9.0, 9.0, False),
    (6.0, 10.0, False),
])
def test_text_under_9_pt_on_the_page_is_caught(width, size, small):
    fig, ax = _figure(width)
    ax.plot([0, 1], [0, 1], color=EXTRA_COLORS[0])
    ax.tick_params(labelsize=max(size, 9) * (1 if width <= 9 else width / 9))
    ax.text(0.1, 0.8, "label", fontsize=size)
    problems = [p for p in layout_problems(fig) if "pt on the page" in p]
    assert bool(problems) is small, problems
    if small:
        assert "'label'" in problems[0]


def test_a_reserved_colour_on_something_else_is_caught():
    # orange for Fast-FGSM, vermillion for "first failing c"
    fig, ax = _figure()
    ax.plot([0, 1], [0, 1], color="#E69F00", label="Fast-FGSM (RS)")
    ax.bar([2], [1], color=COLORS["unblocked"], label="first failing c")
    ax.plot([0, 1], [1, 0], color=EXTRA_COLORS[0], label="PGD-AT (blocked)")
    place_legend(ax)
    problems = layout_problems(fig)
    assert any("'Fast-FGSM (RS)'" in p and "unblocked colour's hue" in p for p in problems)
    assert any("'first failing c'" in p for p in problems)
    assert any("'PGD-AT (blocked)'" in p and "is the blocked variant" in p for p in problems)


def test_coloured_text_and_unlabelled_data_in_a_reserved_hue_are_caught():
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")
    a.set_title("→ 8", color=COLORS["unblocked"])  # the adversarial "fooled" digits
    b.plot([0, 1], [0, 1], color="C0")  # the em_gmm components in C0 blue and C1 orange
    b.plot([0, 1], [1, 0], color="C1")
    problems = layout_problems(fig)
    assert any("'→ 8' (text)" in p for p in problems)
    assert sum("where nothing says" in p for p in problems) == 2


def test_one_colour_two_meanings_in_a_report():
    figs = {}
    for name, label in (("exp__one", "float64"), ("exp__two", "standard training"),
                        ("other__one", "sampled chain")):
        fig, ax = _figure()
        ax.plot([0, 1], [0, 1], color=EXTRA_COLORS[0], label=label)
        ax.legend()
        figs[name] = fig
    problems = colour_problems(figs)
    assert len(problems) == 1 and "in the figures of exp" in problems[0]
    assert "'float64'" in problems[0] and "'standard training'" in problems[0]
    assert colour_problems({k: figs[k] for k in ("exp__one", "other__one")}) == []


def test_the_same_meaning_in_other_words_is_one_meaning():
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3), layout="constrained")
    a.plot([0, 1], [0, 1], color=EXTRA_COLORS[1], label="naive float32")
    a.legend(loc="lower right")
    b.bar([0], [3], color=EXTRA_COLORS[1])
    b.set_xticks([0], ["float32"])
    assert (EXTRA_COLORS[1].lower(), "float32", "bar") in colour_meanings(fig)
    assert colour_problems({"x__f": fig}) == []


def test_a_line_through_a_label_is_caught():
    # the simsiam raw-pixel line through the bar labels
    fig, ax = _figure()
    bars = ax.bar([0, 1], [0.95, 0.94], color=[COLORS["blocked"], COLORS["unblocked"]])
    ax.bar_label(bars, labels=["0.95", "0.94"])
    ax.axhline(0.965, label="raw pixels", **variant_style("reference"))
    ax.set_xticks([0, 1], ["blocked", "unblocked"])
    assert any("'0.95' lies on the line 'raw pixels'" in p for p in layout_problems(fig))


def test_negative_bars_from_zero_are_caught():
    # compare's em_gmm: log-likelihoods as bars hanging from 0 to -3.4
    fig, ax = _figure()
    ax.bar([0, 1], [-3.426, -3.429], color=[COLORS["blocked"], COLORS["unblocked"]])
    ax.set_xticks([0, 1], ["blocked", "unblocked"])
    assert any("hang from 0" in p for p in layout_problems(fig))


def test_generic_summary_bars_show_close_log_likelihoods_as_differences():
    from toolkit.lab.report.figures import compare_bars

    fig, (near, far) = plt.subplots(1, 2, figsize=(8, 2.5), layout="constrained")
    colours = [COLORS["blocked"], COLORS["unblocked"]]
    compare_bars(near, ["blocked", "unblocked"], [-3.426, -3.429], colours, "final LL")
    compare_bars(far, ["blocked", "unblocked"], [0.5, 0.9], colours, "accuracy")
    assert "minus blocked's -3.426" in near.get_title()
    heights = [p.get_height() for p in near.patches]
    assert heights[0] == 0 and heights[1] == pytest.approx(-0.003)
    assert [p.get_width() for p in far.patches] == [0.5, 0.9]
    assert layout_problems(fig) == []


def test_seeds_of_one_series_that_agree_are_not_two_hidden_series():
    fig, ax = _figure()
    x = np.arange(6)
    ax.plot(x, x, label="blocked", **variant_style("blocked"))
    ax.plot(x, x, label="_nolegend_", **variant_style("blocked"))  # a second seed, equal
    place_legend(ax)
    assert layout_problems(fig) == []


def test_a_line_called_identical_must_be_identical_as_drawn() -> None:
    from toolkit.lab.style import note_identical

    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    x = np.arange(5.0)
    ax.plot(x, 1.0 + 0.001 * x, label="blocked")
    ax.plot(x, 1.0 + 0.0012 * x, label="unblocked")
    ax.set_ylim(0, 2)
    assert note_identical(ax) and _claims(fig) == []
    ax.set_ylim(0.999, 1.006)  # zoomed in after the note: the lines now lie apart
    problems = _claims(fig)
    assert any("no line lies on it" in p for p in problems)
    assert any("of its axis" in p for p in problems)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot(x, x, label="a")
    ax.plot(x, x, label="b\nidentical to a: max difference 0.5")  # a number the lines lack
    assert any("quotes a max difference 0.5" in p for p in _claims(fig))
    plt.close(fig)


def _claims(fig) -> list[str]:
    from tests.lab.report.layout import _identical_claims

    fig.canvas.draw()
    return _identical_claims(fig)
