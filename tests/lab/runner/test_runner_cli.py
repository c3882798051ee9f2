"""End-to-end: the command line in subprocesses (run → report → compare, sweeps, signals)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO, cli

from toolkit.lab import RunResults


@pytest.mark.slow
def test_run_report_compare(tiny_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = cli("run", str(tiny_config), "--seeds", "0,1", "--out", str(out), "--quiet",
               "--no-report")
    assert proc.returncode == 0, proc.stderr
    run_dirs = sorted(d for d in (out / "tiny_counter").iterdir() if (d / "meta.json").is_file())
    assert len(run_dirs) == 2
    runs = [RunResults(d) for d in run_dirs]
    assert {r.meta["seed"] for r in runs} == {0, 1}
    assert all(r.status == "complete" for r in runs)

    assert not any((d / "report.html").exists() for d in run_dirs)
    proc = cli("report", *map(str, run_dirs))
    assert proc.returncode == 0, proc.stderr
    assert all((d / "report.html").exists() for d in run_dirs)

    proc = cli("compare", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "blocked" in proc.stdout and "loss" in proc.stdout
    with (out / "compare.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["quantity"] == "loss" and r["variant"] == "blocked")
    losses = [r.summary["blocked"]["loss"] for r in runs]
    mean = sum(losses) / 2
    std = (sum((x - mean) ** 2 for x in losses) / 1) ** 0.5
    assert row["n"] == "2" and row["seeds"] == "0 1"
    assert float(row["mean"]) == pytest.approx(mean, rel=1e-12)
    assert float(row["std"]) == pytest.approx(std, rel=1e-12)
    page = (out / "compare.html").read_text()
    assert "data:image/png;base64," in page


@pytest.mark.slow
def test_sweep_with_two_workers(tiny_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = cli("sweep", str(tiny_config), "--set", "sweep.params.n_steps=[2, 3]",
               "--workers", "2", "--out", str(out), "--no-report", "--verbose")
    assert proc.returncode == 0, proc.stderr
    runs = [RunResults(d) for d in sorted((out / "tiny_counter").iterdir())]
    assert sorted(r.params["n_steps"] for r in runs) == [2, 3]
    assert all(r.status == "complete" for r in runs)
    assert len({r.meta["pid"] for r in runs} | {os.getpid()}) >= 2  # not this process
    assert "[2/2]" in proc.stdout or "[1/2]" in proc.stdout


@pytest.mark.slow
def test_sigint_marks_run_interrupted(tiny_config: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    out = tmp_path / "results"
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "run", str(tiny_config), "--out", str(out),
         "--set", "params.n_logged=100000", "--set", "params.sleep_s=0.005",
         "--set", f"params.started_file={json.dumps(str(started))}"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (run_dir,) = (out / "tiny_counter").iterdir()
    run = RunResults(run_dir)
    assert run.status == "interrupted"
    assert run.meta["error"].startswith("RunInterrupted: interrupted by SIGINT")
    assert len(run.metrics) >= 1 and run.meta["ended"] is not None


@pytest.mark.slow
def test_bad_input_from_the_shell(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('experiment = "tiny_counter"\n[params]\nn_steps = 0\n')
    proc = cli("run", str(path), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"toolkit: error: {path}: params.n_steps: Input should be greater than or equal to 1, "
        f"got 0; use a value >= 1 (n_steps: number of steps)"]
    assert not (tmp_path / "r" / "tiny_counter").exists() or not any(
        (tmp_path / "r" / "tiny_counter").iterdir())
