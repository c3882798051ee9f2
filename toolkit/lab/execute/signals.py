"""How SIGINT and SIGTERM are taken while runs go: raised where work may stop, held where files
are being made consistent.

- :func:`signals_raise`: the first signal raises :class:`~toolkit.lab.errors.RunInterrupted`,
  once. Later signals are held (a pool's parent passes Ctrl-C on to workers that had it from
  the terminal too: the second must not cut short the code that handles the first). When the
  raise was swallowed (an ``except BaseException`` in the experiment, a callback whose
  exception Python only prints, such as an import lock's) the signal is raised again after
  ``insist`` seconds, until it takes.
- :func:`signals_deferred`: signals are remembered, not acted on.

Python runs signal handlers in the main thread only: elsewhere both leave the handlers alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator, Sequence

from toolkit.lab.errors import RunInterrupted

__all__ = ["INSIST_S", "SIGNALS", "signals_deferred", "signals_raise"]

#: the signals a run, a pool and the command line take over
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: seconds after which a signal raised and swallowed is raised again (runs, the command line)
INSIST_S = 1.0


class _Raiser:
    """The handler of :func:`signals_raise`: raises the first signal, holds the others."""

    def __init__(self, held: list[int], insist: float | None) -> None:
        self.held, self.insist = held, insist
        self.raised = self.closing = False
        self.timer: threading.Timer | None = None

    def __call__(self, signum: int, frame: object) -> None:
        if self.raised or self.closing:
            self.held.append(signum)
            return
        self.raise_(signum)

    def raise_(self, signum: int) -> None:
        self.raised = True
        if self.insist is not None:
            self.timer = threading.Timer(self.insist, self._again, (signum,))
            self.timer.daemon = True
            self.timer.start()
        raise RunInterrupted(signum)

    def _again(self, signum: int) -> None:
        """Still inside the ``with`` ``insist`` seconds after the raise: it was swallowed."""
        if not self.closing:
            self.raised = False
            os.kill(os.getpid(), signum)

    def close(self) -> None:
        self.closing = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()


@contextlib.contextmanager
def signals_raise(pending: Sequence[int] = (), *, insist: float | None = None
                  ) -> Iterator[list[int]]:
    """SIGINT/SIGTERM raise :class:`RunInterrupted` inside the ``with`` (see the module
    docstring); a signal already received (``pending``) raises at once. Yields the list the
    held signals are appended to: ``pending`` itself when it is a list (the one
    :func:`signals_deferred` yields), so that the code around sees them."""
    held = pending if isinstance(pending, list) else list(pending)
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    raiser = _Raiser(held, insist)
    old = {s: signal.signal(s, raiser) for s in SIGNALS}
    try:
        if held:
            raiser.raise_(held[0])
        yield held
    finally:
        raiser.close()
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """While a run's files are made or finished, SIGINT/SIGTERM are remembered, not acted on:
    yields the list of the signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    old = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in SIGNALS}
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)
