"""Figures, report.html/report.md and compare, all read back from results files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from toolkit.report import default_figures, metric_groups, write_report
from toolkit.report.compare import compare_runs, format_table, write_compare
from toolkit.report.render import flatten, variant_table
from toolkit.runner import RunResults, run_experiment


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[RunResults]:
    out = tmp_path_factory.mktemp("results")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner" /
                                              "fixtures" / "experiments"))
    try:
        return [run_experiment("tiny_counter", {"n_steps": 4}, seed=s, output_dir=out,
                               finish=write_report,
                               disable_blocks=["tiny.*"]) for s in (0, 1)]
    finally:
        mp.undo()


def test_html_report_is_one_self_contained_file(runs: list[RunResults]) -> None:
    html = (runs[0].run_dir / "report.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing loaded from elsewhere
    assert "<link" not in html and "<script" not in html
    # the summary table puts blocked and unblocked side by side
    assert "<th>blocked</th><th>unblocked</th>" in html
    assert "tiny_counter" in html and "status: <b class=\"status-complete\">complete" in html


def test_markdown_report_references_existing_figures(runs: list[RunResults]) -> None:
    run_dir = runs[0].run_dir
    md = (run_dir / "report.md").read_text()
    refs = re.findall(r"\]\((figures/[^)]+\.png)\)", md)
    assert "figures/tiny_curve.png" in refs and "figures/metrics_train.png" in refs
    assert all((run_dir / ref).is_file() for ref in refs)
    assert "| loss |" in md


def test_report_is_regenerated_from_files(runs: list[RunResults]) -> None:
    run_dir = runs[1].run_dir
    for png in (run_dir / "figures").iterdir():
        png.unlink()
    (run_dir / "report.html").unlink()
    path = write_report(run_dir)
    assert path == run_dir / "report.html" and path.exists()
    assert (run_dir / "figures" / "metrics_grad.png").exists()
    with pytest.raises(FileNotFoundError, match="is not a run directory"):
        write_report(run_dir / "nope")


def test_default_figures(runs: list[RunResults]) -> None:
    run = runs[0]
    groups = metric_groups(run)
    assert groups == {"train": {"loss": {"blocked": "blocked/train/loss",
                                         "unblocked": "unblocked/train/loss"}},
                      "grad": {"cosine": {"blocked": "blocked/grad/cosine"}}}
    figures = default_figures(run)
    assert set(figures) == {"metrics_train", "metrics_grad", "summary"}
    assert all(isinstance(f, Figure) for f in figures.values())
    (ax,) = [a for a in figures["metrics_train"].axes if a.get_visible()]
    assert [line.get_label() for line in ax.get_lines()] == ["blocked", "unblocked"]
    _, values = run.metric("unblocked/train/loss")
    assert np.allclose(ax.get_lines()[1].get_ydata(), values)
    for fig in figures.values():
        plt.close(fig)


def test_flatten_and_variant_table() -> None:
    summary = {"blocked": {"a": 1.0, "b": {"c": 2}}, "unblocked": {"a": 3.0, "d": True},
               "closed_form": {"a": 1.5}, "n": 4}
    assert flatten(summary["blocked"]) == {"a": 1.0, "b.c": 2}
    columns, rows, rest = variant_table(summary)
    assert columns[:3] == ["quantity", "blocked", "unblocked"]
    assert rows[0] == ["a", "1", "3", "2"]
    assert rows[1] == ["b.c", "2", "—", ""]
    assert rest == {"closed_form.a": 1.5, "n": 4}


def test_compare_two_seeds(runs: list[RunResults], tmp_path: Path) -> None:
    table = compare_runs(runs[0].run_dir.parent)
    (row,) = [r for r in table.rows if r.quantity == "loss"]
    losses = np.array([r.summary["blocked"]["loss"] for r in runs])
    mean, std, n = row.stats("blocked")
    assert n == 2 and mean == pytest.approx(losses.mean()) and std == pytest.approx(
        losses.std(ddof=1))
    assert table.variants[:2] == ["blocked", "unblocked"]
    (n_steps,) = [r for r in table.rows if r.quantity == "n_steps"]
    assert n_steps.stats("value") == (4.0, 0.0, 2)
    text = format_table(table)
    assert "tiny_counter" in text and " ± " in text
    csv_path, html_path = write_compare(table, tmp_path)
    assert csv_path.read_text().startswith("experiment,config,seeds,quantity,variant,mean,std,n")
    assert "data:image/png;base64," in html_path.read_text()


def test_compare_groups_by_config_and_skips_incomplete(runs: list[RunResults],
                                                       tmp_path: Path) -> None:
    out = tmp_path / "r"
    for lr in (0.1, 0.2):
        run_experiment("tiny_counter", {"n_steps": 2, "lr": lr}, seed=0, output_dir=out,
                       finish=write_report)
    with pytest.raises(RuntimeError):
        run_experiment("tiny_counter", {"n_steps": 2, "fail_at": 0}, output_dir=out,
                       finish=write_report)
    table = compare_runs(out)
    assert sorted(table.groups) == [("tiny_counter", "lr=0.1"), ("tiny_counter", "lr=0.2")]
    meta = [json.loads(p.read_text()) for p in out.rglob("meta.json")]
    assert sorted(m["status"] for m in meta) == ["complete", "complete", "failed"]
