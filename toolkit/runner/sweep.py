"""Running many configs: in this process, in a local pool of processes, or on a Dask cluster.

:func:`run_configs` takes the validated runs and an :class:`~toolkit.runner.config.ExecutorSpec`:

- ``local`` with one worker: one run after the other in this process;
- ``local`` with ``workers > 1``: a pool of spawned processes, each writing its own run
  directory (the machine's own disk);
- ``dask``: tasks on a Dask cluster (``toolkit.runner.dask_executor``); workers return the
  files of a run and this process writes the run directories, so no shared filesystem is needed.

Whatever the executor, a run sets its own seed and thread count, so the same config and seed give
the same ``summary.json`` bytes.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.runner.config import ExecutorSpec, RunConfig
from toolkit.runner.errors import RunInterrupted
from toolkit.runner.registry import Experiment
from toolkit.runner.run import (
    Finish,
    RunOutcome,
    _signals_deferred,
    _signals_raise,
    check_output_dir,
    execute,
    local_worker,
)

__all__ = ["Progress", "find_complete", "run_configs"]

#: ``on_done(index, total, outcome)``: called as each run ends, in the order they end.
Progress = Callable[[int, int, RunOutcome], None]


def _worker_init() -> None:
    # Between runs a worker ignores Ctrl-C (the parent decides); during a run the runner's own
    # handlers mark the run interrupted.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _outcome_dict(outcome: RunOutcome) -> dict[str, Any]:
    return {"run_dir": str(outcome.run_dir), "status": outcome.status,
            "exit_code": outcome.exit_code, "error": outcome.error,
            "duration_s": outcome.duration_s}


def _pool_worker(args: tuple[int, RunConfig, Experiment, list[str], Finish | None]
                 ) -> tuple[int, dict[str, Any]]:
    index, config, experiment, argv, finish = args
    try:
        outcome = execute(config, experiment, quiet=True, argv=argv, finish=finish,
                          executor={"kind": "local", "worker": local_worker()})
    except Exception as err:  # a run that could not even start (e.g. the disk filled up)
        return index, {"run_dir": "", "status": "failed", "exit_code": 1,
                       "error": f"{type(err).__name__}: {err}", "duration_s": 0.0}
    if outcome.status == "interrupted":
        # The run is marked and its files are written. An interrupted worker stops the whole
        # sweep (as in a single process): tell the parent, and leave without taking the next
        # run from the queue.
        signum = outcome.exit_code - 128 if outcome.exit_code > 128 else signal.SIGINT
        with contextlib.suppress(OSError):
            os.kill(os.getppid(), signum)
        os._exit(outcome.exit_code)
    return index, _outcome_dict(outcome)


def find_complete(config: RunConfig) -> Path | None:
    """A complete run of exactly this config (seed included) under its output folder, if any."""
    from toolkit.runner import tomlio
    from toolkit.runner.results import RunResults

    parent = Path(config.output_dir) / config.experiment
    if not parent.is_dir():
        return None
    wanted = json.dumps(config.to_dict(), sort_keys=True)
    for run_dir in sorted(parent.iterdir()):
        path = run_dir / "config.toml"
        if not path.is_file() or not (run_dir / "meta.json").is_file():
            continue
        try:
            found = tomlio.loads(path.read_text(encoding="utf-8"))
            if json.dumps(found, sort_keys=True) == wanted and \
                    RunResults(run_dir).status == "complete":
                return run_dir
        except (OSError, ValueError):
            continue
    return None


def _in_process(configs: Sequence[RunConfig], experiments: Mapping[str, Experiment], *,
                quiet: bool, argv: list[str], finish: Finish | None, on_done: Progress | None
                ) -> tuple[list[RunOutcome], int]:
    outcomes: list[RunOutcome] = []
    status = 0
    for i, config in enumerate(configs):
        outcome = execute(config, experiments[config.experiment], quiet=quiet, argv=argv,
                          finish=finish)
        outcomes.append(outcome)
        if on_done:
            on_done(i, len(configs), outcome)
        if outcome.status == "interrupted":
            return outcomes, outcome.exit_code
        status = max(status, outcome.exit_code)
    return outcomes, status


def _in_pool(configs: Sequence[RunConfig], experiments: Mapping[str, Experiment], *,
             workers: int, argv: list[str], finish: Finish | None, on_done: Progress | None
             ) -> tuple[list[RunOutcome], int]:
    total = len(configs)
    outcomes: list[RunOutcome | None] = [None] * total
    status = 0
    ctx = multiprocessing.get_context("spawn")
    pool = ctx.Pool(processes=min(workers, total), initializer=_worker_init)
    jobs = [(i, c, experiments[c.experiment], argv, finish) for i, c in enumerate(configs)]
    try:
        with _signals_raise():
            for i, info in pool.imap_unordered(_pool_worker, jobs):
                outcome = RunOutcome(Path(info["run_dir"]), info["status"], info["exit_code"],
                                     info["error"], info["duration_s"] or 0.0)
                outcomes[i] = outcome
                if on_done:
                    on_done(i, total, outcome)
                status = max(status, outcome.exit_code)
        pool.close()
    except (RunInterrupted, KeyboardInterrupt) as err:
        with _signals_deferred():  # more signals (e.g. from the workers) change nothing now
            pool.terminate()  # SIGTERM: runs in progress mark themselves interrupted
            pool.join()
        code = err.exit_code if isinstance(err, RunInterrupted) else 130
        print("toolkit: interrupted; runs in progress are marked interrupted in their "
              "meta.json", file=sys.stderr)
        return [o for o in outcomes if o is not None], code
    pool.join()
    done = [o for o in outcomes if o is not None]
    if any(o.status == "interrupted" for o in done):
        status = max(status, 130)
    return done, status


def run_configs(configs: Sequence[RunConfig], experiments: Mapping[str, Experiment], *,
                executor: ExecutorSpec | None = None, quiet: bool = False,
                argv: Sequence[str] | None = None, finish: Finish | None = None,
                on_done: Progress | None = None) -> tuple[list[RunOutcome], int]:
    """Run every config with its experiment; returns the outcomes (in the order they ended)
    and the exit status.

    ``experiments`` maps each config's ``experiment`` name to the
    :class:`~toolkit.runner.Experiment` to run (the caller composes them, e.g. with
    :func:`~toolkit.runner.registry.experiments_for`); process pools and Dask workers load the
    same modules again by reference.

    Exit status: 0 when all completed, 1 when any failed (the others still run), 128 + signal
    when interrupted (the remaining runs are not started; runs in progress are marked
    ``interrupted``). ``finish(run_dir)`` runs after each run's files are written (the command
    line draws the report there); with a process pool it runs in the worker, so it must be a
    module-level function.
    """
    spec = executor or ExecutorSpec()
    argv = list(sys.argv if argv is None else argv)
    if spec.kind == "dask":
        from toolkit.runner.dask_executor import run_on_dask

        return run_on_dask(configs, experiments, spec, argv=argv, finish=finish,
                           on_done=on_done)
    for config in configs:
        check_output_dir(config)
    if spec.workers <= 1 or len(configs) <= 1:
        return _in_process(configs, experiments, quiet=quiet, argv=argv, finish=finish,
                           on_done=on_done)
    return _in_pool(configs, experiments, workers=spec.workers, argv=argv, finish=finish,
                    on_done=on_done)
