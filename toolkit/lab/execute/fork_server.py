"""Imported first by a local pool's fork server (``set_forkserver_preload``): from here on
SIGINT and SIGTERM are blocked there, and in every worker forked from it until the worker
installs its own handlers (:func:`~toolkit.lab.execute.signals.block_for_workers`). Ctrl-C
while the pool starts thus neither ends the fork server as it preloads nor a worker half
started. Imported anywhere else (a test, a tool that imports every module), it blocks
nothing: a process that blocked them would pass the mask on to every process it starts."""

from __future__ import annotations

import sys

from toolkit.lab.execute.signals import block_for_workers


def _in_fork_server() -> bool:
    """Whether this import runs inside ``multiprocessing.forkserver.main`` (its preload)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and \
                frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


if _in_fork_server():
    block_for_workers()
