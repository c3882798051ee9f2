"""``toolkit compare`` on a sweep folder: one table with a row per config and the varied keys as
its columns (the constant ones said once above it), and every config on the same axes."""

from __future__ import annotations

import csv
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.lab.report.layout import layout_problems
from toolkit.lab.cli import main
from toolkit.lab.report.compare import (
    WIDTH,
    compare_runs,
    format_table,
    headline_metrics,
    metric_figure,
)
from toolkit.lab.report.compare_plots import curve_figure, curve_names
from toolkit.lab.report.figures import plt
from toolkit.lab.style import COLORS

REPO = Path(__file__).resolve().parents[3]
POINTS = [10, 2]  # in text order: the table orders them by value
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """configs/em_gmm_sweep.toml at a tiny size: 2 sweep points × 2 seeds, compared."""
    out = tmp_path_factory.mktemp("sweep")
    assert main(["sweep", str(REPO / "configs" / "em_gmm_sweep.toml"), "--set",
                 "params.n_iter=3", "--set", "params.n_samples=60", "--set",
                 f"sweep.params.inner_steps={POINTS}", "--seeds", "0,1", "--out", str(out),
                 "--quiet", "--no-report"]) == 0
    assert main(["compare", str(out / "em_gmm")]) == 0
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
    first, second = table["head"]
    assert first[:2] == ["inner_steps", "seeds"]  # the varied key, then the seeds
    assert "n_iter" not in first and "lr" not in first  # constant keys are no columns
    assert [row[0] for row in table["body"]] == ["2", "10"]  # a row per config, in order
    assert all(row[1] == "0, 1" for row in table["body"])
    quantities = first[2:2 + len(second) // 3]
    assert quantities[0] == "final_loglik" and second[:3] == ["blocked", "unblocked", "Δ"]
    for row in table["body"]:
        assert len(row) == len(first) - len(quantities) + len(second)
        loglik = row[2]  # two seeds: "mean [smallest, largest]"
        assert loglik.count("[") == 1 and loglik.endswith("]"), loglik
    # the constant keys are said once, above the table
    assert page.count("n_iter = 3") == 1 and page.count("n_samples = 60") == 1
    assert page.index("n_iter = 3") < page.index("<table")

    compared = compare_runs(sweep)
    plan = compared.sweep("em_gmm")
    assert plan.varying == ["inner_steps"]
    assert plan.constant["n_iter"] == 3 and plan.constant["dtype"] == "float64"
    assert compared.labels("em_gmm") == [f"inner_steps={k}" for k in sorted(POINTS)]

    with (sweep / "compare.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["config"] for r in rows} == set(compared.labels("em_gmm"))
    assert {r["n"] for r in rows} == {"2"}


def test_the_terminal_shows_the_same_one_table(sweep: Path) -> None:
    text = format_table(compare_runs(sweep))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert sum(line.startswith("em_gmm ·") for line in lines) == 1  # one heading, one table
    header = [line for line in lines if line.split()[:2] == ["inner_steps", "seeds"]]
    assert header  # the varied key and the seeds head every part of the table
    rows = [line.split()[0] for line in lines[lines.index(header[0]) + 1:][:2]]
    assert rows == ["2", "10"]


def test_every_config_shares_the_axes_of_each_metric(sweep: Path) -> None:
    table = compare_runs(sweep)
    labels = table.labels("em_gmm")
    for quantity in headline_metrics(table, "em_gmm"):
        rows = [r for r in table.rows if r.quantity == quantity and r.paired]
        fig = metric_figure(rows, "em_gmm", quantity, configs=labels)
        try:
            (ax,) = [a for a in fig.axes if a.get_visible()]  # one panel per metric
            drawn = [line.get_label().split(":")[0] for line in ax.get_lines()
                     if not line.get_label().startswith("_")]
            assert drawn == labels, quantity  # every config a line on the one y axis
            assert layout_problems(fig) == [], quantity
        finally:
            plt.close(fig)
    groups = {label: table.groups[("em_gmm", label)]["units"] for label in labels}
    names = curve_names(groups)
    assert names and names[0] == "train/loglik"
    fig = curve_figure(groups, "em_gmm", names)
    try:
        panels = [a for a in fig.axes if a.get_visible()]
        assert [a.get_title() for a in panels] == names  # one panel per metric
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
        assert layout_problems(fig) == []
    finally:
        plt.close(fig)
    figures = sorted(p.name for p in (sweep / "compare_figures").iterdir())
    assert "em_gmm__curves.png" in figures
