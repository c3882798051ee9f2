"""``--resume`` after Ctrl-C in a folder that already holds complete runs of the same config
resumes the runs the interrupted command left (issue 72): the newest run of each request
decides, not "some complete run exists". It ends with the report's path, leaves no folder
``interrupted``, and the resumed seed's ``summary.json`` is the uninterrupted run's, byte for
byte.

The fixture experiment ``holds`` waits in seed 1's run until the test has sent SIGINT to the
command's process group (as a terminal's Ctrl-C does); see ``test_ctrl_c.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO, cli

from toolkit.lab import RunResults
from toolkit.lab.results.view import find_runs

pytestmark = pytest.mark.slow

CONFIG = 'experiment = "holds"\ndevice = "cpu"\ndtype = "float64"\n[params]\nn_steps = 3\n'


def _interrupted(config: Path, out: Path, hold: Path, *args: str
                 ) -> subprocess.CompletedProcess[str]:
    """``toolkit run CONFIG ARGS`` stopped by SIGINT once seed 1's run holds."""
    env = {**os.environ, "TOOLKIT_EXPERIMENTS_PATH": str(FIXTURES / "experiments"),
           "TOOLKIT_TEST_HOLD": f"run:{hold}",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    argv = ["run", str(config), "--out", str(out), *args]
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", *argv], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (hold / "run").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the run never held:\n{proc.communicate()}")
        time.sleep(0.02)  # polling the marker: the moment is the marker's
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def test_resume_finds_the_interrupted_runs_beside_complete_ones(tmp_path: Path) -> None:
    config, out, hold = tmp_path / "config.toml", tmp_path / "out", tmp_path / "hold"
    config.write_text(CONFIG)
    hold.mkdir()
    args = ("--seeds", "0,1", "--workers", "2")
    first = cli("run", str(config), "--out", str(out), *args, timeout=300)
    assert first.returncode == 0, first.stderr
    before = {RunResults(d).seed: d for d in find_runs(out / "holds")}
    assert sorted(before) == [0, 1]

    stopped = _interrupted(config, out, hold, *args)
    assert stopped.returncode == 130, stopped.stderr
    assert "resource_tracker" not in stopped.stderr, stopped.stderr
    left = [RunResults(d) for d in find_runs(out / "holds") if d not in before.values()]
    assert 1 in {r.seed for r in left if r.status == "interrupted"}

    again = cli("run", str(config), "--out", str(out), *args, "--resume", timeout=300)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" not in again.stdout
    assert "report:" in again.stdout, again.stdout  # it ends as a fresh run ends
    runs = [RunResults(d) for d in find_runs(out / "holds")]
    assert "interrupted" not in {r.status for r in runs}
    check = cli("check", str(out))
    assert check.returncode == 0 and "interrupted" not in check.stdout, check.stdout
    newest = max((r for r in runs if r.seed == 1), key=lambda r: r.meta["started"])
    assert newest.run_dir not in before.values()
    assert (newest.run_dir / "summary.json").read_bytes() == \
        (before[1] / "summary.json").read_bytes()
