"""The figure pieces experiments share (``toolkit.lab.report.figures``), on a real run."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.ticker import MaxNLocator

from tests.lab.report.figure_hits import text_problems
from tests.lab.report.layout import layout_problems
from toolkit.lab import RunResults, SeedGroup, run_experiment, write_group
from toolkit.lab.report.figures import (
    image_grid,
    legend_below,
    step_axes,
    subplots,
    tile_images,
    variant_bars,
    variant_curves,
)
from toolkit.lab.style import COLORS, EXTRA_COLORS, MAX_WIDTH_IN, note_identical, variant_style


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[RunResults]:
    out = tmp_path_factory.mktemp("plots")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner" /
                                              "fixtures" / "experiments"))
    try:
        return [run_experiment("tiny_counter", {"n_steps": 4}, seed=s, output_dir=out,
                               disable_blocks=["tiny.*"]) for s in (0, 1)]
    finally:
        mp.undo()


def test_subplots_lay_out_a_report_figure() -> None:
    fig, axes = subplots(2, 3, figsize=(9.0, 4.0), squeeze=False, sharey="row")
    assert axes.shape == (2, 3) and tuple(fig.get_size_inches()) == (9.0, 4.0)
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    assert axes[0, 1].get_shared_y_axes().joined(axes[0, 0], axes[0, 1])


def test_step_axes_labels_whole_number_ticks_and_grid() -> None:
    fig, (ax, plain) = plt.subplots(1, 2)
    for a in (ax, plain):
        a.plot([0, 1, 2], [1.0, 0.5, 0.25])
    assert step_axes(ax, "loss", "EM iteration", ylabel="nats") is ax
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("loss", "EM iteration", "nats")
    assert ax.title.get_fontsize() == 10
    locator = ax.xaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator) and locator._integer
    assert all(line.get_visible() for line in ax.get_xgridlines())
    step_axes(plain, "sweeps", title_size=None, grid=False)
    default = fig.add_subplot(2, 2, 4)
    default.set_title("matplotlib's size")
    assert plain.title.get_fontsize() == default.title.get_fontsize() != 10
    assert not any(line.get_visible() for line in plain.get_xgridlines())


def test_step_axes_notes_curves_that_lie_on_each_other() -> None:
    _fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1.0, 2.0, 3.0], label="blocked")
    ax.plot([0, 1, 2], [1.0, 2.0, 3.0], label="unblocked")
    step_axes(ax, identical=True)
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("identical to" in label for label in labels), labels


def test_variant_curves_draw_each_logged_variant_in_its_style(runs) -> None:
    _fig, ax = plt.subplots()
    lines = variant_curves(ax, runs[0], "train/loss", ["blocked", "unblocked", "sampled"],
                           labels={"unblocked": "without the block"},
                           styles={"unblocked": {"marker": "s"}}, lw=2)
    # "sampled" logged nothing: skipped, not an error
    assert [line.get_label() for line in lines] == ["blocked", "without the block"]
    assert [line.get_color() for line in lines] == [COLORS["blocked"], COLORS["unblocked"]]
    assert lines[1].get_marker() == "s" and lines[0].get_linewidth() == 2
    steps, values = runs[0].metric("unblocked/train/loss")
    np.testing.assert_array_equal(lines[1].get_xdata(), steps)
    np.testing.assert_allclose(lines[1].get_ydata(), values)
    assert len(ax.collections) == 0  # one seed: no band


def test_variant_curves_of_a_seed_group_show_the_mean_and_a_band(runs) -> None:
    view = SeedGroup(write_group([r.run_dir for r in runs])).results()
    _fig, ax = plt.subplots()
    (line,) = variant_curves(ax, view, "train/loss", ["blocked"])
    per_seed = [r.metric("blocked/train/loss")[1] for r in runs]
    np.testing.assert_allclose(line.get_ydata(), np.mean(per_seed, axis=0))
    assert len(ax.collections) == 1


class _Logged:
    """A stand-in for a run that logged the metrics ``series`` (key -> values at steps 0..)."""

    def __init__(self, series: dict[str, list[float]]) -> None:
        self.series, self.replicates = series, [self]

    def metric_keys(self) -> list[str]:
        return list(self.series)

    def metric(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return np.arange(len(self.series[key])), np.asarray(self.series[key])


def test_variant_curves_give_further_variants_one_colour_each() -> None:
    run = _Logged({f"{v}/train/loss": [3.0, 2.0, 1.0] for v in ("blocked", "sampled", "pcd")})
    _fig, (left, right) = plt.subplots(1, 2)
    others: list[str] = []
    lines = variant_curves(left, run, "train/loss", ["blocked", "sampled", "pcd"],
                           others=others)
    assert [line.get_color() for line in lines] == [COLORS["blocked"], *EXTRA_COLORS[:2]]
    (again,) = variant_curves(right, run, "train/loss", ["pcd"], others=others)
    assert again.get_color() == EXTRA_COLORS[1] and others == ["sampled", "pcd"]


def test_variant_curves_reject_a_single_string(runs) -> None:
    _fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=r"variant_curves: variants must be a list of variant "
                                         r"names, got the string 'blocked'"):
        variant_curves(ax, runs[0], "train/loss", "blocked")


def test_legend_below_lists_each_entry_once_under_the_panels() -> None:
    fig, axes = plt.subplots(1, 2, layout="constrained")
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="blocked", **variant_style("blocked"))
        ax.plot([0, 1], [1, 0], label="unblocked", **variant_style("unblocked"))
    legend = legend_below(fig, axes, ncols=2)
    assert [t.get_text() for t in legend.get_texts()] == ["blocked", "unblocked"]
    assert legend in fig.legends
    assert layout_problems(fig) == [] and text_problems(fig) == []


@pytest.mark.parametrize("width", [9.0, 4.5])
def test_legend_below_keeps_long_notes_inside_the_figure(width: float) -> None:
    """A curve identical to another in one panel only gets a note naming that panel: long,
    so it is wrapped, and a legend too wide for the figure takes fewer columns rather than
    leave the canvas (the vq_vae figure at TOOLKIT_TEST_SEED=233 did)."""
    fig, axes = plt.subplots(1, 2, figsize=(width, 4), layout="constrained")
    names = ["blocked", "unblocked", "without straight through", "without codebook",
             "without commitment"]
    others: list[str] = []  # one colour per name across the panels
    for i, ax in enumerate(axes):
        ax.set_title(["test reconstruction MSE", "codebook perplexity"][i])
        for j, name in enumerate(names):
            y = [0.0, 1.0] if (i == 0 and name == "unblocked") else [j, j + 1.0 + i]
            ax.plot([0, 1], y, label=name, **variant_style(name, others))
        ax.plot([0, 1], [0.0, 1.0 + 1e-5], label="predicting the mean digit",
                **variant_style("reference"))
        note_identical(ax)
    legend = legend_below(fig, axes)
    texts = [t.get_text() for t in legend.get_texts()]
    assert any("(test reconstruction MSE)" in " ".join(t.split("\n")) for t in texts), texts
    assert all(len(line) <= 44 for t in texts for line in t.split("\n")[1:]), texts
    assert legend.get_window_extent().width <= fig.bbox.width
    assert layout_problems(fig) == [] and text_problems(fig) == []


def test_variant_bars_one_value_per_category() -> None:
    _fig, ax = plt.subplots()
    bars = variant_bars(ax, ["A", "B", "C"], {"blocked": [0.5, 1.0, 0.0],
                                              "unblocked": [0.5, 0.75, 0.25]},
                        labels={"blocked": "TD"}, width=0.36, step=0.38)
    heights = {v: [p.get_height() for p in c.patches] for v, c in bars.items()}
    assert heights == {"blocked": [0.5, 1.0, 0.0], "unblocked": [0.5, 0.75, 0.25]}
    centres = {v: [p.get_x() + p.get_width() / 2 for p in c.patches] for v, c in bars.items()}
    np.testing.assert_allclose(centres["blocked"], np.arange(3) - 0.19)
    np.testing.assert_allclose(centres["unblocked"], np.arange(3) + 0.19)
    assert bars["blocked"].get_label() == "TD" and bars["unblocked"].get_label() == "unblocked"
    assert bars["blocked"].patches[0].get_facecolor()[:3] == pytest.approx(
        plt.matplotlib.colors.to_rgb(COLORS["blocked"]))
    assert bars["blocked"].errorbar is None
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B", "C"]


def test_variant_bars_over_seeds_draw_the_mean_and_the_range() -> None:
    _fig, ax = plt.subplots()
    per_seed = [[0.9, 0.5], [0.7, 0.6], [0.8, 0.4]]
    bars = variant_bars(ax, ["z", "features"], {"blocked": per_seed})
    np.testing.assert_allclose([p.get_height() for p in bars["blocked"].patches], [0.8, 0.5])
    _, _, (whiskers,) = bars["blocked"].errorbar.lines
    ends = np.asarray(whiskers.get_segments())[:, :, 1]  # (bar, [low, high])
    np.testing.assert_allclose(ends, [[0.7, 0.9], [0.4, 0.6]])


def test_variant_bars_check_the_number_of_values() -> None:
    _fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=r"variant_bars: values\['blocked'\] must hold 3 "
                                         r"numbers .* got shape \(2,\)"):
        variant_bars(ax, ["A", "B", "C"], {"blocked": [1.0, 2.0]})


def test_tile_images_frames_each_image_in_a_near_square_grid() -> None:
    images = np.arange(5 * 6, dtype=float).reshape(5, 6)  # five 2×3 images
    mosaic = tile_images(images, (2, 3))
    assert mosaic.shape == (2 * 3 + 1, 3 * 4 + 1)  # 3 columns, 2 rows, 1-pixel borders
    np.testing.assert_array_equal(mosaic[1:3, 1:4], images[0].reshape(2, 3))
    np.testing.assert_array_equal(mosaic[4:6, 5:8], images[4].reshape(2, 3))  # row 2, col 2
    assert np.isnan(mosaic[0]).all() and np.isnan(mosaic[:, 0]).all()
    assert np.isnan(mosaic[4:6, 9:12]).all()  # the sixth cell is empty
    assert (~np.isnan(mosaic)).sum() == images.size
    np.testing.assert_array_equal(tile_images(images.reshape(5, 2, 3), (2, 3)), mosaic)
    assert np.isnan(tile_images(np.zeros((0, 6)), (2, 3))).all()


def test_tile_images_checks_the_image_size() -> None:
    with pytest.raises(ValueError, match=r"tile_images: images must be \(n, 6\) or \(n, 2, 3\) "
                                         r"for shape \(2, 3\), got shape \(4, 5\)"):
        tile_images(np.zeros((4, 5)), (2, 3))


def test_image_grid_rows_labels_and_size() -> None:
    rng = np.random.default_rng(0)
    digits = rng.random((6, 64))
    fig, axes = image_grid([("test digit", digits), ("reconstruction", digits[::-1])],
                           shape=(8, 8), cell=(0.9, 0.95), pad=(1.8, 0.5),
                           title="digits and reconstructions",
                           col_titles=[f"#{i}" for i in range(6)],
                           label_kw={"rotation": 0, "ha": "right", "va": "center"})
    assert axes.shape == (2, 6)
    assert tuple(fig.get_size_inches()) == pytest.approx((0.9 * 6 + 1.8, 0.95 * 2 + 0.5))
    assert [ax.get_ylabel() for ax in axes[:, 0]] == ["test digit", "reconstruction"]
    assert axes[0, 0].yaxis.label.get_rotation() == 0
    assert [ax.get_title() for ax in axes[0]] == [f"#{i}" for i in range(6)]
    assert all(not ax.get_xticks().size and not ax.get_yticks().size for ax in axes.ravel())
    image = axes[1, 0].get_images()[0]
    np.testing.assert_array_equal(image.get_array(), digits[-1].reshape(8, 8))
    assert image.get_clim() == (0, 1) and image.get_cmap().name == "gray_r"
    assert fig.get_suptitle() == "digits and reconstructions"
    assert layout_problems(fig) == [] and text_problems(fig) == []


def test_image_grid_is_at_most_the_report_width_and_scales_weights_symmetrically() -> None:
    weights = [np.array([[-0.5, 0.2], [0.1, 0.3]]), np.array([[0.0, 2.0], [np.nan, 1.0]]),
               np.full((2, 2), np.nan)]
    fig, axes = image_grid([("filters", weights)] * 2, cell=(4.0, 2.0), pad=(1.0, 0.5),
                           cmap="PiYG", symmetric=True)
    assert fig.get_figwidth() == MAX_WIDTH_IN
    assert [ax.get_images()[0].get_clim() for ax in axes[0]] == [(-0.5, 0.5), (-2.0, 2.0),
                                                                 (-1.0, 1.0)]


def test_image_grid_needs_images() -> None:
    with pytest.raises(ValueError, match="image_grid: rows must name at least one"):
        image_grid([])
    with pytest.raises(ValueError, match="image_grid: rows must hold at least one image"):
        image_grid([("empty", [])])
