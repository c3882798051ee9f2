"""``toolkit compare`` on a sweep folder: one table with a row per config and the varied keys as
its columns (the constant ones said once above it), and every config on the same axes."""

from __future__ import annotations

import csv
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection

from tests.lab.report.figure_hits import text_problems
from tests.lab.report.layout import layout_problems
from toolkit.lab.cli import main
from toolkit.lab.report.compare import (
    DIFF,
    WIDTH,
    Comparison,
    Sweep,
    compare_runs,
    curve_figure,
    curve_names,
    format_table,
    headline_metrics,
    metric_figure,
    sweep_figure,
    swept_keys,
)
from toolkit.lab.report.figures import plt
from toolkit.lab.style import COLORS, variant_style

REPO = Path(__file__).resolve().parents[3]
POINTS = [10, 2]  # in text order: the table orders them by value
SEEDS = (0, 1)
TINY = ["--set", "params.n_iter=3", "--set", "params.n_samples=60"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """configs/em_gmm_sweep.toml at a tiny size: 2 sweep points × 2 seeds, after an earlier
    run of configs/em_gmm.toml (other parameters) in the same folder, compared."""
    out = tmp_path_factory.mktemp("sweep")
    earlier = ["run", str(REPO / "configs" / "em_gmm.toml"), *TINY, "--seeds", "0", "--out",
               str(out), "--quiet", "--no-report"]
    later = ["sweep", str(REPO / "configs" / "em_gmm_sweep.toml"), *TINY, "--set",
             f"sweep.params.inner_steps={POINTS}", "--seeds", "0,1", "--out", str(out),
             "--quiet", "--no-report"]
    for args in (earlier, later):  # two commands, as a run records them (sys.argv)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "argv", ["toolkit", *args])
            assert main(args) == 0
    assert main(["compare", str(out / "em_gmm"), "--latest"]) == 0
    return out / "em_gmm"


class _Tables(HTMLParser):
    """Every <table> of a page: its header rows and body rows, as text cells."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list[list[str]]]] = []
        self.part = "head"
        self.text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append({"head": [], "body": []})
        elif tag in ("thead", "tbody"):
            self.part = "head" if tag == "thead" else "body"
        elif tag == "tr" and self.tables:
            self.tables[-1][self.part].append([])
        elif tag in ("th", "td") and self.tables:
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self.text is not None:
            self.tables[-1][self.part][-1].append("".join(self.text).strip())
            self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def test_one_table_with_the_varied_keys_as_columns(sweep: Path) -> None:
    page = (sweep / "compare.html").read_text(encoding="utf-8")
    parser = _Tables()
    parser.feed(page)
    (table,) = parser.tables  # one table for the whole sweep, not one per config
    (head,) = table["head"]
    assert head[:3] == ["inner_steps", "seeds", "quantity"]  # the varied key first
    assert "n_iter" not in head and "lr" not in head  # constant keys are no columns
    assert head[3:6] == ["blocked", "unblocked", "Δ"]
    points = list(dict.fromkeys(row[0] for row in table["body"]))
    assert points == ["2", "10"]  # the configs in the order of their values
    assert all(row[1] == "0, 1" for row in table["body"])
    (loglik,) = [row for row in table["body"] if row[:3] == ["2", "0, 1", "final_loglik"]]
    assert loglik[3].count("[") == 1 and loglik[3].endswith("]"), loglik  # mean [lo, hi]
    # the constant keys are said once, above the table; the runs pooled are named
    assert "<h1>Comparison of 4 runs in 2 configs</h1>" in page
    assert page.count("n_iter = 3") == 1 and page.count("n_samples = 60") == 1
    assert page.index("n_iter = 3") < page.index("<table")
    compared = compare_runs(sweep, latest=True)
    for runs in compared.runs.values():
        assert all(unit.run_dir.name in page for unit in runs)
    plan = compared.sweep("em_gmm")
    assert plan.varying == ["inner_steps"]
    assert plan.constant["n_iter"] == 3 and plan.constant["dtype"] == "float64"
    assert compared.labels("em_gmm") == [f"inner_steps={k}" for k in sorted(POINTS)]
    with (sweep / "compare.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["config"] for r in rows} == set(compared.labels("em_gmm"))
    assert {r["n"] for r in rows} == {"2"}


def test_the_earlier_run_is_a_config_of_its_own_unless_latest(sweep: Path) -> None:
    everything = compare_runs(sweep)
    assert len(everything.labels("em_gmm")) == 3  # the earlier run differs in several keys
    assert "inner_steps" in everything.sweep("em_gmm").varying
    text = format_table(everything, WIDTH)
    assert "em_gmm · 3 configs, 5 runs pooled; configs differ in" in text
    latest = format_table(compare_runs(sweep, latest=True), WIDTH)
    assert "em_gmm · 2 configs, 4 runs pooled; configs differ in inner_steps" in latest


def test_the_terminal_shows_each_configs_headline(sweep: Path) -> None:
    table = compare_runs(sweep, latest=True)
    for width in (WIDTH, 80):
        lines = format_table(table, width).splitlines()
        assert max(len(line) for line in lines) <= width
        heads = [line.strip() for line in lines if "· seeds" in line]
        assert heads == ["inner_steps=2 · seeds 0, 1", "inner_steps=10 · seeds 0, 1"]
    assert len(format_table(table, WIDTH).splitlines()) < 30  # headlines, not every value


def test_every_config_shares_the_axes_and_every_text_is_inside(sweep: Path) -> None:
    table = compare_runs(sweep, latest=True)
    labels = table.labels("em_gmm")
    for quantity in headline_metrics(table, "em_gmm"):
        fig = metric_figure(table, "em_gmm", quantity)
        try:
            (ax,) = fig.axes  # one panel per metric, every config on its one y axis
            styles = {(line.get_color(), line.get_marker()) for line in ax.get_lines()
                      if line.get_marker() not in ("None", "", None)}
            assert len(styles) == len(labels), quantity
            (legend,) = fig.legends  # a legend entry per config: its colour and marker
            entries = [t.get_text().split("\n")[0] for t in legend.get_texts()]
            assert entries == labels, quantity
            assert {(h.get_color(), h.get_marker()) for h in legend.legend_handles} == styles
            assert text_problems(fig) == [], quantity  # no text clipped or overlapping
            assert layout_problems(fig) == [], quantity
        finally:
            plt.close(fig)
    groups = {label: table.runs[("em_gmm", label)] for label in labels}
    names = curve_names(groups)
    assert names and names[0] == "train/loglik"
    fig = curve_figure(groups, "em_gmm", names)
    try:
        panels = [a for a in fig.axes if a.get_visible()]
        assert [a.get_title() for a in panels] == names  # one panel per metric
        assert all(a.bbox.width >= 300 for a in panels)  # at 100 dpi: no thumbnails
        for ax in panels:
            drawn = {line.get_label() for line in ax.get_lines()}
            assert drawn == {f"{label} ({variant})" for label in labels
                             for variant in ("blocked", "unblocked")}, ax.get_title()
            styles = {line.get_label(): (line.get_color(), line.get_linestyle(),
                                         line.get_marker()) for line in ax.get_lines()}
            # colour and line style say the variant (toolkit.lab.style), the marker the config
            for label in labels:
                assert styles[f"{label} (blocked)"][:2] == (COLORS["blocked"], "-")
                assert styles[f"{label} (unblocked)"][:2] == (COLORS["unblocked"], "--")
                assert styles[f"{label} (blocked)"][2] == styles[f"{label} (unblocked)"][2]
            assert len({styles[f"{label} (blocked)"][2] for label in labels}) == len(labels)
        (legend,) = fig.legends
        assert [t.get_text() for t in legend.get_texts()][:len(labels)] == labels
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)
    figures = sorted(p.name for p in (sweep / "compare_figures").iterdir())
    assert "em_gmm__curves.png" in figures


def test_the_page_opens_with_the_metrics_against_the_swept_key(sweep: Path) -> None:
    """Issue 72: the question of a sweep is how the gap moves with what it sweeps."""
    page = (sweep / "compare.html").read_text(encoding="utf-8")
    ids = re.findall(r'<figure id="fig-([^"]+)"', page)
    assert ids[0] == "em_gmm__sweep_inner_steps", ids  # first; the per-config slopes after
    assert ids.index("em_gmm__final_loglik") > 0
    table = compare_runs(sweep, latest=True)
    assert swept_keys(table, "em_gmm") == ["inner_steps"]
    headline = headline_metrics(table, "em_gmm")
    fig = sweep_figure(table, "em_gmm", "inner_steps", headline)
    try:
        axes = [a for a in fig.axes if a.get_visible()]
        assert len(axes) == 2 * len(headline)  # value | Δ, a row per headline metric
        assert [a.get_xlabel() for a in axes[-2:]] == ["inner_steps", "inner_steps"]
        for ax in axes:
            assert [t.get_text() for t in ax.get_xticklabels()] == [str(k) for k in
                                                                    sorted(POINTS)]
        values = table.of("em_gmm")
        for row, quantity in enumerate(headline):
            left, right = axes[2 * row], axes[2 * row + 1]
            assert left.get_title() == quantity and right.get_title() == f"Δ {quantity}"
            drawn = {line.get_color(): line for line in left.get_lines()}
            assert set(drawn) == {COLORS["blocked"], COLORS["unblocked"]}
            assert drawn[COLORS["unblocked"]].get_linestyle() == \
                variant_style("unblocked")["linestyle"]
            (delta,) = [line for line in right.get_lines() if len(line.get_xdata()) > 1
                        and line.get_marker() not in ("None", "")]
            mine = values[(values.quantity == quantity) & (values.variant == DIFF)]
            expected = [mine[mine.config == f"inner_steps={k}"].value.mean()
                        for k in sorted(POINTS)]
            assert np.allclose(delta.get_ydata(), expected)  # the mean of the paired Δ
            assert list(delta.get_xdata()) == sorted(POINTS)
            assert len(right.collections) == 1 and len(left.collections) == 2  # the bands
        legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
        assert any(t.startswith("Δ = unblocked − blocked") for t in legend_texts)
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)
    everything = compare_runs(sweep)  # with the earlier run, which differs in several keys
    assert swept_keys(everything, "em_gmm") == ["inner_steps"]


def _grid() -> Comparison:
    """A 2 × 2 grid (dtype × lr) of two seeds each: Δ grows with lr, more in float32."""
    records, points = [], {}
    for dtype in ("float32", "float64"):
        for lr in ("0.1", "0.2"):
            label = f"dtype={dtype}, lr={lr}"
            points[label] = {"dtype": dtype, "lr": lr}
            for seed in (0, 1):
                b = 1.0 + seed / 10
                u = b + float(lr) * (2 if dtype == "float32" else 1)
                records += [{"experiment": "exp", "config": label, "seed": seed,
                             "quantity": "loss", "variant": v, "value": x}
                            for v, x in (("blocked", b), ("unblocked", u), (DIFF, u - b))]
    return Comparison(pd.DataFrame(records), {"exp": Sweep(["dtype", "lr"], {}, points)},
                      {("exp", label): [] for label in points})


def test_each_key_of_a_grid_gets_its_figure_the_others_their_markers() -> None:
    table = _grid()
    assert swept_keys(table, "exp") == ["dtype", "lr"]
    fig = sweep_figure(table, "exp", "dtype", ["loss"])
    try:
        left, right = fig.axes
        assert [t.get_text() for t in left.get_xticklabels()] == ["float32", "float64"]
        deltas = [line for line in right.get_lines() if line.get_marker() not in ("None", "")]
        assert len(deltas) == 2 and len({line.get_marker() for line in deltas}) == 2
        assert sorted(tuple(np.round(line.get_ydata(), 6)) for line in deltas) == [
            (0.2, 0.1), (0.4, 0.2)]
        legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "lr=0.1" in legend_texts and "lr=0.2" in legend_texts
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)


def test_a_lone_point_of_another_group_shows_its_range_as_a_bar() -> None:
    table = _grid()
    lone = "dtype=float16, lr=0.1"  # float16 only at lr 0.1: one point in the lr figure
    table.sweeps["exp"].points[lone] = {"dtype": "float16", "lr": "0.1"}
    table.runs[("exp", lone)] = []
    table.values = pd.concat([table.values, pd.DataFrame(
        [{"experiment": "exp", "config": lone, "seed": seed, "quantity": "loss",
          "variant": v, "value": x} for seed, (b, u) in enumerate([(1.0, 1.5), (1.2, 2.0)])
         for v, x in (("blocked", b), ("unblocked", u), (DIFF, u - b))])], ignore_index=True)
    fig = sweep_figure(table, "exp", "lr", ["loss"])
    try:
        _, right = fig.axes
        bars = [c for c in right.collections if isinstance(c, LineCollection)
                and np.allclose(c.get_segments()[0][:, 0], 0.1)]
        (bar,) = bars
        assert sorted(bar.get_segments()[0][:, 1]) == pytest.approx([0.5, 0.8])  # Δ's range
        assert text_problems(fig) == [] and layout_problems(fig) == []
    finally:
        plt.close(fig)
