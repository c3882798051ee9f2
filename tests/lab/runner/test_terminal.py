"""What ``toolkit run`` shows: one bar over the runs, fitting the terminal, then a short tally;
when stderr is not a terminal, one line per experiment as it ends instead of the bar."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.lab.cli.terminal import tally
from toolkit.lab.execute.local import run_all
from toolkit.lab.plan.config import plan

SHOWCASE = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"
FIXTURES = Path(__file__).parent / "fixtures"
TWO_CHILDREN = 'params.experiments=["tiny_counter", "td_learning"]'


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_fits_the_terminal_with_its_count_and_time(
        monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    import io

    from toolkit.lab.cli import terminal

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(terminal, "_on_terminal", lambda: True)
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    bar = terminal.progress_bar(9, "showcase, em_gmm, td_learning, a very long name indeed: "
                                "9 runs in 3 processes", quiet=False)
    bar.update(3)
    bar.refresh()
    drawn = screen.getvalue().replace("\r", "\n").splitlines()
    bar.close()
    lines = [line.strip("\x1b[A") for line in drawn if "runs" in line]
    assert lines and all(len(line) <= columns for line in lines), lines
    assert "3/9 runs" in lines[-1] and "[00:0" in lines[-1]  # the count and the clock


def test_one_is_counted_in_the_singular(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from toolkit.lab.cli import terminal

    assert [terminal.count(n, "run") for n in (0, 1, 2, 1200)] == [
        "0 runs", "1 run", "2 runs", "1,200 runs"]
    monkeypatch.setattr(terminal, "_on_terminal", lambda: True)
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    bar = terminal.progress_bar(1, "showcase: 1 run", quiet=False)
    bar.refresh()
    bar.close()
    assert "0/1 run [" in screen.getvalue()


@pytest.mark.slow
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
    # when stderr is not a terminal: one line per experiment of each seed as it ends, no bar,
    # no foreign warnings
    assert sorted(line.split()[:3] for line in proc.stderr.splitlines()) == [
        ["seed", seed, name] for seed in "01" for name in sorted(["td_learning", "tiny_counter"])]
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


def test_piped_each_experiment_that_ends_is_one_line(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    from types import SimpleNamespace

    from toolkit.lab.cli.terminal import Follow
    from toolkit.lab.execute.context import Progress

    class Showcase:  # a composite's params name its children
        def children(self) -> dict[str, None]:
            return {"em_gmm": None, "dice": None}

    def spec(seed: int, params: object) -> SimpleNamespace:
        return SimpleNamespace(seed=seed, params=params, sweep_point={},
                               experiment=SimpleNamespace(name="showcase"))

    done = SimpleNamespace(status="complete", run_dir=Path("r"), duration_s=2.0, error=None)
    with Follow([spec(0, Showcase()), spec(1, object())], "showcase", quiet=False) as follow:
        assert follow.units == [2, 1]
        follow.heard(0, Progress("em_gmm"))  # started: nothing to say yet
        follow.heard(0, Progress("em_gmm", 1.25))
        follow.heard(0, Progress("dice", 0.5))
        follow.ended(0, 2, done)  # its experiments were named already
        follow.ended(1, 2, done)  # a plain run is its one experiment
    lines = capsys.readouterr().err.splitlines()
    assert [line.split() for line in lines] == [
        ["seed", "0", "em_gmm", "1.25", "s"], ["seed", "0", "dice", "500", "ms"],
        ["seed", "1", "showcase", "2", "s"]]
