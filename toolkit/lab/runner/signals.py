"""SIGINT and SIGTERM during a run: raised as :class:`RunInterrupted` while the experiment runs,
remembered (never acted on mid-write) while a run's files are made and finished.

From before ``meta.json`` says "running" to its last write, the two signals never take their
default action, which would leave the run saying "running".
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence

from toolkit.lab.runner.errors import RunInterrupted

__all__ = ["signals_deferred", "signals_raise"]


@contextlib.contextmanager
def signals_raise(pending: Sequence[int] = ()) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into :class:`RunInterrupted` (main thread only); a signal in
    ``pending`` (received meanwhile, see :func:`signals_deferred`) raises at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise RunInterrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if pending:
            raise RunInterrupted(pending[0])
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """While finishing a run's files, remember signals instead of raising mid-write."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    old = {s: signal.signal(s, lambda signum, frame: received.append(signum))
           for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)
