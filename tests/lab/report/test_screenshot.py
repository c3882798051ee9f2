"""The screenshot script renders a report in headless Chromium (skipped where there is none)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "screenshot_report.py"


def _load():
    spec = importlib.util.spec_from_file_location("screenshot_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # a Chromium process
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_screenshot_of_a_page(tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    html.write_text("<html><body style='margin:0'><div style='height:300px;background:#036'>"
                    "</div><details><summary>more</summary><div style='height:500px;background:#630'></div>"
                    "</details></body></html>")
    module = _load()
    width, height = module.screenshot(html, tmp_path / "r.png", width=400, height=1500)
    assert width == 400 and 300 <= height < 400  # trimmed to the content
    _, expanded = module.screenshot(html, tmp_path / "e.png", width=400, height=1500,
                                    expand=True)
    assert expanded > 700


def test_missing_file_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert _load().main([str(tmp_path / "nope.html")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow  # a Chromium process
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_a_report_opens_with_its_figure_within_the_first_screen(tmp_path: Path) -> None:
    from toolkit.lab import run_experiment
    from toolkit.lab.report import write_report

    run = run_experiment("tiny_counter", {"n_steps": 4}, seed=0, output_dir=tmp_path,
                         finish=write_report, disable_blocks=["tiny.*"])
    box = _load().element_box(run.run_dir / "report.html", "figure img", width=1400,
                              height=900)
    assert box is not None
    assert 0 < box["top"] and box["bottom"] <= 900, box  # whole, on the first laptop screen
