"""Running many configs: in this process one after the other, or in a pool of processes."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toolkit.runner.config import RunConfig
from toolkit.runner.errors import RunInterrupted
from toolkit.runner.run import (
    RunOutcome,
    _signals_deferred,
    _signals_raise,
    check_output_dir,
    execute,
)

__all__ = ["run_configs"]

Printer = Callable[[int, int, RunOutcome], None]


def _worker_init() -> None:
    # Between runs a worker ignores Ctrl-C (the parent decides); during a run the runner's own
    # handlers mark the run interrupted.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker(args: tuple[int, RunConfig, bool, bool, list[str]]) -> tuple[int, dict[str, Any]]:
    index, config, quiet, report, argv = args
    try:
        outcome = execute(config, quiet=quiet, report=report, argv=argv)
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
    return index, {"run_dir": str(outcome.run_dir), "status": outcome.status,
                   "exit_code": outcome.exit_code, "error": outcome.error,
                   "duration_s": outcome.duration_s}


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


def run_configs(configs: Sequence[RunConfig], *, workers: int = 1, quiet: bool = False,
                report: bool = True, argv: Sequence[str] | None = None,
                on_done: Printer | None = None) -> tuple[list[RunOutcome], int]:
    """Run every config; returns the outcomes (in config order) and the exit status.

    Exit status: 0 when all completed, 1 when any failed (the others still run), 128 + signal
    when interrupted (the remaining runs are not started; runs in progress are marked
    ``interrupted``). With ``workers > 1`` runs go to a pool of ``workers`` spawned processes,
    each writing its own run directory.
    """
    for config in configs:
        check_output_dir(config)
    argv = list(sys.argv if argv is None else argv)
    total = len(configs)
    outcomes: list[RunOutcome | None] = [None] * total
    status = 0
    if workers <= 1 or total <= 1:
        for i, config in enumerate(configs):
            outcome = execute(config, quiet=quiet, report=report, argv=argv)
            outcomes[i] = outcome
            if on_done:
                on_done(i, total, outcome)
            if outcome.status == "interrupted":
                return [o for o in outcomes if o is not None], outcome.exit_code
            if outcome.exit_code:
                status = max(status, outcome.exit_code)
        return [o for o in outcomes if o is not None], status

    ctx = multiprocessing.get_context("spawn")
    pool = ctx.Pool(processes=min(workers, total), initializer=_worker_init)
    jobs = [(i, c, True, report, argv) for i, c in enumerate(configs)]
    try:
        with _signals_raise():
            for i, info in pool.imap_unordered(_worker, jobs):
                outcome = RunOutcome(Path(info["run_dir"]), info["status"], info["exit_code"],
                                     info["error"], info["duration_s"] or 0.0)
                outcomes[i] = outcome
                if on_done:
                    on_done(i, total, outcome)
                if outcome.exit_code:
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
