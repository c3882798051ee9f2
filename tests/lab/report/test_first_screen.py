"""What a reader sees first (issue 65): one sentence of what was found, then Figure 1, whole,
on a laptop's first screen; ``findings.md`` opens with the same sentence; nothing on the page
runs out of its box."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
from html import unescape
from pathlib import Path

import pytest

from toolkit.lab import Finding, run_experiment
from toolkit.lab.report import write_report
from toolkit.lab.results.findings import aggregate, found_sentence

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "screenshot_report.py"
chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")


def _screenshots():
    spec = importlib.util.spec_from_file_location("screenshot_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdicts(*holds: bool | None) -> list:
    per_seed = {0: {"x": [Finding(f"Finding number {i} says {{v}}.", h,
                                  basis="a theorem" if h is not None else "", values={"v": i})
                          for i, h in enumerate(holds)]}}
    return aggregate(per_seed)[0]["x"]


def test_the_sentence_tallies_in_words_and_names_what_did_not_hold() -> None:
    assert found_sentence({}) == ""
    assert found_sentence({"a": _verdicts(True, True, None), "b": _verdicts(True)}) == (
        "Across 2 experiments, of 4 findings, 3 came out as predicted, 0 did not hold, "
        "and 1 is a measurement without a prediction.")
    assert found_sentence({"simsiam": _verdicts(True, False), "em": _verdicts(False)}) == (
        "Across 2 experiments, of 3 findings, 1 came out as predicted and 2 did not hold "
        "(simsiam: Finding number 1 says 1; em: Finding number 0 says 0).")


@pytest.fixture(scope="module")
def showcase(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A showcase of two small experiments, reported (its run folder)."""
    from toolkit.lab.plan.config import plan

    out = tmp_path_factory.mktemp("first_screen")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner"
                                                  / "fixtures" / "experiments"))
        (spec,) = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                       ['params.experiments=["tiny_counter", "dice"]'], output_dir=str(out))
        run = run_experiment(spec.config)
        write_report(run.run_dir)
    return run.run_dir


@pytest.mark.slow  # a showcase run and its report, end to end
def test_report_and_findings_md_open_with_the_sentence(showcase: Path) -> None:
    findings = json.loads((showcase / "findings.json").read_text())["findings"]
    n = sum(len(v) for v in findings.values())
    md = (showcase / "findings.md").read_text().splitlines()
    assert md[0] == "# Findings" and md[2].startswith(f"Across 2 experiments, of {n} finding")
    sentence = md[2]
    html = (showcase / "report.html").read_text()
    found = re.search(r'<p class="found">(.*?)</p>', html)
    assert found is not None and unescape(found.group(1)) == sentence
    # the sentence, then Figure 1, before anything else of the page's body text
    assert html.index('class="found"') < html.index('id="fig-figure_1"') < html.index(
        'class="overview"')
    assert sentence in (showcase / "report.md").read_text()


_MEASURE = """<script>addEventListener("load", () => {
  const box = (s) => { const e = document.querySelector(s); if (!e) return null;
    const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,
    right: r.right}; };
  const out = [];  // elements that run out of their cell, list item, figure or the page
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (!r.width) continue;
    // its box: the nearest cell, list item, figure, paragraph or section, unless an
    // ancestor before it scrolls (what is wider than a scrolling box is reached by scrolling)
    let home = el.parentElement;
    while (home && getComputedStyle(home).overflowX === "visible"
           && !home.matches("td, th, li, figure, p, pre, details, section")) home = home.parentElement;
    if (home && getComputedStyle(home).overflowX !== "visible") continue;
    const limit = home ? home.getBoundingClientRect().right : innerWidth;
    if (r.right > limit + 1)
      out.push(el.tagName + "." + el.className + ": " + el.textContent.slice(0, 40));
  }
  document.body.setAttribute("data-measured", JSON.stringify({found: box("p.found"),
    figure: box("#fig-figure_1 img"), caption: box("#fig-figure_1 figcaption"),
    wide: document.documentElement.scrollWidth > innerWidth, overflowing: out}));
});</script>"""


def _measure(html: Path, width: int, height: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html.read_text().replace("</body>", _MEASURE + "</body>"))
        dom = subprocess.run(
            [shutil.which("chromium"), *_screenshots().FLAGS, f"--user-data-dir={tmp}/p",
             f"--window-size={width},{height}", "--virtual-time-budget=5000", "--dump-dom",
             page.as_uri()], check=True, capture_output=True, text=True, timeout=180).stdout
    found = re.search(r'data-measured="([^"]*)"', dom)
    assert found is not None, "the page was not measured"
    return json.loads(unescape(found.group(1)))


@pytest.mark.slow  # a showcase run and its report, end to end
@chromium
def test_the_first_screen_holds_the_sentence_and_figure_1_whole(showcase: Path) -> None:
    seen = _measure(showcase / "report.html", 1400, 900)
    found, figure, caption = seen["found"], seen["figure"], seen["caption"]
    assert 0 < found["top"] < found["bottom"] <= figure["top"]  # the sentence, then Figure 1
    assert figure["bottom"] <= caption["top"] <= caption["bottom"] <= 900  # whole, captioned


@pytest.mark.slow  # a showcase run and its report, end to end
@chromium
@pytest.mark.parametrize("width", [1400, 1000, 760, 480])
def test_nothing_runs_out_of_its_box(showcase: Path, width: int) -> None:
    """Badges, code and figures stay inside their table cells, list items and figures, and
    the page is no wider than the window, down to a narrow one (the at-a-glance table's cells
    are narrowest there)."""
    seen = _measure(showcase / "report.html", width, 900)
    assert seen["overflowing"] == [] and not seen["wide"]
