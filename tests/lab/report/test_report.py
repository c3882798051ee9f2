"""Figures, report.html/report.md and compare, all read back from results files."""

from __future__ import annotations

import importlib.util
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from tests.lab.report.figure_hits import text_problems
from tests.lab.report.layout import layout_problems
from toolkit.lab import RunResults, load_experiment, run_experiment
from toolkit.lab.report import default_figures, metric_groups, write_report
from toolkit.lab.report.compare import compare_runs, format_table, write_compare
from toolkit.lab.report.render import format_value, variant_table
from toolkit.lab.results.schema import flatten


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
    assert "tiny_counter" in html and "status <b class=\"status-complete\">complete" in html


class _VisibleText(HTMLParser):
    """The text a reader sees in a page: no script, style or tag."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.feed(html)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_no_number_in_the_report_has_more_than_four_significant_digits(
        runs: list[RunResults]) -> None:
    """The site's rule (docs/_hooks/digits.py), held to the report too, its details included
    (the run's start and end were shown to the microsecond, 14:10:12.935671)."""
    spec = importlib.util.spec_from_file_location(
        "report_digits", Path(__file__).parents[3] / "docs" / "_hooks" / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    for run in runs:
        text = " ".join(_VisibleText((run.run_dir / "report.html").read_text()).parts)
        assert '"started"' in text and digits.long_numbers(text) == []


def test_html_hooks_story_findings_and_captions(runs: list[RunResults]) -> None:
    html = (runs[0].run_dir / "report.html").read_text()
    assert html.count('<section class="experiment" id="tiny_counter">') == 1
    findings = re.search(r'<ul class="findings">(.*?)</ul>', html, re.S).group(1)
    assert 'data-verdict="as predicted"' in findings and "The final loss is" in findings
    assert "<b>The block</b> <code>tiny.target: target = stop_gradient(2 w)</code>" in html
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    assert captions and all(" " in c and c.endswith(".") for c in captions)  # words, not names
    # headline figure in the section, the rest (and the tables) collapsed
    section = re.search(r'<section class="experiment".*?</section>', html, re.S).group(0)
    before_details = section.split("<details>")[0]
    assert before_details.count("<figure") == 1 and "<table>" not in before_details
    assert "Details: tables" in section
    assert re.search(r"wall time [\d.]+ m?s \(experiments", html)


def test_markdown_report_references_existing_figures(runs: list[RunResults]) -> None:
    run_dir = runs[0].run_dir
    md = (run_dir / "report.md").read_text()
    refs = re.findall(r"\]\((figures/[^)]+\.png)\)", md)
    # the experiment draws its own figure; generic views of the same numbers are left out
    assert refs == ["figures/figure_1.png", "figures/tiny_curve.png"]  # Figure 1 first
    assert all((run_dir / ref).is_file() for ref in refs)
    assert "| loss |" in md


def test_report_is_regenerated_from_files(runs: list[RunResults]) -> None:
    run_dir = runs[1].run_dir
    for png in (run_dir / "figures").iterdir():
        png.unlink()
    (run_dir / "report.html").unlink()
    path = write_report(run_dir, load_experiment("tiny_counter"))
    assert path == run_dir / "report.html" and path.exists()
    assert sorted(p.name for p in (run_dir / "figures").glob("*.png")) == ["figure_1.png",
                                                                         "tiny_curve.png"]
    # without the experiment the report reads only the files: the generic figures of the
    # logged numbers, and a note saying why the experiment's own are missing
    html = write_report(run_dir).read_text()
    assert "experiment figures not drawn" in html
    md = (run_dir / "report.md").read_text()
    assert "tiny_curve.png" not in md and "figures/metrics_train.png" in md
    # the report never deletes: the figure drawn before stays, unreferenced, beside the new
    assert {"tiny_curve.png", "metrics_train.png"} <= {p.name for p in
                                                       (run_dir / "figures").iterdir()}
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
    for fig in figures.values():
        assert text_problems(fig) == []
        assert layout_problems(fig) == []
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
    assert variant_table({"blocked": {"x": 0.5}, "unblocked": {"x": 0.5}})[1] == [
        ["x", "0.5", "0.5", "0 (equal)"]]
    assert rows[1] == ["b.c", "2", "—", ""]
    assert rest == {"closed_form.a": 1.5, "n": 4}


def test_compare_two_seeds(runs: list[RunResults], tmp_path: Path) -> None:
    table = compare_runs(runs[0].run_dir.parent)
    stats = table.stats().droplevel(["experiment", "config"])
    losses = np.array([r.summary["blocked"]["loss"] for r in runs])
    loss = stats.loc[("loss", "blocked")]
    assert loss.n == 2 and loss["mean"] == pytest.approx(losses.mean())
    assert loss["std"] == pytest.approx(losses.std(ddof=1))
    assert tuple(stats.loc[("n_steps", "value"), ["mean", "std", "n"]]) == (4.0, 0.0, 2)
    text = format_table(table)
    assert "tiny_counter · 1 config, 2 runs pooled" in text and "seeds 0, 1" in text
    lo, hi = sorted(losses)
    assert f"{losses.mean():.4g} [{lo:.3g}, {hi:.3g}]" in text
    csv_path, html_path = write_compare(table, tmp_path)
    assert csv_path.read_text().startswith(
        "experiment,config,seeds,quantity,variant,mean,std,n,min,max")
    assert "data:image/png;base64," in html_path.read_text()


def test_compare_counts_each_seed_once(tmp_path: Path) -> None:
    out = tmp_path / "dup"
    for _ in range(3):
        run_experiment("tiny_counter", {"n_steps": 2}, seed=0, output_dir=out)
    table = compare_runs(out)
    assert table.seeds("tiny_counter", "default") == [0] and len(table.duplicates) == 2
    assert table.stats().xs(("loss", "blocked"), level=("quantity", "variant"))["n"].item() == 1
    text = format_table(table)
    assert "2 runs with a seed already counted were left out" in text
    assert "[1 seed]" in text  # no range: one seed, and the cell says so


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
    assert sorted(table.runs) == [("tiny_counter", "lr=0.1"), ("tiny_counter", "lr=0.2")]
    meta = [json.loads(p.read_text()) for p in out.rglob("meta.json")]
    assert sorted(m["status"] for m in meta) == ["complete", "complete", "failed"]


@pytest.mark.parametrize(("value", "key", "text"), [
    (0.0014461230000506475, "x", "0.001446"), (1059636, "peak_bytes", "1.011 MiB"),
    (0.0421, "timers.fit", "42.1 ms"), (12.5, "wall_seconds", "12.5 s"), (3, "n_iter", "3"),
    (True, "converged", "yes"), (None, "x", "—"), (2.5e-13, "rel_err", "2.5e-13"),
    (1.5, "time_ratio", "1.5"), ([1.0, 0.5], "values", "[1, 0.5]"),
])
def test_numbers_have_four_digits_and_units(value, key, text) -> None:
    assert format_value(value, key) == text


def test_text_problems_finds_overlap_and_clipping() -> None:
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    ax.set_title("a title")
    assert text_problems(fig) == []
    ax.text(0.5, 1.0, "a title that sits on the other one", transform=ax.transAxes,
            ha="center", va="bottom")
    fig.text(0.98, 0.5, "this text runs off the right edge")
    problems = text_problems(fig)
    assert any("overlaps" in p for p in problems)
    assert any("'this text runs off the right edge' leaves the canvas" == p for p in problems)
    plt.close(fig)


def test_report_of_an_interrupted_run_has_no_warnings(tmp_path: Path, recwarn) -> None:
    run = run_experiment("tiny_counter", {"n_steps": 2}, output_dir=tmp_path)
    meta_path = run.run_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = "interrupted"
    meta_path.write_text(json.dumps(meta))
    (run.run_dir / "summary.json").write_text("{}")
    (run.run_dir / "findings.json").unlink()
    html = write_report(run.run_dir).read_text()
    assert "This run is interrupted" in html and "figures() failed" not in html
    assert not [w for w in recwarn if "matplotlib" in str(w.filename)]


def test_report_over_seeds_shows_counts_and_bands(runs: list[RunResults]) -> None:
    from toolkit.lab import SeedGroup, write_group
    from toolkit.lab.report.figures import variant_curves

    folder = write_group([r.run_dir for r in runs])
    html = write_report(folder).read_text()
    assert (folder / "report.md").is_file() and (folder / "figures").is_dir()
    item = re.search(r'<ul class="findings">(.*?)</ul>', html, re.S).group(1)
    # the loss's prediction holds in both seeds; its numbers are the mean [range]
    assert 'data-seeds="2/2"' in item and "held in 2 of 2 seeds" in item
    losses = sorted(r.summary["blocked"]["loss"] for r in runs)
    assert f"[{losses[0]:.3g}, {losses[1]:.3g}]" in item
    assert "seeds 0, 1" in html and "seed group" in html
    # figures see every seed: a line (the mean) and a band (the range)
    view = SeedGroup(folder).results()
    assert [r.seed for r in view.replicates] == [0, 1]
    fig, ax = plt.subplots()
    (line,) = variant_curves(ax, view, "train/loss", ["blocked"])
    per_seed = [r.metric("blocked/train/loss")[1] for r in runs]
    assert np.allclose(line.get_ydata(), np.mean(per_seed, axis=0))
    assert len(ax.collections) == 1  # the band
    plt.close(fig)
    fig, ax = plt.subplots()
    variant_curves(ax, runs[0], "train/loss", ["blocked"])  # one seed: the line alone
    assert len(ax.collections) == 0
    plt.close(fig)


def test_draw_spread_checks_its_shapes() -> None:
    from toolkit.lab.report.figures import draw_spread

    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=r"draw_spread: ys must be one series of len\(x\) = 3 "
                                         r"per seed, got shape \(2, 2\)"):
        draw_spread(ax, [0, 1, 2], [[1, 2], [3, 4]])
    plt.close(fig)


@pytest.mark.slow
def test_a_showcase_report_drawn_again_is_the_same(tmp_path: Path) -> None:
    from toolkit.lab.plan.config import plan

    (spec,) = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                   ['params.experiments=["tiny_counter", "td_learning"]'],
                   output_dir=str(tmp_path))
    run = run_experiment(spec.config)
    figures = run.run_dir / "figures"
    first = write_report(run.run_dir).read_text()
    names = sorted(p.name for p in figures.iterdir())
    again = write_report(run.run_dir).read_text()
    assert sorted(p.name for p in figures.iterdir()) == names
    assert names and any(n.startswith("td_learning__") for n in names)
    strip = lambda html: re.sub(r"wall time [^<]*", "", html)  # noqa: E731
    assert strip(again) == strip(first)  # same figures, byte for byte


def test_sections_drawn_in_processes_are_the_ones_drawn_here(tmp_path: Path,
                                                             monkeypatch) -> None:
    """The forked processes of ``draw_all`` give the same figures, byte for byte, as
    drawing each section in this process (and a daemonic process draws them itself)."""
    import functools
    import multiprocessing

    from toolkit.lab.report import render

    run = run_experiment("tiny_counter", {"n_steps": 3}, seed=0, output_dir=tmp_path)
    jobs = [functools.partial(render.section_figures, run, None,
                              load_experiment("tiny_counter"))] * 4
    monkeypatch.setattr(render, "PARALLEL_SECTIONS", 2)
    monkeypatch.setattr(render.os, "sched_getaffinity", lambda _: {0, 1, 2}, raising=False)
    monkeypatch.setattr(render, "_others", lambda: 0.5)
    here = [[f.png for f in figs] for figs, _ in (job() for job in jobs)]
    forked = render.draw_all(jobs)
    assert [[f.png for f in figs] for figs, _ in forked] == here
    assert here[0] and all(problems == [] for _, problems in forked)
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)
    assert [[f.png for f in figs] for figs, _ in render.draw_all(jobs)] == here
