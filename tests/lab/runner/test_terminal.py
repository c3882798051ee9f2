"""What ``toolkit run`` shows: one bar fed by every run's progress, in whichever process it runs,
then a short tally; nothing else when stderr is not a terminal."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from toolkit.lab.cli.terminal import Watcher, tally
from toolkit.lab.execute.local import run_all
from toolkit.lab.plan.config import plan

SHOWCASE = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"
FIXTURES = Path(__file__).parent / "fixtures"
TWO_CHILDREN = 'params.experiments=["tiny_counter", "td_learning"]'


class Recorder:
    """A watch() that keeps every report it gets, by run."""

    def __init__(self) -> None:
        self.reports: dict[int, list[tuple[str, int, int, str]]] = {}
        self.lines: list[str] = []
        self.children: dict[int, list[tuple[str, str, str]]] = {}
        self.started: dict[int, int] = {}
        self.lock = threading.Lock()

    def watch(self, index: int) -> Recorder.One:
        return Recorder.One(self, index)

    class One:
        def __init__(self, recorder: Recorder, index: int) -> None:
            self.recorder, self.index = recorder, index

        def run_started(self) -> None:
            with self.recorder.lock:
                self.recorder.started[self.index] = self.recorder.started.get(self.index, 0) + 1

        def advance(self, label: str, done: int, total: int, current: str) -> None:
            with self.recorder.lock:
                self.recorder.reports.setdefault(self.index, []).append(
                    (label, done, total, current))

        def write(self, text: str) -> None:
            with self.recorder.lock:
                self.recorder.lines.append(text)

        def child_done(self, run_dir: str, name: str) -> None:
            from toolkit.lab import RunResults

            # meta.json names the child by now: a report can read it back while the run goes on
            experiment = RunResults(run_dir).child(name).experiment
            with self.recorder.lock:
                self.recorder.children.setdefault(self.index, []).append(
                    (Path(run_dir).name, name, experiment))


def test_each_experiment_of_each_seed_is_reported_as_it_starts(tmp_path: Path) -> None:
    # two seeds in two worker processes: their reports cross the process boundary
    runs = plan(SHOWCASE, [TWO_CHILDREN], seeds=[0, 1], output_dir=tmp_path)
    recorder = Recorder()
    from toolkit.lab.results.schema import ExecutorConfig

    outcomes, status = run_all(runs, executor=ExecutorConfig(workers=2), quiet=True,
                               watch=recorder.watch)
    assert status == 0 and len(outcomes) == 2, [o.error for o in outcomes]
    for index in (0, 1):  # the item under way as it starts, then none once all have ended
        assert recorder.reports[index] == [
            ("showcase", 0, 2, "tiny_counter"), ("showcase", 1, 2, "td_learning"),
            ("showcase", 2, 2, "")]
        assert recorder.started[index] == 1  # each run said it started, once
    assert any("tiny_counter" in line for line in recorder.lines)  # ctx.say goes there too
    for outcome in outcomes:
        seed = int(outcome.run_dir.name.split("__seed")[1].split("__")[0])
        assert recorder.children[seed] == [(outcome.run_dir.name, "tiny_counter", "tiny_counter"),
                                           (outcome.run_dir.name, "td_learning", "td_learning")]


def test_a_watched_run_in_this_process_draws_no_bars_of_its_own(
        tmp_path: Path, capfd: object) -> None:
    runs = plan(SHOWCASE, [TWO_CHILDREN], output_dir=tmp_path)
    recorder = Recorder()
    run_all(runs, quiet=False, watch=recorder.watch)
    assert [r[1] for r in recorder.reports[0]] == [0, 1, 2]
    _, err = capfd.readouterr()  # type: ignore[attr-defined]
    assert "showcase" not in err and "tiny_counter" not in err  # said to the watcher only


def test_the_watcher_counts_items_across_runs_without_a_terminal(capsys: object) -> None:
    watcher = Watcher(2, quiet=False, verbose=False)  # stderr is not a terminal under pytest
    assert watcher.bar is None
    watcher.advance(0, "showcase", 1, 10, "dice")
    watcher.write("said, but not shown without --verbose")
    watcher.close()
    out, err = capsys.readouterr()  # type: ignore[attr-defined]
    assert out == err == ""


def test_the_main_job_ends_in_a_short_tally(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "toolkit", "run", str(SHOWCASE), "--set",
                           TWO_CHILDREN, "--seeds", "0,1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) < 40
    assert any(line.startswith("tally: ") for line in lines)
    assert any(line.startswith("report:   ") and line.endswith("report.html") for line in lines)
    assert any(line.startswith("findings: ") and line.endswith("findings.md") for line in lines)
    assert [line.split()[0] for line in lines if line.startswith("  ") and
            not line.startswith("   ")] == ["tiny_counter", "td_learning"]
    # nothing but the summary when stderr is not a terminal: no bars, no foreign warnings
    assert proc.stderr == ""
    # piped: wrapped to 100 columns (a path stays whole, however long)
    assert max(len(line) for line in lines if not line.startswith(("findings:", "report:")))\
        <= 100


def test_the_tally_says_what_did_not_hold_beneath_its_experiment(tmp_path: Path) -> None:
    from toolkit.lab import Finding
    from toolkit.lab.results.records import write_findings

    per_seed = {0: {"a": [Finding("held", True, basis="a closed form"),
                          Finding("a measurement", None)],
                    "b": [Finding("missed it", False, basis="a paper's figure")]}}
    write_findings(tmp_path, per_seed)  # findings.json and findings.md, as a run writes them
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        tally([tmp_path], out=fh)
    text = out.read_text().splitlines()
    assert text[:3] == ["  a  1 as predicted, 1 measured", "  b  1 not as predicted",
                        "    ! held in 0 of 1 seed: missed it"]
    assert text[3] == "tally: 1 as predicted, 1 not, 1 measured (3 findings)"
    assert text[4].startswith("findings: ")


@pytest.mark.parametrize("columns", [60, 100])
def test_a_long_finding_is_wrapped_to_the_width_never_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from toolkit.lab import Finding
    from toolkit.lab.results.records import write_findings

    monkeypatch.setenv("COLUMNS", str(columns))  # the terminal's width, as a shell says it
    words = " ".join(f"word{i}" for i in range(80))  # about 500 characters
    write_findings(tmp_path, {0: {"a": [Finding(words, False, basis="a paper")]}})
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        tally([tmp_path], out=fh)
    lines = out.read_text().splitlines()
    said = [line for line in lines if line.startswith("    ! ") or line.startswith("      ")]
    assert max(len(line) for line in said) <= columns
    assert len(said) > 1  # wrapped
    assert " ".join(" ".join(said).split()) == f"! held in 0 of 1 seed: {words}"  # all of it


def test_each_sweep_point_is_named(tmp_path: Path) -> None:
    from toolkit.lab.results.schema import ExecutorConfig

    runs = plan(FIXTURES / "tiny.toml", ["sweep.params.n_steps=[2, 3]"], output_dir=tmp_path)
    outcomes, status = run_all(runs, executor=ExecutorConfig(workers=1), quiet=True)
    assert status == 0, [o.error for o in outcomes]
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        tally([o.run_dir for o in outcomes], out=fh)
    lines = out.read_text().splitlines()
    assert [line.split("  ")[1].strip() for line in lines[:2]] == [
        "tiny_counter n_steps=2", "tiny_counter n_steps=3"]
    # one line a folder names it too, with its report or findings
    named = [line for line in lines if line.startswith("tiny_counter n_steps=")]
    assert [line.split(":")[0] for line in named] == ["tiny_counter n_steps=2",
                                                       "tiny_counter n_steps=3"]
