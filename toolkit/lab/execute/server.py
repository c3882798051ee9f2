"""The fork server a local pool's workers are forked from: started early, waited for, stopped.

A pool's workers are forked from a fork server (:mod:`multiprocessing.forkserver`) that has
imported torch, the runner and the experiments once. Those imports take seconds, so the command
line starts the server before it plans (:func:`start_pool_server`) and a pool waits until the
server has imported everything (:func:`wait_pool_server`) before it starts a worker: a worker
asked for earlier is forked only once the server is done, and a Ctrl-C in the meantime would
leave it half made (forked after its parent has gone, it prints a traceback). While a pool
waits, Ctrl-C ends the server (:func:`stop_pool_server`): nothing had started.

The server says where it stands through a FIFO named in its environment (:data:`FIFO_ENV`):
this module, the first it imports, writes the server's pid and keeps the FIFO open;
:mod:`toolkit.lab.execute.server_ready`, the last, writes ``ready`` and closes it. The end of
the FIFO without ``ready`` means that the server died.

Ctrl-C in a terminal reaches the whole process group: the server must not die of it half-way
through an import. SIGINT is blocked while it starts (after the resource tracker, whose start
unblocks it) and ignored from its first import on.

:data:`PRELOAD_ENV` names more modules for the server to import ahead (comma-separated), e.g.
the heavy dependencies of a loose experiment file.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FIFO_ENV", "PRELOAD_ENV", "announce_ready", "start_pool_server",
           "stop_pool_server", "wait_pool_server"]

#: the FIFO the server reports to (set in its environment only)
FIFO_ENV = "TOOLKIT_POOL_SERVER_FIFO"
#: more modules the server imports ahead, comma-separated
PRELOAD_ENV = "TOOLKIT_POOL_PRELOAD"
#: seconds a new server has to say its pid: an interpreter starts in well under one; past
#: this the pool stops waiting and starts its workers as multiprocessing would
START_TIMEOUT_S = 60.0
#: seconds a server being stopped has to say its pid (it does within a tenth of one)
START_GRACE_S = 2.0
_READY = "toolkit.lab.execute.server_ready"
#: the runner's module, which every worker imports (torch with it)
RUNNER = "toolkit.lab.execute.local"


@dataclass
class _Server:
    """The server this process started and has not yet seen ready."""

    fd: int  # the FIFO's read end
    folder: str
    pid: int | None = None
    text: str = ""


_SERVER: _Server | None = None


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back (not ignored: it is delivered when this ends) while a process that
    must not see it starts; the processes started inherit the mask."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _preload(modules: Sequence[str] | None) -> list[str]:
    from toolkit.lab.plan.registry import installed_modules

    named = list(modules) if modules is not None else [RUNNER, *installed_modules()]
    more = [m.strip() for m in os.environ.get(PRELOAD_ENV, "").split(",") if m.strip()]
    return list(dict.fromkeys([__name__, *named, *more, _READY]))


def start_pool_server(modules: Sequence[str] | None = None) -> Any:
    """Start the fork server of this process's pools now, importing ``modules`` (default: the
    runner and every installed experiment) while this process goes on; returns the
    multiprocessing context a pool uses (``spawn`` where there is no fork server). A server
    already started is left as it is."""
    global _SERVER
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver, resource_tracker

    ctx = multiprocessing.get_context("forkserver")
    if _SERVER is not None:
        return ctx
    ctx.set_forkserver_preload(_preload(modules))
    # the tracker first: starting it unblocks SIGINT, which the server must start without
    resource_tracker.ensure_running()
    folder = tempfile.mkdtemp(prefix="toolkit-pool-")
    fifo = os.path.join(folder, "server")
    os.mkfifo(fifo, 0o600)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the server's open needs a reader
    os.environ[FIFO_ENV] = fifo
    before = _running_pid(forkserver)
    try:
        with _sigint_blocked():
            forkserver.ensure_running()  # returns at once; the imports go on over there
    finally:
        del os.environ[FIFO_ENV]
    _SERVER = _Server(fd, folder)
    if before is not None and _running_pid(forkserver) == before:
        _forget(_SERVER)  # an earlier pool's server, alive and ready: it will say nothing
    return ctx


def _running_pid(forkserver: Any) -> int | None:
    """The pid of this process's fork server as multiprocessing keeps it (``None`` when it
    has started none): the same pid after ``ensure_running()`` means the server was alive."""
    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


def wait_pool_server() -> None:
    """Return once the server this process started has imported everything (or died, or was
    started by someone else and says nothing): at once when there is none to wait for.
    Interruptible: a signal raises here, as anywhere."""
    server = _SERVER
    if server is None:
        return
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        timeout = None if server.pid is not None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([server.fd], [], [], timeout)
        if not readable:  # no word from the server: not one this process started
            break
        chunk = os.read(server.fd, 4096).decode("ascii", "replace")
        if not chunk:  # the server closed its end: ready, or dead
            break
        server.text += chunk
        lines = server.text.split("\n")
        if server.pid is None and len(lines) > 1 and lines[0].isdigit():
            server.pid = int(lines[0])
        if "ready" in lines:
            break
    _forget(server)


def stop_pool_server() -> None:
    """End the server this process started if it is still importing (on Ctrl-C, while no
    worker was started from it): it would import on for nothing."""
    server = _SERVER
    if server is None:
        return
    deadline = time.monotonic() + START_GRACE_S
    while server.pid is None and time.monotonic() < deadline:  # it says it within ~0.1 s
        readable, _, _ = select.select([server.fd], [], [], deadline - time.monotonic())
        chunk = os.read(server.fd, 4096).decode("ascii", "replace") if readable else ""
        if not chunk:
            break
        server.text += chunk
        first = server.text.split("\n")[0]
        server.pid = int(first) if server.text.count("\n") and first.isdigit() else None
    if server.pid is not None and "ready" not in server.text.split("\n"):
        with contextlib.suppress(OSError):
            os.kill(server.pid, signal.SIGTERM)  # SIGINT it ignores; it holds nothing
    _forget(server)


def _forget(server: _Server) -> None:
    global _SERVER
    with contextlib.suppress(OSError):
        os.close(server.fd)
    shutil.rmtree(server.folder, ignore_errors=True)
    _SERVER = None


# ----------------------------------------------------------------------------- in the server

_ANNOUNCE_FD: int | None = None


def _announce_start() -> None:
    """In the server (the FIFO named in its environment), at its first import: ignore SIGINT
    and say its pid."""
    global _ANNOUNCE_FD
    path = os.environ.pop(FIFO_ENV, None)
    if not path:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _ANNOUNCE_FD = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(_ANNOUNCE_FD, f"{os.getpid()}\n".encode("ascii"))
    except OSError:  # the process that started it has gone: nobody to tell
        _ANNOUNCE_FD = None


def announce_ready() -> None:
    """In the server, at its last import: say ``ready`` and close the FIFO (its workers are
    forked from it and must not hold it)."""
    global _ANNOUNCE_FD
    fd, _ANNOUNCE_FD = _ANNOUNCE_FD, None
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, b"ready\n")
        with contextlib.suppress(OSError):
            os.close(fd)


_announce_start()
