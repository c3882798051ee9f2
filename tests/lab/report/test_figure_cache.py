"""A report draws a section's figures once: they are reused while the run's files and the
drawing code are unchanged, redrawn when either changes, and every figure drawn is closed. A
backward graph laid out without graphviz is noted once, in the footer and the log."""

from __future__ import annotations

import json
import logging
import re
import shutil
from html import escape
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

import toolkit.lab.report.content as content
import toolkit.lens.graph_draw as graph_draw
from toolkit.lab.report import figure_cache, write_report
from toolkit.lab.runner import load_experiment, run_experiment


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner" /
                                              "fixtures" / "experiments"))
    try:
        return run_experiment("tiny_counter", {"n_steps": 4}, output_dir=out).run_dir
    finally:
        mp.undo()


@pytest.fixture
def run_dir(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / made.name
    shutil.copytree(made, copy)
    return copy


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sections each report drew (not reused), by figure-name prefix."""
    calls: list[str] = []
    real = content._draw_sections

    def spy(jobs, workers=1):
        calls.extend(job[3] or "<run>" for job in jobs)
        return real(jobs, workers)

    monkeypatch.setattr(content, "_draw_sections", spy)
    return calls


def test_a_second_report_reuses_the_figures_byte_for_byte(run_dir: Path, drawn: list[str]):
    experiment = load_experiment("tiny_counter")
    open_before = set(plt.get_fignums())
    first = write_report(run_dir, experiment).read_text()
    assert drawn == ["<run>"]
    assert set(plt.get_fignums()) == open_before  # every figure drawn was closed
    manifest = json.loads((run_dir / "figures" / figure_cache.MANIFEST).read_text())
    (section,) = manifest["sections"].values()
    assert [f["name"] for f in section["figures"]] == ["tiny_curve"]
    png = (run_dir / "figures" / "tiny_curve.png").read_bytes()
    second = write_report(run_dir, experiment).read_text()
    assert drawn == ["<run>"]  # nothing drawn again
    assert (run_dir / "figures" / "tiny_curve.png").read_bytes() == png
    figures = [re.findall(r"<figure.*?</figure>", html, re.S) for html in (first, second)]
    assert len(figures[0]) == 1 and figures[0] == figures[1]


@pytest.mark.parametrize("change", ["summary", "png", "manifest", "switched off"])
def test_changed_inputs_or_damaged_files_are_drawn_again(run_dir: Path, drawn: list[str],
                                                          change: str,
                                                          monkeypatch: pytest.MonkeyPatch):
    experiment = load_experiment("tiny_counter")
    write_report(run_dir, experiment)
    if change == "summary":
        summary = json.loads((run_dir / "summary.json").read_text())
        summary["blocked"]["loss"] += 1.0
        (run_dir / "summary.json").write_text(json.dumps(summary))
    elif change == "png":
        (run_dir / "figures" / "tiny_curve.png").write_bytes(b"not a png")
    elif change == "manifest":
        (run_dir / "figures" / figure_cache.MANIFEST).write_text("{broken")
    else:
        monkeypatch.setenv("TOOLKIT_FIGURE_CACHE", "0")
    write_report(run_dir, experiment)
    assert drawn == ["<run>", "<run>"], change
    assert (run_dir / "figures" / "tiny_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_the_key_covers_the_files_and_the_code(run_dir: Path):
    experiment = load_experiment("tiny_counter")
    key = figure_cache.section_key([run_dir], None, experiment, "")
    assert figure_cache.section_key([run_dir], None, experiment, "") == key
    assert figure_cache.section_key([run_dir], None, None, "") != key  # other drawing code
    assert figure_cache.section_key([run_dir], None, experiment, "x__") != key
    (run_dir / "figures").mkdir(exist_ok=True)
    (run_dir / "figures" / "other.png").write_bytes(b"x")  # the report's outputs: not inputs
    (run_dir / "report.html").write_text("x")
    assert figure_cache.section_key([run_dir], None, experiment, "") == key
    (run_dir / "artifacts" / "more.json").write_text("{}")
    assert figure_cache.section_key([run_dir], None, experiment, "") != key


def _graph_figures(run):
    import torch

    w = torch.ones(2, requires_grad=True)
    graph = graph_draw.draw_gradient_graph((w * 2).sum(), {"w": w})
    return {"graph_a": (graph, "A graph."),
            "graph_b": (graph_draw.draw_gradient_graph((w * 3).sum(), {"w": w}), "B graph.")}


def test_the_layout_fallback_is_said_once_in_the_footer_and_the_log(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    assert content._NOTE_ATTR == graph_draw.LAYOUT_NOTE
    monkeypatch.setattr(graph_draw, "_dot_binary", lambda: None)
    monkeypatch.setattr(graph_draw, "_WARNED", set())
    experiment = load_experiment("tiny_counter")
    monkeypatch.setattr(experiment.module, "figures", _graph_figures)
    with caplog.at_level(logging.WARNING):
        html = write_report(run_dir, experiment).read_text()
    note = "laid out by grandalf's Sugiyama layout: graphviz 'dot' not found on PATH"
    assert [r.name for r in caplog.records if note in r.getMessage()] == ["toolkit.lab.report.render"]
    assert html.count(escape(note)) == 1 and '<footer class="meta">' in html
    assert (run_dir / "report.md").read_text().count(note) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # reused figures keep their note
        html = write_report(run_dir, experiment).read_text()
    assert html.count(escape(note)) == 1 and len([r for r in caplog.records
                                          if note in r.getMessage()]) == 1
