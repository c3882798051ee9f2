"""Helpers of the fault tests: injected disk errors, one-line checks, a namespace with mounts.

``unshare --user --map-root-user --mount`` gives an unprivileged process a mount namespace of its
own, where it can mount a tiny tmpfs (a real full disk) or remount a folder read-only. Where
the platform refuses it, the tests that need it are skipped and the injected errors below stand
in: :class:`DiskFull` makes chosen writes fail with ``OSError(ENOSPC)`` at each write site of
the results files (the atomic writes and the metrics log).
"""

from __future__ import annotations

import errno
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from runner_testutil import FIXTURES, REPO


def one_line(text: str, needle: str) -> str:
    """The one line of ``text`` that contains ``needle`` (fails when there are none or more),
    and no traceback anywhere."""
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, f"expected one line with {needle!r}, got:\n{text}"
    return lines[0]


def no_space() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FullFile(io.TextIOBase):
    """A metrics file on a full disk: every write fails."""

    def __init__(self, path: Path) -> None:
        self.name = str(path)

    def write(self, text: str) -> int:
        raise no_space()

    def flush(self) -> None:
        pass


class DiskFull:
    """Writes of files named ``name`` fail with ENOSPC, from its ``after``-th write on.

    Atomic writes fail at their ``fsync`` (the temporary file exists then, as on a real full
    disk); ``metrics.jsonl`` fails at its first line. Other files are written as usual.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str, after: int = 0) -> None:
        self.name, self.after, self.seen = name, after, 0
        self._doomed: set[int] = set()
        mkstemp, fsync, path_open = tempfile.mkstemp, os.fsync, Path.open

        def fake_mkstemp(*args: Any, prefix: str = "", **kwargs: Any) -> tuple[int, str]:
            fd, tmp = mkstemp(*args, prefix=prefix, **kwargs)
            if prefix == f".{self.name}." and self._armed():
                self._doomed.add(fd)
            return fd, tmp

        def fake_fsync(fd: int) -> None:
            if fd in self._doomed:
                self._doomed.discard(fd)
                raise no_space()
            fsync(fd)

        def fake_open(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if path.name == self.name == "metrics.jsonl" and "a" in mode and self._armed():
                return _FullFile(path)
            return path_open(path, mode, *args, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", fake_mkstemp)
        monkeypatch.setattr(os, "fsync", fake_fsync)
        monkeypatch.setattr(Path, "open", fake_open)

    def _armed(self) -> bool:
        self.seen += 1
        return self.seen > self.after


@functools.cache
def can_unshare() -> bool:
    """Whether this machine lets a process mount in a user and mount namespace of its own."""
    if not shutil.which("unshare") or not sys.platform.startswith("linux"):
        return False
    probe = tempfile.mkdtemp()
    try:
        done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                               f"mount -t tmpfs -o size=64k tmpfs {probe}"],
                              capture_output=True, timeout=60)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        os.rmdir(probe)


_PREAMBLE = """
import contextlib, io, json, os, shutil, sys
from toolkit.lab.cli import main

RESULTS = []

def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    RESULTS.append({"argv": [str(a) for a in argv], "code": code, "out": out.getvalue(),
                    "err": err.getvalue()})
    return code

def fill(folder, leave_pages=0):
    # fill the file system of folder, then free leave_pages pages of it
    path = os.path.join(folder, ".filler")
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\\0" * 4096)
        except OSError:
            pass
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(max(0, size - 4096 * leave_pages))
"""


def in_namespace(mounts: str, script: str, *, timeout: float = 600) -> list[dict[str, Any]]:
    """Run ``mounts`` (shell commands) and then the Python ``script`` in a user and mount
    namespace of their own; the script calls ``cli(*argv)`` (the command line, in process) and
    ``fill(folder, leave_pages)``; returns each ``cli`` call's code, stdout and stderr."""
    code = _PREAMBLE + script + "\nprint('@@' + json.dumps(RESULTS))\n"
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                           f"{mounts} && exec {sys.executable} -c \"$0\"", code],
                          capture_output=True, text=True, env=env, timeout=timeout)
    marked = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    assert done.returncode == 0 and marked, done.stdout + done.stderr
    return json.loads(marked[-1][2:])
