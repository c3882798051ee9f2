"""Running many planned runs: here, in a pool of processes (``concurrent.futures``), or on Dask.

:func:`run_all` takes the runs (:class:`~toolkit.lab.plan.config.RunSpec`) and an
:class:`~toolkit.lab.results.schema.ExecutorConfig`:

- ``local`` with one worker: one run after the other in this process;
- ``local`` with ``workers > 1``: a ``ProcessPoolExecutor`` whose workers are forked from a
  fork server that imported torch and the experiments once (:func:`start_pool_server`);
- ``dask``: tasks on a Dask cluster (:mod:`toolkit.lab.execute.dask`).

Ctrl-C is honoured at every moment. While the pool's fork server imports, nothing is started
and the server is ended (:mod:`toolkit.lab.execute.server`); the pool is then made whole
before a signal is acted on (milliseconds), and from there on the signal the parent received
is passed on to the workers whose run goes on, which mark the run ``interrupted`` by it; the
other workers start nothing more (SIGINT between runs only stops them). Whatever the executor, a run sets its own seed
and thread count, so the same config and seed give the same ``summary.json`` bytes.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from toolkit.lab.errors import RunInterrupted
from toolkit.lab.execute.context import Reporter
from toolkit.lab.execute.run import Finish, RunOutcome, execute
from toolkit.lab.execute.server import start_pool_server, stop_pool_server, wait_pool_server
from toolkit.lab.execute.signals import signals_deferred, signals_raise
from toolkit.lab.plan.config import RunSpec
from toolkit.lab.results.files import confined
from toolkit.lab.results.schema import ExecutorConfig

__all__ = ["Progress", "run_all", "start_pool_server"]

#: ``on_done(index, total, outcome)``: called as each run ends, in the order they end.
Progress = Callable[[int, int, RunOutcome], None]
#: ``watch(index)``: the reporter the progress of the run at ``index`` goes to.
Watch = Callable[[int], Reporter]
#: ``on_phase(text)``: what the executor does before the runs start (``""``: the runs go)
Phase = Callable[[str], None]

_QUEUE: Any = None  # a pool worker's queue to the parent (set by _worker_init)
#: the signal that stopped this pool worker: it starts no other run (Ctrl-C between runs, or
#: a run of its stopped by a signal)
_STOPPED_BY = 0


class _QueueReporter:
    """A pool worker's reporter: each report of run ``index`` goes to the parent."""

    def __init__(self, index: int) -> None:
        self.index = index

    def advance(self, label: str, done: int, total: int, current: str) -> None:
        _QUEUE.put(("advance", self.index, (label, done, total, current)))

    def write(self, text: str) -> None:
        _QUEUE.put(("write", self.index, (text,)))

    def child_done(self, run_dir: str, name: str) -> None:
        _QUEUE.put(("child_done", self.index, (run_dir, name)))


def _stop(signum: int, frame: object) -> None:
    """A pool worker's SIGINT between runs: start no other run (it waits for work, or loads
    an experiment, with nothing to mark)."""
    global _STOPPED_BY
    _STOPPED_BY = _STOPPED_BY or signum


def _worker_init(queue: Any, env: dict[str, str], path: list[str], cwd: str) -> None:
    """A worker takes this process's environment, import path and folder (a fork server's
    worker starts with the server's); SIGINT between runs stops it from starting another
    (the parent decides; during a run the runner marks the run interrupted), then SIGINT,
    blocked while the worker started, is let through."""
    global _QUEUE
    signal.signal(signal.SIGINT, _stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _QUEUE = queue
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    os.chdir(cwd)


def _in_worker(index: int, spec: RunSpec, argv: list[str], finish: Finish | None
               ) -> RunOutcome:
    global _STOPPED_BY
    if _STOPPED_BY:  # the pool is being stopped: this run is not started
        raise RunInterrupted(_STOPPED_BY)
    _QUEUE.put(("started", index, (os.getpid(),)))
    try:
        with confined(spec.config.output_dir):  # nothing of the run lands outside its folder
            outcome = execute(spec, quiet=True, argv=argv, finish=finish,
                              reporter=_QueueReporter(index),
                              executor={"kind": "local", "pid": os.getpid()})
    except Exception as err:  # not a failing experiment: a fault of the runner itself
        return RunOutcome(Path(spec.config.output_dir) / spec.config.experiment, "failed", 1,
                          f"could not run: {type(err).__name__}: {err}")
    if outcome.exit_code > 128:  # a signal reached the run: the pool stops
        _STOPPED_BY = outcome.exit_code - 128
    return outcome


def _preload(specs: Sequence[RunSpec]) -> list[str]:
    """What every worker imports once: the runner (torch with it) and each experiment a run
    may contain, by module name (a loose file's experiment is loaded by the worker)."""
    names = dict.fromkeys([__name__])
    for spec in specs:
        for part in spec.experiment.parts.values():
            if part.source is not None and part.source.module is not None:
                names[part.source.module] = None
    return list(names)


def _relay(queue: Any, watch: Watch | None, started: dict[int, int]) -> None:
    """In the parent: pass what workers report to the watching reporters, until ``None``
    (a run that starts is said to its reporter's ``run_started``, when it has one)."""
    while (message := queue.get()) is not None:
        kind, index, args = message
        if kind == "started":
            started[index] = args[0]
            kind, args = "run_started", ()
        if watch is not None:
            with contextlib.suppress(Exception):  # a bar that fails never stops the runs
                method = getattr(watch(index), kind, None)
                if method is not None:
                    method(*args)


def _stop_workers(signum: int, started: dict[int, int], ended: set[int]) -> None:
    """Pass the signal on to the workers whose run goes on (they mark it interrupted by that
    signal); the others get SIGINT, which only keeps them from starting another run."""
    running = {pid for index, pid in started.items() if index not in ended}
    for child in multiprocessing.active_children():
        if child.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(child.pid, signum if child.pid in running else signal.SIGINT)


def _in_pool(specs: Sequence[RunSpec], workers: int, argv: list[str], finish: Finish | None,
             on_done: Progress | None, watch: Watch | None, on_phase: Phase | None
             ) -> tuple[list[RunOutcome], int]:
    ctx = start_pool_server(_preload(specs))
    n = min(workers, len(specs))
    outcomes: list[RunOutcome] = []
    status = 0
    started: dict[int, int] = {}
    futures: dict[cf.Future[RunOutcome], int] = {}
    pool: cf.ProcessPoolExecutor | None = None
    queue: Any = None
    relay: threading.Thread | None = None

    def done(i: int, outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        if on_done:
            on_done(i, len(specs), outcome)

    with signals_raise():
        try:
            if on_phase is not None:
                on_phase(f"starting {n} processes")
            try:
                wait_pool_server()  # no worker before the server has imported everything
            except BaseException:
                stop_pool_server()
                raise
            # the pool is made whole before a signal is acted on (forks: milliseconds)
            with signals_deferred() as received:
                queue = ctx.SimpleQueue()
                relay = threading.Thread(target=_relay, args=(queue, watch, started),
                                         daemon=True)
                relay.start()
                pool = cf.ProcessPoolExecutor(n, mp_context=ctx, initializer=_worker_init,
                                              initargs=(queue, dict(os.environ),
                                                        list(sys.path), os.getcwd()))
                futures = {pool.submit(_in_worker, i, spec, argv, finish): i
                           for i, spec in enumerate(specs)}
            if received:
                raise RunInterrupted(received[0])
            if on_phase is not None:
                on_phase("")
            for future in cf.as_completed(futures):
                outcome = future.result()
                done(futures[future], outcome)
                status = max(status, outcome.exit_code)
                if outcome.exit_code > 128:  # a worker's run was stopped: all stop
                    raise RunInterrupted(outcome.exit_code - 128)
            pool.shutdown(wait=True)
        except (RunInterrupted, KeyboardInterrupt, BrokenProcessPool) as err:
            status = (err.exit_code if isinstance(err, RunInterrupted)
                      else 130 if isinstance(err, KeyboardInterrupt) else 1)
            with signals_deferred():  # more signals change nothing now
                if pool is not None:
                    ended = {i for f, i in futures.items() if f.done()}
                    _stop_workers(status - 128 if status > 128 else signal.SIGTERM, started,
                                  ended)
                    pool.shutdown(wait=True, cancel_futures=True)
                for future, i in futures.items():
                    if future.done() and not future.cancelled() and future.exception() is None \
                            and future.result() not in outcomes:
                        done(i, future.result())
        finally:
            if queue is not None:
                queue.put(None)
            if relay is not None:
                relay.join(timeout=5)
    return outcomes, status


def _here(specs: Sequence[RunSpec], argv: list[str], finish: Finish | None,
          on_done: Progress | None, watch: Watch | None, quiet: bool
          ) -> tuple[list[RunOutcome], int]:
    outcomes: list[RunOutcome] = []
    status = 0
    for i, spec in enumerate(specs):
        reporter = watch(i) if watch is not None else None
        if reporter is not None and hasattr(reporter, "run_started"):
            reporter.run_started()
        with confined(spec.config.output_dir):  # nothing of the run lands outside its folder
            outcome = execute(spec, quiet=quiet, argv=argv, finish=finish, reporter=reporter)
        outcomes.append(outcome)
        if on_done:
            on_done(i, len(specs), outcome)
        if outcome.exit_code > 128:  # interrupted, or its report was: nothing more starts
            return outcomes, outcome.exit_code
        status = max(status, outcome.exit_code)
    return outcomes, status


def run_all(specs: Sequence[RunSpec], *, executor: ExecutorConfig | None = None,
            quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, on_done: Progress | None = None,
            watch: Watch | None = None, on_phase: Phase | None = None
            ) -> tuple[list[RunOutcome], int]:
    """Run every planned run; the outcomes (in the order they ended) and the exit status:
    0 when all completed, 1 when any failed (the others still run), 128 + the signal when
    interrupted (nothing more is started; runs in progress are marked ``interrupted``).

    ``finish(run_dir, experiment)`` runs after each run's files are written (in a pool, in
    the worker: a module-level function); ``watch(index)`` gives the reporter of each run's
    progress (local executors; Dask runs report as they end; a reporter's ``run_started()``,
    when it has one, is called as its run starts); ``on_phase(text)`` hears what a pool does
    before its runs start (``""`` once they go).
    """
    executor = executor or ExecutorConfig()
    argv = list(sys.argv if argv is None else argv)
    if executor.kind == "dask":
        from toolkit.lab.execute.dask import run_on_dask

        return run_on_dask(specs, executor, argv=argv, finish=finish, on_done=on_done)
    if executor.workers <= 1 or len(specs) <= 1:
        return _here(specs, argv, finish, on_done, watch, quiet)
    return _in_pool(specs, executor.workers, argv, finish, on_done, watch, on_phase)
