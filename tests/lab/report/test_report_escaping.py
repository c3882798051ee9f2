"""A results folder is shared: HTML and script in its files render as text, never as markup.

A run's files are edited as someone handing over a folder could: findings, a config value, the
experiment's name and description, metric and summary names carry ``<script>`` and an
``"><img onerror=…>`` break-out. ``toolkit report`` and ``toolkit compare`` must show them as
text: checked on the parsed document (``html.parser``), not with a pattern over the source.
"""

from __future__ import annotations

import json
import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import tomli_w

from toolkit.lab import run_experiment
from toolkit.lab.cli import main

SCRIPT = "<script>alert('findings')</script>"
BREAK_OUT = '"><img src=x onerror=alert(1)>'
PAYLOADS = (SCRIPT, BREAK_OUT)


class _Document(HTMLParser):
    """The elements (tag, attributes) and the text of an HTML document."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def _assert_inert(html: str, shown: tuple[str, ...]) -> None:
    """No script element, no event handler, no image but the embedded PNGs; each of ``shown``
    is in the text a reader sees."""
    doc = _Document(html)
    assert [tag for tag, _ in doc.elements if tag in ("script", "iframe", "object")] == []
    handlers = [(tag, name) for tag, attrs in doc.elements for name in attrs
                if name.lower().startswith("on")]
    assert handlers == []
    sources = [attrs.get("src") or "" for tag, attrs in doc.elements if tag == "img"]
    assert all(src.startswith("data:image/png;base64,") for src in sources)
    for payload in shown:
        assert payload in doc.text


def _poison(run_dir: Path) -> None:
    """Put the payloads in every file a report reads words from."""
    config = tomllib.loads((run_dir / "config.toml").read_text(encoding="utf-8"))
    config["params"]["started_file"] = BREAK_OUT
    (run_dir / "config.toml").write_text(tomli_w.dumps(config), encoding="utf-8")
    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    for about in meta.get("about", {}).values():
        about["description"] = BREAK_OUT
    (run_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    rows = [json.loads(line) for line in
            (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row[f"blocked/{SCRIPT}"] = row.pop("blocked/grad/cosine")
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                           encoding="utf-8")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    for name, value in ((SCRIPT, 3.0), (BREAK_OUT, 1.0)):
        summary["blocked"][name] = value
        summary["unblocked"][name] = value + 1
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    findings = json.loads((run_dir / "findings.json").read_text(encoding="utf-8"))
    for item in findings["findings"]["tiny_counter"]:
        item["text"] = item["per_seed"][0]["sentence"] = f"{SCRIPT} {BREAK_OUT}"
        item["basis"] = BREAK_OUT
    (run_dir / "findings.json").write_text(json.dumps(findings), encoding="utf-8")


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shared")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner" /
                                              "fixtures" / "experiments"))
    try:
        runs = [run_experiment("tiny_counter", {"n_steps": 3}, seed=s, output_dir=out,
                               disable_blocks=["tiny.*"]) for s in (0, 1)]
    finally:
        mp.undo()
    for run in runs:
        _poison(run.run_dir)
    return out


def test_the_report_shows_markup_in_a_runs_files_as_text(poisoned: Path, capsys) -> None:
    run_dir = next((poisoned / "tiny_counter").iterdir())
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    _assert_inert(html, PAYLOADS)
    # the findings are the reader's first words: each payload is one list item's text
    doc = _Document(html)
    assert ("ul", {"class": "findings"}) in doc.elements
    assert f"{SCRIPT} {BREAK_OUT}" in doc.text
    # report.md escapes them too (a Markdown viewer renders inline HTML), outside the fenced
    # config, which a viewer shows as it is
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    prose = re.sub(r"^(`{3,})toml\n.*?^\1$", "", md, flags=re.S | re.M)
    assert "```toml" in md and "```toml" not in prose
    assert "<script" not in prose and "<img" not in prose and "&lt;script&gt;" in prose


@pytest.mark.parametrize("where", ["config.toml", "meta.json"])
def test_an_experiment_name_carrying_markup_is_refused(where: str, tmp_path: Path,
                                                       monkeypatch, capsys) -> None:
    """The experiment's name is a name (letters, digits, ``_.-``): a run whose files give it
    markup is left out of ``report`` and ``compare`` with a warning, never drawn."""
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(Path(__file__).parents[1] / "runner" /
                                                       "fixtures" / "experiments"))
    run_dir = run_experiment("tiny_counter", {"n_steps": 3}, seed=0, output_dir=tmp_path,
                             disable_blocks=["tiny.*"]).run_dir
    path = run_dir / where
    if where == "config.toml":
        config = tomllib.loads(path.read_text(encoding="utf-8"))
        config["experiment"] = SCRIPT
        path.write_text(tomli_w.dumps(config), encoding="utf-8")
    else:
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["experiment"] = SCRIPT
        path.write_text(json.dumps(meta), encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(run_dir)]) != 0
    assert "skipped, its report not drawn" in capsys.readouterr().err
    assert not (run_dir / "report.html").exists() and not (run_dir / "report.md").exists()
    assert main(["compare", str(tmp_path), "--out", str(tmp_path / "cmp")]) != 0
    assert "that run is left out" in capsys.readouterr().err
    assert not (tmp_path / "cmp" / "compare.html").exists()


def test_compares_page_shows_markup_in_runs_files_as_text(poisoned: Path, tmp_path: Path,
                                                          capsys) -> None:
    assert main(["compare", str(poisoned), "--out", str(tmp_path)]) == 0
    html = (tmp_path / "compare.html").read_text(encoding="utf-8")
    # compare shows the experiment, the config values that tell groups apart, and the
    # summary's names
    _assert_inert(html, (SCRIPT, BREAK_OUT))
