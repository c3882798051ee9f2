"""``toolkit run`` follows its runs from inside them (issue 72): each experiment of each seed is
named as it ends, piped one line each (through the pool's queue, or here with one process),
and on a terminal the bar's clock moves while an experiment runs and nothing ends (even while
the run holds back what the profiler writes on file descriptor 2).

The test's own experiment ``waits_for_go`` waits until the test creates ``<folder>/go``
(``TOOLKIT_TEST_GO``), so the command is still running when its first lines are checked: no
sleep stands in for the moment.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

pytestmark = pytest.mark.slow

SHOWCASE = REPO / "configs" / "showcase_quick.toml"
WAITS = '''"""Test experiment that waits until ``$TOOLKIT_TEST_GO/go`` exists."""
import os, time
from pathlib import Path
from toolkit.lab import ExperimentParams
from toolkit.lab.measure import measure_memory

DESCRIPTION = "waits for the test's go"
QUICK = {}


class Params(ExperimentParams):
    pass


def wait():
    go = Path(os.environ["TOOLKIT_TEST_GO"], "go")
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def run(params, ctx):
    # measured as experiments measure memory: the profiler's notes on descriptor 2 are held
    # back meanwhile, which must hold none of the command's bar
    measure_memory(wait)
    ctx.summary(blocked={"x": 1.0}, unblocked={"x": 1.0})


def findings(run):
    return []
'''
LINE = re.compile(r"^  seed (\d)  (tiny_counter|waits_for_go) +[0-9.]+ m?s$")


def _command(tmp_path: Path, *more: str) -> tuple[list[str], dict[str, str]]:
    (tmp_path / "exps").mkdir()
    (tmp_path / "exps" / "waits_for_go.py").write_text(WAITS)
    (tmp_path / "hold").mkdir()
    env = {**os.environ, "TOOLKIT_TEST_GO": str(tmp_path / "hold"),
           "TOOLKIT_EXPERIMENTS_PATH": os.pathsep.join([str(FIXTURES / "experiments"),
                                                        str(tmp_path / "exps")]),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return [sys.executable, "-m", "toolkit", "run", str(SHOWCASE), "--set",
            'params.experiments=["tiny_counter", "waits_for_go"]', "--no-report",
            "--out", "out", *more], env  # the command runs in tmp_path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_piped_each_experiment_of_each_seed_is_named_as_it_ends(
        tmp_path: Path, workers: str) -> None:
    argv, env = _command(tmp_path, "--seeds", "0,1", "--workers", workers)
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    # side by side both seeds' tiny_counter end first; one after the other, seed 0's only
    first = [proc.stderr.readline().rstrip("\n") for _ in range(int(workers))]
    assert proc.poll() is None  # named while the runs go on: waits_for_go has not ended
    assert all(LINE.match(line) and "tiny_counter" in line for line in first), first
    (tmp_path / "hold" / "go").touch()
    stdout, rest = proc.communicate(timeout=300)
    assert proc.returncode == 0, rest
    lines = [*first, *rest.splitlines()]
    named = [LINE.match(line) for line in lines]
    assert all(named), lines  # one line per finished experiment, nothing else
    assert sorted((m.group(1), m.group(2)) for m in named if m) == [
        ("0", "tiny_counter"), ("0", "waits_for_go"), ("1", "tiny_counter"),
        ("1", "waits_for_go")]
    assert "tally: " in stdout


def test_on_a_terminal_the_clock_moves_while_an_experiment_runs(tmp_path: Path) -> None:
    argv, env = _command(tmp_path, "--seeds", "0")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    proc = subprocess.Popen(argv, env={**env, "COLUMNS": "80", "LINES": "40"}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    text, clocks, deadline = "", set(), time.monotonic() + 100
    try:
        # waits_for_go holds the only run: only the bar's own redraw can move its clock
        while len(clocks) < 3 and time.monotonic() < deadline:
            text += os.read(master, 1 << 16).decode(errors="replace")
            plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
            if "tiny_counter" in plain:
                clocks = set(re.findall(r"1/2 experiments \[(\d\d:\d\d)", plain))
        assert len(clocks) >= 3, text
    finally:
        (tmp_path / "hold" / "go").touch()
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the command has ended
                break
            if not data:
                break
            text += data.decode(errors="replace")
        os.close(master)
    assert proc.wait(timeout=300) == 0, text
    lines = re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text))
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert any(LINE.match(line) and "waits_for_go" in line for line in lines), lines
