"""Many planned runs: one after the other here, in a process pool, or on Dask (:mod:`.dask`).

The pool is a ``ProcessPoolExecutor`` on a ``forkserver`` context that preloads the runner and
the experiments. Ctrl-C (or SIGTERM) cancels the runs not started and is passed on to the
workers, whose runs under way end ``interrupted``; a worker also ends with its pool's maker.
A signal waits until the submission of a run, or the telling of a run's end, is whole: every
run a worker may start is followed here, and every run that ended is counted once.
What the runs tell as they go (:class:`~toolkit.lab.execute.context.Progress`) reaches
``on_progress`` here: from a worker through a queue the pool's workers are made with.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from multiprocessing.queues import SimpleQueue
from typing import Any

from toolkit.lab.errors import RunInterrupted
from toolkit.lab.execute.context import Progress
from toolkit.lab.execute.dask import run_on_dask
from toolkit.lab.execute.run import Finish, Listener, RunOutcome, execute
from toolkit.lab.execute.signals import held_signals, worker_signals
from toolkit.lab.plan.config import RunSpec
from toolkit.lab.results.files import confined
from toolkit.lab.results.schema import ExecutorConfig

__all__ = ["run_all"]

_TOLD: SimpleQueue[tuple[int, Progress]] | None = None  # a pool worker: where its runs tell

#: ``on_progress(index, progress)``: what run ``index`` tells as it goes
OnProgress = Callable[[int, Progress], Any]


def _outlive_no_pool_maker() -> None:
    """End this worker once its pool's maker ended (and a run under way is written): one that
    Ctrl-C reached before its maker knew its pid would otherwise wait forever."""
    multiprocessing.parent_process().join()  # type: ignore[union-attr]
    while worker_signals.running:
        time.sleep(0.1)
    os._exit(128 + (worker_signals.stopped_by or signal.SIGTERM))


def _worker_init(env: dict[str, str], path: list[str], cwd: str,
                 told: SimpleQueue[tuple[int, Progress]] | None = None) -> None:
    """A worker takes its pool maker's environment, import path and folder (the fork server
    has the first pool's) and the queue its runs tell through, and ends with its maker."""
    global _TOLD
    from tqdm import tqdm

    # a worker draws no bar of its own: a thread lock, not tqdm's default semaphore, which
    # a worker ended by its maker would leave behind ("leaked semaphore objects")
    tqdm.set_lock(threading.RLock())
    _TOLD = told
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    os.chdir(cwd)
    worker_signals.install()
    threading.Thread(target=_outlive_no_pool_maker, name="pool maker watch", daemon=True).start()


def _tell(index: int, progress: Progress) -> None:
    """A worker's run ``index`` tells its pool's maker (the put is done before it returns)."""
    if _TOLD is not None:
        _TOLD.put((index, progress))


def _run(spec: RunSpec, argv: list[str], finish: Finish | None, quiet: bool = True,
         pool: bool = True, index: int = 0, listener: Listener | None = None) -> RunOutcome:
    """One run here or in a worker (``pool``: a signal that comes once the record is written
    stops the next run; the exception, which may not pickle, stays in the worker; what the
    run tells goes to ``listener``, in a worker to the pool's queue)."""
    with worker_signals.run() if pool else contextlib.nullcontext():
        with confined(spec.config.output_dir):  # nothing of the run lands outside its folder
            outcome = execute(spec, quiet=quiet, argv=argv, finish=finish,
                              executor={"kind": "local", "pid": os.getpid()} if pool else None,
                              listener=partial(_tell, index) if pool else listener)
    return dataclasses.replace(outcome, exception=None) if pool else outcome


def _preload(specs: Sequence[RunSpec]) -> list[str]:
    """What the fork server imports once: the module that blocks its signals for the workers
    (:mod:`.fork_server`), this module and each part's module."""
    return list(dict.fromkeys(["toolkit.lab.execute.fork_server", __name__, *(
        part.source.module for spec in specs for part in spec.experiment.parts.values()
        if part.source is not None and part.source.module is not None)]))


def run_all(specs: Sequence[RunSpec], *, executor: ExecutorConfig | None = None,
            quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None,
            on_done: Callable[[int, int, RunOutcome], None] | None = None,
            on_progress: OnProgress | None = None) -> tuple[list[RunOutcome], int]:
    """Run every planned run; the outcomes (in the order they ended) and the exit status: 0
    all complete, 1 any failed, 128 + the signal when interrupted (nothing more starts).
    ``finish(run_dir, experiment)`` runs after each complete run (in a pool, in the worker);
    ``on_done(index, total, outcome)`` hears each run end, ``on_progress(index, progress)``
    each experiment of a run start, go part of its way and end (before its run's
    ``on_done``)."""
    executor, argv = executor or ExecutorConfig(), list(sys.argv if argv is None else argv)
    outcomes: list[RunOutcome] = []

    def ended(i: int, outcome: RunOutcome) -> None:
        with held_signals:  # counted here and told to on_done, or neither
            outcomes.append(outcome)
            if on_done is not None:
                on_done(i, len(specs), outcome)

    if executor.kind == "dask":
        return run_on_dask(specs, executor, argv=argv, finish=finish, on_done=on_done)
    if executor.workers <= 1 or len(specs) <= 1:
        for i, spec in enumerate(specs):
            try:  # a signal as the run returns waits until its end is counted
                with held_signals:
                    ended(i, _run(spec, argv, finish, quiet, pool=False, listener=None
                                  if on_progress is None else partial(on_progress, i)))
            except KeyboardInterrupt as err:  # its report was stopped: the run stays complete
                return outcomes, 128 + getattr(err, "signum", signal.SIGINT)
            if outcomes[-1].exit_code > 128:  # interrupted: nothing more starts
                return outcomes, outcomes[-1].exit_code
        return outcomes, max((o.exit_code for o in outcomes), default=0)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_preload(specs))
    told: SimpleQueue[tuple[int, Progress]] = ctx.SimpleQueue()

    def hear() -> None:  # what the workers told so far, in the order they told it
        while not told.empty():
            index, progress = told.get()
            if on_progress is not None:
                on_progress(index, progress)

    with cf.ProcessPoolExecutor(min(executor.workers, len(specs)), mp_context=ctx,
                                initializer=_worker_init,
                                initargs=(dict(os.environ), list(sys.path), os.getcwd(),
                                          told)) as pool:
        futures: dict[cf.Future[RunOutcome], int] = {}
        try:  # Ctrl-C can come while the workers start, in submit: it waits until the submit
            # returns, or the run would be queued (and a worker started for it) unseen here
            for i, spec in enumerate(specs):
                with held_signals:
                    futures[pool.submit(_run, spec, argv, finish, index=i)] = i
            pending = set(futures)
            while pending:  # a run's last words are in the queue before its result
                done, pending = cf.wait(pending, timeout=0.2, return_when=cf.FIRST_COMPLETED)
                hear()
                for future in done:
                    ended(futures[future], future.result())
                    if outcomes[-1].exit_code > 128:  # a worker's run was stopped: all stop
                        raise RunInterrupted(outcomes[-1].exit_code - 128)
        except (KeyboardInterrupt, BrokenProcessPool) as err:  # RunInterrupted too
            signum = getattr(err, "signum", signal.SIGINT if isinstance(
                err, KeyboardInterrupt) else signal.SIGTERM)
            for child in multiprocessing.active_children():  # the runs under way end
                with contextlib.suppress(OSError):
                    os.kill(child.pid, signum)
            pool.shutdown(wait=False, cancel_futures=True)
            # while they write that they were interrupted; a run with no worker left to end it
            # (the workers never started) is not waited for
            deadline = time.monotonic() + 60
            while (cf.wait(futures, timeout=0.1).not_done and multiprocessing.active_children()
                   and time.monotonic() < deadline):
                pass
            for child in multiprocessing.active_children():  # idle workers (or stuck ones)
                child.kill()
            for future, i in futures.items():
                if future.done() and not future.cancelled() and future.exception() is None \
                        and future.result() not in outcomes:
                    ended(i, future.result())
            return outcomes, 128 + signum if isinstance(err, KeyboardInterrupt) else 1
    return outcomes, max((o.exit_code for o in outcomes), default=0)
