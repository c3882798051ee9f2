"""The report's summary is scannable (issue 44): short "at a glance" cells, what did not hold
first, verdict words that cannot be misread, rows named in words, tables as text."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolkit.lab.report.figures import WordTable
from toolkit.lab.report.render import (
    GLANCE_WORDS,
    FigureItem,
    ReportContent,
    Section,
    quantity_words,
    render_html,
    render_markdown,
    short_text,
    split_variant,
)
from toolkit.lab.results.findings import Verdict

LONG = ("Without the block the output collapses toward one direction: the std of the "
        "l2-normalised output times √d is 0.119 [0.0319, 0.271] (1 for an isotropic output, 0 "
        "for a collapsed one; collapse is read as ≤ 0.1) against 0.975 [0.969, 0.981] with it, "
        "and the encoder's features, kept spread by BatchNorm, give 0.928 [0.92, 0.942] where "
        "the paper has near-chance accuracy for every one of its runs.")
BASIS = ("Chen & He (2021), Figure 2: without stop-gradient the loss reaches −1 and the output "
         "collapses to a constant vector whatever the input")


def glance_words(html_text: str) -> int:
    """Words a reader sees in a piece of HTML (tags left out): the measure of a glance cell."""
    return len(unescape(re.sub(r"<[^>]+>", " ", html_text)).split())


def _finding(text: str, verdict: bool | None, topic: str = "result", held: int = 3,
             basis: str = BASIS) -> Verdict:
    return Verdict(text=text, verdict=verdict, topic=topic, basis=basis if verdict is not None
                   else "", seeds=(0, 1, 2), held=held, predicts=verdict is not None)


def _section(name: str, findings: list[Verdict], figures: list[FigureItem] = ()) -> Section:
    return Section(name=name, experiment=name, description="a test experiment",
                   story={"compares": "a with b", "block": f"{name}.cut: y = stop_gradient(x)",
                          "prediction": "collapse"},
                   findings=findings, figures=list(figures),
                   summary_tables=[(["quantity", "value"],
                                    [["timers.train_gradient_blocked_and_unblocked", "2.066 s"]])],
                   cost_tables=[], equal=[], params={}, notes=[])


def _content(tmp_path: Path, sections: list[Section]) -> ReportContent:
    run = SimpleNamespace(meta={"duration_s": 1.0, "device": "cpu", "dtype": "float32"},
                          status="complete", run_dir=tmp_path, replicates=[SimpleNamespace(seed=0)],
                          children=["a", "b"])
    return ReportContent(run=run, title="Showcase", sections=sections, overview="Overview.",
                         top_figures=[], problems=[])


@pytest.fixture
def report(tmp_path: Path) -> tuple[str, str]:
    sections = [
        _section("first", [_finding(LONG, True), _finding(LONG, None, "cost")]),
        _section("second", [_finding("A short finding that held.", True),
                            _finding(LONG, False, held=2),
                            _finding(LONG.replace("Without", "Then without"), False, held=0)]),
        _section("third", [_finding(LONG, None), _finding(LONG, False, "cost", held=1)],
                 [FigureItem("third__table", "A table of words, not an image.", b"",
                             headline=True, table=(["bug", "cost"], [["leak", "1.4x"]]))]),
    ]
    content = _content(tmp_path, sections)
    return render_html(content), render_markdown(content)


def test_glance_cells_are_short_and_what_did_not_hold_comes_first(report) -> None:
    html, _ = report
    glance = html[html.index('id="at-a-glance"'):html.index('<section class="experiment"')]
    missed = re.search(r'<ul class="missed">(.*?)</ul>', glance, re.S)
    table = glance.index('<table class="glance">')
    assert missed is not None and missed.start() < table  # listed first
    items = re.findall(r"<li>(.*?)</li>", missed.group(1), re.S)
    # every finding that did not hold, in the report's order
    assert [re.search(r'href="#(\w+)"', i).group(1) for i in items] == [
        "second", "second", "third"]
    cells = re.findall(r'<td class="glance">(.*?)</td>', glance, re.S)
    assert len(cells) == 6
    for piece in [*items, *cells]:
        assert glance_words(piece) <= GLANCE_WORDS, piece
    # a section's cell shows a finding that did not hold before one that held
    second = re.search(r'href="#second".*?</tr>', glance[table:], re.S).group(0)
    assert "did not hold" in second.split('<td class="glance">')[1]


def test_verdict_words_cannot_be_misread(report) -> None:
    html, md = report
    assert "not as predicted" not in re.sub(r'data-verdict="[^"]*"', "", html)
    text = re.sub(r"<[^>]+>", "", html)
    assert "held in 2 of 3 seeds; predicted: without stop-gradient the loss reaches −1" in text
    assert "held in 0 of 3 seeds;" in text and "held in 3 of 3 seeds" in text
    assert 'data-verdict="not as predicted"' in html  # the hook for tools keeps its values
    assert "**did not hold** (held in 2 of 3 seeds; predicted:" in md


def test_rows_named_in_words_and_tables_as_text(report) -> None:
    html, md = report
    assert ('<td title="timers.train_gradient_blocked_and_unblocked">wall time, train '
            'gradient blocked and unblocked</td>') in html
    figure = re.search(r'<figure id="fig-third__table">(.*?)</figure>', html, re.S).group(1)
    assert "<table>" in figure and "<img" not in figure and "<td>leak</td>" in figure
    assert "| leak | 1.4x |" in md and "third__table.png" not in md


def test_table_of_contents_stays_in_view(report) -> None:
    html, _ = report
    body = html.split("<body>", 1)[1].lstrip()
    assert body.startswith('<nav class="toc">')
    assert re.search(r"nav\.toc\{\{?[^}]*position:sticky", html.replace("\n", ""))
    toc = re.search(r'<nav class="toc">(.*?)</nav>', html, re.S).group(1)
    assert 'href="#did-not-hold"' in toc and "(1 did not hold)" in toc


def test_short_text_keeps_a_first_clause_and_drops_ranges() -> None:
    assert short_text("Loss 0.5 [0.4, 0.6] and 1 [1, 1].", 10) == "Loss 0.5 and 1."
    cut = short_text(LONG, 20)
    assert len(cut.split()) <= 20 and cut.endswith("…") and "[" not in cut


def test_quantity_words_and_variants() -> None:
    assert quantity_words("timers.train_gradient_blocked_and_unblocked") == (
        "wall time, train gradient blocked and unblocked")
    assert quantity_words("memory.peak_bytes") == "peak memory"
    assert quantity_words("cpu_seconds.em_gmm") == "CPU time, em gmm"
    # a name of both variants is not one variant's
    assert split_variant("timers.train_gradient_blocked_and_unblocked")[0] is None
    assert split_variant("step_time_ratio_unblocked_over_blocked")[0] is None
    assert split_variant("gradients.norm_unblocked") == ("unblocked", "gradients.norm")


def test_word_table_checks_its_rows() -> None:
    with pytest.raises(ValueError, match="WordTable: every row must have 2 cells"):
        WordTable(["a", "b"], [["only one"]])
