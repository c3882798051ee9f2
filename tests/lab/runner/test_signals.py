"""SIGINT and SIGTERM end every command with its one line and status 130 or 143 (issue 73,
item 8): while ``toolkit report`` draws, and when the signal comes as the process exits,
after the command's work is done. The command line holds the signals before it loads the
heavy modules (pydantic, the configs' planning), so the window before it is short.

The fixture experiment ``holds`` waits in its figures until the test has signalled (see
``test_ctrl_c.py``).
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

from toolkit.lab.results.view import find_runs

CONFIG = 'experiment = "holds"\ndevice = "cpu"\ndtype = "float64"\n[params]\nn_steps = 3\n'


def _env(**more: str) -> dict[str, str]:
    return {**os.environ, "TOOLKIT_EXPERIMENTS_PATH": str(FIXTURES / "experiments"),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            **more}


def _one_line(err: str, signum: int) -> None:
    name = signal.Signals(signum).name
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert lines == [f"toolkit: interrupted by {name} (exit status {128 + signum})"], err
    assert "Traceback" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_report_interrupted_while_it_draws(tmp_path: Path, signum: int) -> None:
    config, out, hold = tmp_path / "config.toml", tmp_path / "out", tmp_path / "hold"
    config.write_text(CONFIG)
    hold.mkdir()
    made = cli("run", str(config), "--seeds", "0", "--no-report", "--out", str(out))
    assert made.returncode == 0, made.stderr
    (run_dir,) = find_runs(out / "holds")
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "report", str(run_dir)],
                            env=_env(TOOLKIT_TEST_HOLD=f"report:{hold}"), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (hold / "report").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the report never held:\n{proc.communicate()}")
        time.sleep(0.02)  # polling the marker: the moment is the marker's
    os.killpg(proc.pid, signum)  # as a terminal's Ctrl-C, or a kill of the whole job
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signum, err
    _one_line(err, signum)


# the command's work done, a signal comes while its process exits
_LATE = """
import os, signal, sys, time
from toolkit.lab.cli import main
code = main()
os.kill(os.getpid(), int(os.environ["SIGNUM"]))
time.sleep(30)  # what the exit might still do: the signal ends it first
sys.exit(code)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_as_the_command_exits_still_gets_its_line(signum: int) -> None:
    proc = subprocess.run([sys.executable, "-c", _LATE, "list"], env=_env(SIGNUM=str(signum)),
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 128 + signum, proc.stderr
    assert "experiments:" in proc.stdout  # the command's own output came first, whole
    _one_line(proc.stderr, signum)


def test_the_command_line_holds_the_signals_before_its_heavy_imports() -> None:
    probe = ("import sys; import toolkit.lab.cli; "
             "print(sorted(m for m in ('pydantic', 'torch', 'toolkit.lab.plan.config') "
             "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], env=_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
