"""Sections drawn while a showcase runs are the figures its report would draw, byte for byte;
they are used only while their child's files are unchanged, and a child's key sees only its
own part of the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import toolkit.lab.report.content as content
from toolkit.lab.report import figure_cache, write_report
from toolkit.lab.report.drafts import DraftBoard, Drafts
from toolkit.lab.runner import RunResults, execute, plan

SHOWCASE = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"
CHILDREN = ("tiny_counter", "td_learning")
TWO_CHILDREN = f"params.experiments={json.dumps(list(CHILDREN))}"


class Hook:
    """A reporter that hands each finished child to a draft board, and notes the child's key
    at that moment."""

    def __init__(self, board: DraftBoard, experiment: object) -> None:
        self.board, self.experiment = board, experiment
        self.keys: dict[str, str] = {}

    def advance(self, label: str, done: int, total: int, current: str) -> None:
        pass

    def write(self, text: str) -> None:
        pass

    def child_done(self, run_dir: str, name: str) -> None:
        part = self.experiment.parts[name]
        self.keys[name] = figure_cache.section_key([run_dir], name, part, f"{name}__")
        self.board.child_done(self.experiment, run_dir, name)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sections the report itself drew, by figure-name prefix."""
    calls: list[str] = []
    real = content._draw_sections

    def spy(jobs, workers=1):
        calls.extend(job[3] for job in jobs)
        return real(jobs, workers)

    monkeypatch.setattr(content, "_draw_sections", spy)
    return calls


def _run(tmp_path: Path, board: DraftBoard, reports: dict[str, Path]) -> tuple[Path, Hook]:
    (spec,) = plan(SHOWCASE, [TWO_CHILDREN], output_dir=tmp_path / "results")
    hook = Hook(board, spec.experiment)

    def finish(run_dir: Path, experiment: object) -> None:
        reports["drafted"] = write_report(run_dir, experiment, drafts=board.pop(run_dir))

    outcome = execute(spec, quiet=True, finish=finish, reporter=hook)
    assert outcome.status == "complete", outcome.error
    return outcome.run_dir, hook


def _pngs(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "figures").glob("*.png"))}


def test_drafted_sections_are_the_figures_the_report_draws(tmp_path: Path, drawn: list[str],
                                                            monkeypatch: pytest.MonkeyPatch):
    reports: dict[str, Path] = {}
    with DraftBoard() as board:
        run_dir, hook = _run(tmp_path, board, reports)
    assert set(hook.keys) == set(CHILDREN)
    # the first child's draft started long before the report: the report never drew it
    assert "tiny_counter__" not in drawn and set(drawn) <= {f"{c}__" for c in CHILDREN}
    drafted = _pngs(run_dir)
    assert any(name.startswith("td_learning__") for name in drafted)
    # the same run's report drawn from scratch, without drafts or kept figures
    copy = tmp_path / "again" / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("figures", "report.*"))
    monkeypatch.setenv("TOOLKIT_FIGURE_CACHE", "0")
    write_report(copy, plan(SHOWCASE, [TWO_CHILDREN])[0].experiment)
    assert _pngs(copy).keys() == drafted.keys()
    for name, png in _pngs(copy).items():
        if name != "time.png":  # the showcase's own figure of the run's measured seconds
            assert png == drafted[name], name
    # each child's key when it ended is its key in the finished run
    experiment = plan(SHOWCASE, [TWO_CHILDREN])[0].experiment
    for name, key in hook.keys.items():
        assert figure_cache.section_key([run_dir], name, experiment.parts[name],
                                        f"{name}__") == key


def test_a_draft_of_files_that_changed_since_is_not_used(tmp_path: Path, drawn: list[str]):
    (spec,) = plan(SHOWCASE, [TWO_CHILDREN], output_dir=tmp_path)
    outcome = execute(spec, quiet=True)
    run_dir = outcome.run_dir
    drafts = Drafts(spec.experiment)
    for name in CHILDREN:
        drafts.child_done(str(run_dir), name)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["tiny_counter"]["blocked"]["changed"] = 1.0  # after its section was drafted
    (run_dir / "summary.json").write_text(json.dumps(summary))
    write_report(run_dir, spec.experiment, drafts=drafts)
    assert "tiny_counter__" in drawn  # drawn again, from the files as they are now


def test_a_childs_key_sees_its_own_part_only(tmp_path: Path):
    (spec,) = plan(SHOWCASE, [TWO_CHILDREN], output_dir=tmp_path)
    run_dir = execute(spec, quiet=True).run_dir
    part = spec.experiment.parts["tiny_counter"]

    def key() -> str:
        return figure_cache.section_key([run_dir], "tiny_counter", part, "tiny_counter__")

    before = key()
    # another child's summary, metrics and artifacts, and the run's own status: not its inputs
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["td_learning"]["extra"] = 1.0
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 99, "td_learning/blocked/x/y": 1.0}) + "\n")
    (run_dir / "artifacts" / "td_learning" / "more.json").write_text("{}")
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["ended"] = "2000-01-01T00:00:00+00:00"
    (run_dir / "meta.json").write_text(json.dumps(meta))
    assert key() == before
    # its own metric rows, artifacts and params are
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 99, "tiny_counter/blocked/x/y": 1.0}) + "\n")
    assert key() != before
    before = key()
    (run_dir / "artifacts" / "tiny_counter").mkdir(parents=True, exist_ok=True)
    (run_dir / "artifacts" / "tiny_counter" / "more.json").write_text("{}")
    assert key() != before
    before = key()
    meta["children"]["tiny_counter"]["params"]["n_steps"] = 7
    (run_dir / "meta.json").write_text(json.dumps(meta))
    assert key() != before
    # a child whose files cannot be read as a run's is keyed by its files, and never raises
    (run_dir / "summary.json").write_text("{broken")
    assert key() != before and RunResults(run_dir).children == list(CHILDREN)


def test_ctrl_c_is_the_runs_to_handle_not_the_drawing_processs(tmp_path: Path, drawn: list[str],
                                                                capfd: pytest.CaptureFixture):
    import multiprocessing
    import os
    import signal

    (spec,) = plan(SHOWCASE, [TWO_CHILDREN], output_dir=tmp_path)
    run_dir = execute(spec, quiet=True).run_dir
    before = {p.pid for p in multiprocessing.active_children()}
    with Drafts(spec.experiment) as drafts:
        drafts.child_done(str(run_dir), "tiny_counter")
        (drawer,) = [p for p in multiprocessing.active_children() if p.pid not in before]
        os.kill(drawer.pid, signal.SIGINT)  # as a Ctrl-C reaches the whole process group
        write_report(run_dir, spec.experiment, drafts=drafts)
    assert "tiny_counter__" not in drawn  # the drawing went on and was used
    assert "Traceback" not in capfd.readouterr().err
