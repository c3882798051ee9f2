"""Running many planned runs: here, in a pool of processes (``concurrent.futures``), or on Dask.

:func:`run_all` takes the runs (:class:`~toolkit.lab.plan.config.RunSpec`) and an
:class:`~toolkit.lab.results.schema.ExecutorConfig`:

- ``local`` with one worker: one run after the other in this process;
- ``local`` with ``workers > 1``: a ``ProcessPoolExecutor`` whose workers are forked from a
  fork server that imported torch and the experiments once (:func:`start_pool_server`);
- ``dask``: tasks on a Dask cluster (:mod:`toolkit.lab.execute.dask`).

Ctrl-C is honoured at every moment: while the pool starts, the parent takes it (the pool's
workers ignore it between runs); then the runs in progress are sent SIGTERM, mark themselves
``interrupted``, and nothing more is started. Whatever the executor, a run sets its own seed
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit.lab.errors import RunInterrupted
from toolkit.lab.execute.context import Reporter
from toolkit.lab.execute.run import Finish, RunOutcome, execute, signals_deferred, signals_raise
from toolkit.lab.plan.config import RunSpec
from toolkit.lab.results.files import confined
from toolkit.lab.results.schema import ExecutorConfig

__all__ = ["Progress", "run_all", "start_pool_server"]

#: ``on_done(index, total, outcome)``: called as each run ends, in the order they end.
Progress = Callable[[int, int, RunOutcome], None]
#: ``watch(index)``: the reporter the progress of the run at ``index`` goes to.
Watch = Callable[[int], Reporter]

_QUEUE: Any = None  # a pool worker's queue to the parent (set by _worker_init)
#: the signal that stopped a run of this pool worker: it starts no other run (a SIGTERM from
#: the parent that arrives while a run's files are finished is held there, not acted on)
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


def _worker_init(queue: Any, env: dict[str, str], path: list[str], cwd: str) -> None:
    """A worker takes this process's environment, import path and folder (a fork server's
    worker starts with the server's), ignores Ctrl-C between runs (the parent decides; during
    a run the runner marks the run interrupted) and lets SIGINT through again."""
    global _QUEUE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back (not ignored: it is delivered when this ends) while a process that
    must not see it starts; the fork server and its workers inherit the mask."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start_pool_server(modules: Sequence[str] | None = None) -> Any:
    """Start the fork server of this process's pools now, importing ``modules`` (default: the
    runner and every installed experiment) while this process goes on planning; returns the
    multiprocessing context a pool uses (``spawn`` where there is no fork server)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver

    from toolkit.lab.plan.registry import installed_modules

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(modules) if modules is not None
                               else [__name__, *installed_modules()])
    with _sigint_blocked():
        forkserver.ensure_running()  # returns at once; the imports go on over there
    return ctx


def _relay(queue: Any, watch: Watch | None, started: dict[int, int]) -> None:
    """In the parent: pass what workers report to the watching reporters, until ``None``."""
    while (message := queue.get()) is not None:
        kind, index, args = message
        if kind == "started":
            started[index] = args[0]
        elif watch is not None:
            with contextlib.suppress(Exception):  # a bar that fails never stops the runs
                getattr(watch(index), kind)(*args)


def _in_pool(specs: Sequence[RunSpec], workers: int, argv: list[str], finish: Finish | None,
             on_done: Progress | None, watch: Watch | None) -> tuple[list[RunOutcome], int]:
    ctx = start_pool_server(_preload(specs))
    queue = ctx.SimpleQueue()
    started: dict[int, int] = {}
    relay = threading.Thread(target=_relay, args=(queue, watch, started), daemon=True)
    relay.start()
    outcomes: list[RunOutcome] = []
    status = 0
    futures: dict[cf.Future[RunOutcome], int] = {}
    pool = None
    with signals_raise():
        try:
            # workers are forked at submit by the fork server, whose SIGINT is blocked
            pool = cf.ProcessPoolExecutor(min(workers, len(specs)), mp_context=ctx,
                                          initializer=_worker_init, initargs=(
                                              queue, dict(os.environ), list(sys.path),
                                              os.getcwd()))
            futures = {pool.submit(_in_worker, i, spec, argv, finish): i
                       for i, spec in enumerate(specs)}
            for future in cf.as_completed(futures):
                outcome = future.result()
                outcomes.append(outcome)
                if on_done:
                    on_done(futures[future], len(specs), outcome)
                status = max(status, outcome.exit_code)
                if outcome.status == "interrupted":  # a worker's run was stopped: all stop
                    raise RunInterrupted(outcome.exit_code - 128
                                         if outcome.exit_code > 128 else signal.SIGINT)
            pool.shutdown(wait=True)
        except (RunInterrupted, KeyboardInterrupt, cf.process.BrokenProcessPool) as err:
            status = (err.exit_code if isinstance(err, RunInterrupted)
                      else 130 if isinstance(err, KeyboardInterrupt) else 1)
            with signals_deferred():  # more signals change nothing now
                for child in multiprocessing.active_children():
                    with contextlib.suppress(OSError):
                        os.kill(child.pid, signal.SIGTERM)  # runs in progress mark themselves
                if pool is not None:
                    pool.shutdown(wait=True, cancel_futures=True)
                for future, i in futures.items():
                    if future.done() and not future.cancelled() and future.exception() is None \
                            and future.result() not in outcomes:
                        outcomes.append(future.result())
                        if on_done:
                            on_done(i, len(specs), future.result())
        finally:
            queue.put(None)
            relay.join(timeout=5)
    return outcomes, status


def _here(specs: Sequence[RunSpec], argv: list[str], finish: Finish | None,
          on_done: Progress | None, watch: Watch | None, quiet: bool
          ) -> tuple[list[RunOutcome], int]:
    outcomes: list[RunOutcome] = []
    status = 0
    for i, spec in enumerate(specs):
        with confined(spec.config.output_dir):  # nothing of the run lands outside its folder
            outcome = execute(spec, quiet=quiet, argv=argv, finish=finish,
                              reporter=watch(i) if watch is not None else None)
        outcomes.append(outcome)
        if on_done:
            on_done(i, len(specs), outcome)
        if outcome.status == "interrupted":
            return outcomes, outcome.exit_code
        status = max(status, outcome.exit_code)
    return outcomes, status


def run_all(specs: Sequence[RunSpec], *, executor: ExecutorConfig | None = None,
            quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, on_done: Progress | None = None,
            watch: Watch | None = None) -> tuple[list[RunOutcome], int]:
    """Run every planned run; the outcomes (in the order they ended) and the exit status:
    0 when all completed, 1 when any failed (the others still run), 128 + the signal when
    interrupted (nothing more is started; runs in progress are marked ``interrupted``).

    ``finish(run_dir, experiment)`` runs after each run's files are written (in a pool, in
    the worker: a module-level function); ``watch(index)`` gives the reporter of each run's
    progress (local executors; Dask runs report as they end).
    """
    executor = executor or ExecutorConfig()
    argv = list(sys.argv if argv is None else argv)
    if executor.kind == "dask":
        from toolkit.lab.execute.dask import run_on_dask

        return run_on_dask(specs, executor, argv=argv, finish=finish, on_done=on_done)
    if executor.workers <= 1 or len(specs) <= 1:
        return _here(specs, argv, finish, on_done, watch, quiet)
    return _in_pool(specs, executor.workers, argv, finish, on_done, watch)
