"""SIGINT and SIGTERM, in one place: what each process of the lab does with them.

- A command (:func:`interruptible`): either signal raises
  :class:`~toolkit.lab.errors.RunInterrupted` in its main thread, so that it ends with one line
  and status 128 + the signal. The process's own command keeps that answer until the process
  ends: once its last exit hook has run the process ends itself with the command's status
  (:func:`ending`), before Python puts the default handlers back to tear the modules down.
- A run (:data:`held_signals`): while its record is written a signal is kept, and given back
  once the record is whole; the experiment and the report run with it lifted.
- A pool worker (:data:`worker_signals`): the first signal interrupts its run under way, and
  no other run starts. Its fork server blocks both signals (:func:`block_for_workers`), so that
  a worker forked from it keeps one that comes before its handlers are installed, rather than
  dying half started (a broken pool loses the outcomes of the runs under way).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from toolkit.lab.errors import RunInterrupted

__all__ = ["STOPS", "block_for_workers", "ending", "held_signals", "interrupted_line",
           "interruptible", "say_interrupted", "worker_signals"]

#: the signals that stop the lab's work: Ctrl-C and a polite kill
STOPS = (signal.SIGINT, signal.SIGTERM)
_SAID = [0]  # the signal this command has said it was interrupted by (0: none yet)
_STATUS: list[int | None] = [None]  # the exit status of this process's own command, once ended


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def interrupted_line(signum: int) -> str:
    """``toolkit: interrupted by SIGINT (exit status 130)``."""
    return f"toolkit: interrupted by {signal.Signals(signum).name} (exit status {128 + signum})"


def say_interrupted(signum: int, text: str | None = None) -> int:
    """Say on stderr that the command was interrupted (``text``, default
    :func:`interrupted_line`), once per command; its exit status, 128 + the first signal."""
    if not _SAID[0]:
        _SAID[0] = signum
        print(text or interrupted_line(signum), file=sys.stderr, flush=True)
    return 128 + _SAID[0]


def _raise(signum: int, frame: object) -> None:
    raise RunInterrupted(signum)


def _exit_late(signum: int, frame: object) -> None:
    """A signal once the command has ended (its process is exiting): its line, unless said
    already, and its status."""
    code = 128 + signum
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        code = say_interrupted(signum)
    os._exit(code)


def ending(status: int) -> int:
    """The process's own command ended with ``status``: the process ends with it once its
    exit hooks have run (see :func:`interruptible`); returns ``status``."""
    _STATUS[0] = status
    return status


def _end_here() -> None:
    """The last exit hook: end the process with its command's status while a signal still
    gets its line, rather than in the module teardown that follows, where it would not."""
    if _STATUS[0] is None:  # not the command's process (a child forked from it), or no end
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(_STATUS[0])


@contextlib.contextmanager
def interruptible(*, to_the_end: bool = False) -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`~toolkit.lab.errors.RunInterrupted` inside (in the
    main thread; elsewhere nothing changes). Afterwards the handlers before are put back, or,
    ``to_the_end`` (the process's own command), a signal while the process exits still ends
    it with its line and status (with :func:`ending`: until the process ends)."""
    if not _main_thread():
        yield
        return
    if to_the_end:  # registered first, it runs last
        atexit.unregister(_end_here)
        atexit.register(_end_here)
    _SAID[0] = 0
    old = {s: signal.signal(s, _raise) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, _exit_late if to_the_end else handler)


class _HeldSignals:
    """Holds (which nest) keep SIGINT and SIGTERM and give the first to the handlers in place
    before once the outermost hold ends; inside :meth:`lifted` those handlers act at once. Only
    the main thread holds signals."""

    def __init__(self) -> None:
        self.depth, self.kept, self.handlers = 0, list[int](), dict[int, Any]()

    def _hold(self) -> None:
        self.handlers = {s: signal.signal(s, lambda signum, _: self.kept.append(signum))
                         for s in STOPS}

    def _release(self) -> None:
        for s, handler in self.handlers.items():
            signal.signal(s, handler)
        if self.kept:
            signum, self.kept[:] = self.kept[0], []
            signal.raise_signal(signum)

    def __enter__(self) -> _HeldSignals:
        if _main_thread():
            self.depth += 1
            if self.depth == 1:
                self._hold()
        return self

    def __exit__(self, *exc: object) -> None:
        if _main_thread():
            self.depth -= 1
            if self.depth == 0:
                self._release()

    @contextlib.contextmanager
    def lifted(self) -> Iterator[None]:
        """Where a signal may stop the run (the experiment, the report)."""
        if not self.depth or not _main_thread():
            yield
            return
        try:
            self._release()
            yield
        finally:
            self._hold()


#: the one hold of this process (nested by a pool worker around its run)
held_signals = _HeldSignals()


class _WorkerSignals:
    """A pool worker's signals: ``running`` while a run is under way, ``stopped_by`` the
    first signal that came (0: none)."""

    def __init__(self) -> None:
        self.running, self.stopped_by = False, 0

    def _on_signal(self, signum: int, frame: object) -> None:
        """The first SIGINT/SIGTERM interrupts the run under way; no other run starts."""
        first, self.stopped_by = not self.stopped_by, self.stopped_by or signum
        if first and self.running:
            raise RunInterrupted(signum)

    def install(self) -> None:
        """Make this process a pool worker (its initializer calls this): a signal kept blocked
        since it was forked (:func:`block_for_workers`) comes now, to these handlers."""
        for signum in STOPS:
            signal.signal(signum, self._on_signal)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Around one run in a worker: not started once the pool is being stopped; a signal
        that comes once its record is written stops the next run."""
        with held_signals:
            if self.stopped_by:
                raise RunInterrupted(self.stopped_by)
            self.running = True
            try:
                yield
            finally:
                self.running = False


#: this process's signals as a pool worker (unused elsewhere)
worker_signals = _WorkerSignals()


def block_for_workers() -> None:
    """Block SIGINT and SIGTERM in this process for good: a pool's fork server does (its first
    preloaded module, :mod:`toolkit.lab.execute.fork_server`). A process forked from it inherits
    the mask (POSIX ``fork``), so a signal that reaches a new worker before
    :meth:`_WorkerSignals.install` stays pending until then instead of raising
    ``KeyboardInterrupt`` in its start-up. The fork server itself ignores SIGINT and ends with
    the process that started it."""
    if hasattr(signal, "pthread_sigmask"):  # POSIX; a fork server exists only there
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
