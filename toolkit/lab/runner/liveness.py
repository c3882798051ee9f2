"""Whether a run that says ``running`` still runs: its process, or else its heartbeat.

A run's ``meta.json`` says ``"status": "running"`` from the run's start to its final write. A
process killed by SIGKILL or by the out-of-memory killer, or a machine that restarts, never
makes that write, so the status is decided again each time the run is read:

- on the host that ran it (``meta.json``'s ``host``), the run is *abandoned* when its process
  (``pid``) no longer exists, is a zombie, or is a newer process that got the same pid (on
  Linux its start time, read from ``/proc``, comes after the run's start);
- read on another host (a shared or copied folder), the run is *abandoned* when its heartbeat
  is stale: while a run runs, a thread touches its ``meta.json`` (the modification time, never
  the bytes) every :data:`HEARTBEAT_S` seconds, and a ``meta.json`` untouched for
  :data:`STALE_AFTER_S` seconds belongs to a run that is gone.

Nothing is written when a run is read: ``abandoned`` is what :class:`~toolkit.lab.runner.RunResults`
reports, while the file keeps what the run last wrote.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "abandoned_reason", "heartbeat", "process_alive",
           "this_host"]

#: Seconds between two touches of a running run's ``meta.json``.
HEARTBEAT_S = 60.0
#: A ``meta.json`` of a running run untouched for this long (ten missed heartbeats) is taken as
#: a run whose process is gone: long enough for clocks that differ by minutes between hosts.
STALE_AFTER_S = 10 * HEARTBEAT_S
#: Slack between a process's start time (from /proc, to the second) and the run's start.
_CLOCK_SLACK_S = 30.0


def this_host() -> str:
    return socket.gethostname()


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """``(state, start time in seconds since the epoch)`` of a process (Linux), else ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()  # the name in (...) may hold spaces
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def process_alive(pid: int, started: float | None = None) -> bool:
    """Whether process ``pid`` of this host exists and is not a zombie; with ``started`` (the
    run's start, seconds since the epoch) also that it is not a newer process reusing the pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return False
    found = _proc_stat(pid)
    if found is None:
        return True
    state, start = found
    if state == "Z":
        return False
    return started is None or start <= started + _CLOCK_SLACK_S


def _epoch(iso: Any) -> float | None:
    try:
        return _dt.datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def abandoned_reason(meta: Mapping[str, Any], meta_path: Path) -> str | None:
    """Why a run whose ``meta.json`` says ``running`` is in fact abandoned, or ``None`` while it
    may still run (see the module docstring)."""
    pid = meta.get("pid")
    worker = str((meta.get("executor") or {}).get("worker") or "")
    host = meta.get("host") or (worker.rsplit(":", 1)[0] if ":" in worker else None)
    if isinstance(pid, int) and host == this_host():
        if process_alive(pid, _epoch(meta.get("started"))):
            return None
        return f"its process {pid} on {host} is gone"
    try:
        age = time.time() - meta_path.stat().st_mtime
    except OSError:
        return None
    if age <= STALE_AFTER_S:
        return None
    where = f"process {pid} on {host}" if host else "its process"
    return f"no heartbeat for {age / 60:.0f} min ({where})"


@contextlib.contextmanager
def heartbeat(path: Path, every: float = HEARTBEAT_S) -> Iterator[None]:
    """Touch ``path`` every ``every`` seconds (its modification time) while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            with contextlib.suppress(OSError):
                os.utime(path)

    thread = threading.Thread(target=beat, name="toolkit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
