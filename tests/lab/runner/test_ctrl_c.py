"""Ctrl-C at each moment of ``toolkit run`` (planning, the pool starting, the runs, the
reports): exit status 130, one summary of what is complete with the command that finishes the
rest, the signal recorded as SIGINT, durations as the runs recorded them.

The command runs in a process group of its own and gets SIGINT as a terminal's Ctrl-C sends
it: to the whole group. The fixture experiment ``holds`` makes each phase last until the test
has signalled: it creates a marker file where ``TOOLKIT_TEST_HOLD`` says and waits, and the
test waits for that marker (no sleep stands in for it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

from toolkit._utils.formatting import fmt
from toolkit.lab import RunResults
from toolkit.lab.execute.local import run_all
from toolkit.lab.execute.signals import interruptible
from toolkit.lab.plan.config import plan
from toolkit.lab.results.schema import ExecutorConfig
from toolkit.lab.results.view import find_runs

pytestmark = pytest.mark.slow

CONFIG = 'experiment = "holds"\ndevice = "cpu"\ndtype = "float64"\n[params]\nn_steps = 3\n'


def _interrupt(tmp_path: Path, where: str, *args: str, env: dict[str, str] | None = None
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``toolkit run <config> ARGS``, send SIGINT to its process group once the fixture
    holds at ``where``, and return what it printed (and the output folder)."""
    (tmp_path / "config.toml").write_text(CONFIG)
    hold, out = tmp_path / "hold", tmp_path / "out"
    hold.mkdir()
    environ = {**os.environ, "TOOLKIT_EXPERIMENTS_PATH": str(FIXTURES / "experiments"),
               "TOOLKIT_TEST_HOLD": f"{where}:{hold}",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               **(env or {})}
    argv = ["run", str(tmp_path / "config.toml"), "--out", str(out), *args]
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", *argv], env=environ, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (hold / where).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"the command never held at {where!r}:\n{stdout}\n{stderr}")
        time.sleep(0.02)  # polling the marker: the moment is the marker's, not the sleep's
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    try:  # the signal decides first: released at once, a worker could finish a run meanwhile
        stdout, stderr = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        (hold / "go").touch()  # a process that holds without taking the signal goes on
        stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), out


def _one_summary(proc: subprocess.CompletedProcess[str], *, clean: bool = True) -> list[str]:
    """Exit status 130 and one summary; no traceback from the command (``clean``: none at
    all, nor a resource-tracker warning). Returns the summary's lines."""
    err = proc.stderr
    assert proc.returncode == 130, err
    if clean:
        assert "Traceback" not in err and "resource_tracker" not in err, err
    heads = [line for line in err.splitlines() if line.startswith("toolkit: interrupted")]
    assert len(heads) == 1, err
    assert heads[0].startswith("toolkit: interrupted by SIGINT (exit status 130)"), err
    lines = err.splitlines()
    return lines[lines.index(heads[0]):]


def _finish(summary: list[str]) -> str:
    (line,) = [line for line in summary if line.startswith("to finish: ")]
    return line.removeprefix("to finish: ")


def test_ctrl_c_while_planning(tmp_path: Path) -> None:
    proc, out = _interrupt(tmp_path, "plan", "--seeds", "0,1", "--workers", "2")
    summary = _one_summary(proc)
    assert summary[0].endswith("; no run had started")
    # nothing was made, so the command to finish is the one given
    assert _finish(summary) == (f"toolkit run {tmp_path / 'config.toml'} --out {out} "
                                f"--seeds 0,1 --workers 2")
    assert not out.exists() or not list(find_runs(out))


def test_ctrl_c_while_the_pool_starts(tmp_path: Path) -> None:
    # a worker loads the loose experiment file itself, before its first run; the fork server
    # and the workers get Ctrl-C too (it reaches the whole group) and may say so themselves
    proc, out = _interrupt(tmp_path, "pool", "--seeds", "0-3", "--workers", "2")
    summary = _one_summary(proc, clean=False)
    text = " ".join(" ".join(summary).split())  # its lines unwrapped
    runs = list(find_runs(out)) if out.exists() else []
    for run_dir in runs:  # whatever the workers did, the summary names each folder they made
        assert f" {run_dir} (" in text, (run_dir, proc.stderr)
    if summary[0].endswith("; no run had started"):
        assert "--resume" not in _finish(summary)
        assert not runs
    else:  # one worker held while loading, the other had run a seed already
        assert "--resume" in _finish(summary)


def test_ctrl_c_as_a_worker_is_started_leaves_no_run_unseen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C inside the second submit, once the fork server has forked the second worker and
    # before the pool has its pid (the moment a terminal's Ctrl-C once hit): every worker
    # forked must end with the pool, and every run folder made must be among the outcomes
    import multiprocessing.popen_forkserver as popen_forkserver

    started: list[popen_forkserver.Popen] = []

    class Popen(popen_forkserver.Popen):
        def _launch(self, process_obj: object) -> None:
            super()._launch(process_obj)
            started.append(self)
            if len(started) == 2:
                signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(popen_forkserver, "Popen", Popen)
    specs = plan(FIXTURES / "tiny.toml", [], seeds=[0, 1, 2, 3], output_dir=tmp_path)
    with interruptible():
        outcomes, status = run_all(specs, executor=ExecutorConfig(workers=2), quiet=True)
    assert status == 130 and len(started) == 2
    for worker in started:  # none left to start a run the outcomes miss
        assert worker.wait(timeout=60) is not None, "a worker outlived its pool"
    assert ({Path(d) for d in find_runs(tmp_path)}
            == {Path(o.run_dir) for o in outcomes})


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_while_the_runs_run(tmp_path: Path, workers: str) -> None:
    # seed 0 may end before seed 1 holds; seed 2 starts after them (one or two processes)
    proc, out = _interrupt(tmp_path, "run", "--seeds", "0-3", "--workers", workers,
                           "--no-report")
    summary = _one_summary(proc)
    text = " ".join(" ".join(summary).split())  # its lines unwrapped
    runs = [RunResults(d) for d in find_runs(out / "holds")]
    held = [r for r in runs if r.seed == 1]
    assert len(held) == 1 and held[0].status == "interrupted"
    for run in runs:
        assert run.status in ("complete", "interrupted")
        if run.status == "interrupted":
            assert run.meta["interrupted_by"] == "SIGINT"  # not the SIGTERM of a parent
        # each run is listed once, with the duration its meta.json recorded
        assert text.count(run.run_dir.name) == 1
        assert f"{run.status} {run.run_dir} ({fmt(run.meta['duration_s'], 's')}" in text
    if workers == "1":  # in one process, seed 0 had ended and 2, 3 had not started
        assert {r.seed: r.status for r in runs} == {0: "complete", 1: "interrupted"}
    left = 4 - len(runs)
    assert [line for line in summary if "not started" in line] == (
        [f"  not started  {left} run{'s' * (left != 1)}"] if left else [])
    assert _finish(summary).endswith(" --no-report --resume")


@pytest.mark.parametrize("seeds", ["0", "0,1"])
def test_ctrl_c_while_the_report_is_drawn(tmp_path: Path, seeds: str) -> None:
    # one run draws its own report; two seeds make a seed group, whose report is drawn last
    proc, out = _interrupt(tmp_path, "report", "--seeds", seeds, "--set", "params.hold_seed=-1")
    summary = _one_summary(proc)
    runs = [RunResults(d) for d in find_runs(out / "holds")]
    complete = [r for r in runs if r.status == "complete"]
    assert len(complete) == len(seeds.split(",")) == len(runs)
    text = " ".join(" ".join(summary).split())  # its lines unwrapped
    for run in complete:
        assert f"complete {run.run_dir} ({fmt(run.meta['duration_s'], 's')}" in text
    drawn_later = _finish(summary)
    assert drawn_later.startswith("toolkit report ") and "--resume" not in drawn_later
    folder = Path(drawn_later.split()[-1])
    assert not (folder / "report.html").exists()
    # and that command finishes it
    redraw = subprocess.run([sys.executable, "-m", "toolkit", "report", str(folder)],
                            env=dict(os.environ, PYTHONPATH=str(REPO),
                                     TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments")),
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert redraw.returncode == 0, redraw.stderr
    assert (folder / "report.html").is_file()
