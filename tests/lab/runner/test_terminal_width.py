"""What ``toolkit run`` draws on a terminal fits it (issue 65): at 80 and 120 columns no line,
bar or tally, is longer than the terminal, and the run bar keeps its count and time; the
tally's wall time is the one the report shows."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

pytestmark = pytest.mark.slow


def _on_a_terminal(args: list[str], columns: int, cwd: Path) -> str:
    """``python -m toolkit ARGS`` with stdout and stderr on a pseudo-terminal of ``columns``
    columns (its size and ``COLUMNS`` both), everything it wrote, escapes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40",
           "TOOLKIT_EXPERIMENTS_PATH": str(FIXTURES / "experiments"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the last writer has gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0, b"".join(chunks).decode(errors="replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode())


@pytest.mark.parametrize("columns", [80, 120])
def test_every_line_fits_the_terminal(columns: int, tiny_config: Path, tmp_path: Path) -> None:
    text = _on_a_terminal(["run", str(tiny_config), "--seeds", "0-2", "--workers", "1",
                           "--out", "r"], columns, tmp_path)
    lines = re.split(r"[\r\n]", text)
    assert max(len(line) for line in lines) <= columns, max(lines, key=len)
    assert re.search(r"\b[0-3]/3 runs \[\d\d:\d\d", text)  # the count and the time
    (wall,) = [line for line in lines if line.startswith("wall time")]
    (group,) = (tmp_path / "r" / "tiny_counter").glob("*seeds0-2*")
    html = (group / "report.html").read_text(encoding="utf-8")
    assert wall in html  # the same numbers as the report's
