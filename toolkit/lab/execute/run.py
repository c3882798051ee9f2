"""One run's life: its folder, its lock, the experiment, its files, in an order a reader trusts.

:func:`execute` runs a :class:`~toolkit.lab.plan.config.RunSpec` (validated when it was
planned). In order:

1. the run folder is made and its lock (``.lock``) taken; the process holds it until the run
   has written everything, so a run is *running* exactly while its lock is held (the kernel
   drops it when the process dies, however it dies: no clock, no heartbeat);
2. ``config.toml`` (the :class:`~toolkit.lab.results.schema.RunConfig`, written by its model),
   ``meta.json`` saying ``running``, and empty ``summary.json``/``costs.json``;
3. the experiment's ``run(params, ctx)``, SIGINT/SIGTERM turned into
   :class:`~toolkit.lab.errors.RunInterrupted`;
4. ``metrics.jsonl`` closed, the findings written, and only then ``meta.json`` with the
   final status: ``complete`` is the last thing a run writes;
5. ``finish(run_dir, experiment)`` (the report), its time recorded; a signal stops it, and
   the run stays complete (``finish_error`` says the report was not drawn).

From before ``meta.json`` says ``running`` to its last write, SIGINT and SIGTERM never take
their default action (which would leave the run saying ``running``): outside the experiment
they are remembered and acted on once the files are consistent.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from toolkit._utils.threads import intra_op_threads
from toolkit.core import record_blocks
from toolkit.lab.errors import ConfigError, RunInterrupted, os_error_line
from toolkit.lab.execute.context import Reporter, RunContext, RunFiles
from toolkit.lab.execute.signals import INSIST_S, signals_deferred, signals_raise
from toolkit.lab.plan.config import RunSpec, plan, plan_one
from toolkit.lab.plan.registry import Experiment
from toolkit.lab.results.files import (
    atomic_write_json,
    atomic_write_text,
    inside,
    new_run_dir,
    utc_now,
)
from toolkit.lab.results.records import compute_findings, save_meta, write_findings
from toolkit.lab.results.schema import ChildMeta, RunConfig, RunMeta
from toolkit.lab.results.view import RunResults, lock_of

__all__ = ["Finish", "RunOutcome", "check_output_dir", "execute", "run_experiment",
           "signals_deferred", "signals_raise"]

#: ``finish(run_dir, experiment)``: what to do with a run folder once its files are written
#: (draw the report); its time is recorded in ``meta.json`` as ``finish_s``.
Finish = Callable[[Path, Experiment], Any]


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended: folder, status (complete|failed|interrupted) and exit code."""

    run_dir: Path
    status: str
    exit_code: int
    error: str | None = None
    duration_s: float = 0.0


def check_output_dir(root: str | Path, experiment: str, *, source: str = "<python>",
                     create: bool = True) -> Path:
    """Make sure ``<root>/<experiment>/`` can hold new runs: a folder (made unless
    ``create=False``, then the nearest existing folder is probed), writable, with room for a
    few kilobytes; ConfigError otherwise."""
    parent = Path(root) / experiment
    inside(root, parent)  # an experiment folder that links out: refused before any probe
    where = parent
    while not create and not where.exists() and where.parent != where:
        where = where.parent
    probe = where / f".write-test-{os.getpid()}-{threading.get_ident()}"
    try:
        if create:
            parent.mkdir(parents=True, exist_ok=True)
        elif not where.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(where))
        try:
            probe.write_bytes(b"\0" * 4096)  # a full disk refuses the bytes, not the name
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as err:
        raise ConfigError(source, "output_dir", f"cannot write run folders to {str(root)!r} "
                          f"({err.strerror or type(err).__name__})", "choose a writable folder "
                          'with --out DIR or output_dir = "..."') from None
    return parent


def versions() -> dict[str, str]:
    """The versions that made a run's numbers."""
    import numpy
    import torch

    import toolkit

    return {"python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "toolkit": toolkit.__version__}


@dataclass
class _Run:
    """A run whose folder is locked and whose first files exist."""

    spec: RunSpec
    run_dir: Path
    meta: RunMeta
    files: RunFiles
    lock: Any
    t0: float


def _start(spec: RunSpec, *, quiet: bool, argv: Sequence[str] | None,
           executor: Mapping[str, Any] | None, root: Path | None) -> _Run:
    config = spec.config
    run_dir = new_run_dir(config.output_dir if root is None else root, config.experiment,
                          config.seed)
    lock = lock_of(run_dir, timeout=10)  # a reader holds it for microseconds at most
    files = None
    try:
        lock.acquire()
        board = None  # the event files' folder; the writers are made here, where the run runs
        if spec.tensorboard is not None:
            from toolkit.lab.execute.live_curves import log_dir

            board = log_dir(spec.tensorboard, config.experiment, run_dir.name)
        meta = RunMeta(
            status="running", experiment=config.experiment, run_id=run_dir.name,
            seed=config.seed, device=str(spec.device), dtype=config.dtype,
            threads=config.threads, disable_blocks=list(config.disable_blocks),
            sweep_point=spec.sweep_point, argv=list(sys.argv if argv is None else argv),
            executor=dict(executor or {"kind": "local"}), versions=versions(),
            host=socket.gethostname(), pid=os.getpid(), started=utc_now().isoformat(),
            device_requested=config.device, config_source=spec.source,
            request=spec.request or None, platform=platform.platform(),
            tensorboard=None if board is None else str(board))
        t0 = time.perf_counter()
        atomic_write_text(run_dir / "config.toml", config.to_toml(spec.source))
        atomic_write_json(run_dir / "meta.json", meta)
        files = RunFiles(run_dir, quiet=quiet, meta=meta, tensorboard=board)
        files.write_summary()  # empty summary/costs from the start: any run can be reported
        files.write_costs()
    except BaseException:  # a full disk, a folder made read-only: nothing worth keeping
        if files is not None:
            with contextlib.suppress(OSError):
                files.close()
        with contextlib.suppress(OSError):
            lock.release()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return _Run(spec, run_dir, meta, files, lock, t0)


def _experiment(run: _Run, *, quiet: bool, pending: Sequence[int],
                reporter: Reporter | None) -> tuple[str, int, BaseException | None, list[str]]:
    """Call the experiment's ``run``: ``(status, exit code, error, blocks seen)``."""
    spec, config = run.spec, run.spec.config
    seen: list[str] = []
    try:
        with signals_raise(pending, insist=INSIST_S), record_blocks() as seen, \
                intra_op_threads(config.threads):
            ctx = RunContext(run_dir=run.run_dir, seed=config.seed, device=spec.device,
                             dtype=spec.dtype, disable_patterns=config.disable_blocks,
                             quiet=quiet, params=spec.params, reporter=reporter,
                             _files=run.files)
            spec.experiment.run(spec.params, ctx)
    except RunInterrupted as err:
        return "interrupted", err.exit_code, err, seen
    except KeyboardInterrupt as err:
        return "interrupted", 130, err, seen
    except Exception as err:
        return "failed", 1, err, seen
    return "complete", 0, None, seen


def _about(experiment: Experiment, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What each experiment of the run says about itself (the report reads it from meta)."""
    parts = experiment.parts
    return {name: {"description": parts[name].description,
                   "story": parts[name].story.to_dict()
                   if hasattr(parts[name].story, "to_dict") else None}
            for name in [experiment.name, *names] if name in parts}


def _end(run: _Run, outcome: tuple[str, int, BaseException | None, list[str]],
         finish: Finish | None, received: list[int]) -> tuple[RunOutcome, BaseException | None]:
    """Close the files, write the findings, then meta.json (``complete`` last), then the
    report; a final write that fails (a full disk) makes a complete run ``failed``."""
    status, exit_code, error, seen = outcome
    files, meta, experiment = run.files, run.meta, run.spec.experiment
    path = run.run_dir / "meta.json"
    files.blocks_seen = {**dict.fromkeys(seen), **files.blocks_seen}
    meta.ended = utc_now().isoformat()
    meta.duration_s = round(time.perf_counter() - run.t0, 3)
    meta.n_logged = files.n_logged
    meta.blocks_seen = list(files.blocks_seen)
    meta.children = {k: ChildMeta(**v) for k, v in files.children.items()}
    meta.warnings = files.warnings
    meta.about = _about(experiment, list(files.children))
    if error is not None:
        meta.error = f"{type(error).__name__}: {error}"
        meta.traceback = "".join(traceback.format_exception(error))
        if isinstance(error, RunInterrupted):
            meta.interrupted_by = error.signal_name
        elif isinstance(error, KeyboardInterrupt):
            meta.interrupted_by = "SIGINT"
    try:
        files.close()
        if status == "complete":
            atomic_write_json(path, meta)  # still running: what the findings read
            per_seed, problems = compute_findings(run.run_dir, experiment)
            record = write_findings(run.run_dir, {meta.seed: per_seed}, problems)
            if record.problems:
                meta.findings_problems = list(record.problems)  # type: ignore[attr-defined]
        meta.status = status  # type: ignore[assignment]
        atomic_write_json(path, meta)  # the last file a run writes
    except OSError as err:
        status, exit_code = ("failed", 1) if status == "complete" else (status, exit_code)
        reason = f"the final writes failed: {os_error_line(err)}"
        meta.status = status  # type: ignore[assignment]
        if not meta.error:
            meta.error = reason
        elif not (isinstance(error, OSError) and error.filename == err.filename):
            meta.error = f"{meta.error}; {reason}"  # not the run's own error again
        if not save_meta(path, meta):
            meta.error += " (meta.json could not be updated either)"
    else:
        if finish is not None and status != "interrupted":
            _finish_unless_interrupted(finish, run.run_dir, meta, experiment, received)
        meta.wall_seconds = round(time.perf_counter() - run.t0, 3)
        if not save_meta(path, meta):
            print(f"toolkit: warning: {path}: wall_seconds not recorded (the disk is full or "
                  f"read-only); the run's results are complete", file=sys.stderr)
    if received and error is None:  # a signal while the files were finished: say so
        exit_code = 128 + received[0]
    return RunOutcome(run.run_dir, status, exit_code, meta.error, meta.duration_s or 0.0), error


def _finish_unless_interrupted(finish: Finish, run_dir: Path, meta: RunMeta,
                               experiment: Experiment, received: list[int]) -> None:
    """:func:`call_finish`, stopped by SIGINT/SIGTERM (one received while the files were
    finished skips it): the run is complete and stays so; ``finish_error`` says that the
    report was not drawn, and the signal goes into ``received``."""
    try:
        with signals_raise(received):
            call_finish(finish, run_dir, meta, experiment)
    except KeyboardInterrupt as err:  # RunInterrupted too
        signum = err.signum if isinstance(err, RunInterrupted) else int(signal.SIGINT)
        meta.finish_error = (f"interrupted by {signal.Signals(signum).name}: the report was "
                             f"not drawn (`toolkit report` draws it)")
        if not received:
            received.append(signum)


def call_finish(finish: Finish, run_dir: Path, meta: RunMeta, experiment: Experiment) -> None:
    """Run ``finish(run_dir, experiment)``; record its time (``finish_s``) and error
    (``finish_error``) in ``meta``. A failing report leaves the numbers valid: a warning."""
    t0 = time.perf_counter()
    try:
        finish(run_dir, experiment)
    except Exception as err:
        meta.finish_error = f"{type(err).__name__}: {err}"
        print(f"toolkit: warning: {run_dir}: {meta.finish_error}", file=sys.stderr)
    meta.finish_s = round(time.perf_counter() - t0, 3)


def _run_once(spec: RunSpec, *, quiet: bool = False, argv: Sequence[str] | None = None,
              finish: Finish | None = None, executor: Mapping[str, Any] | None = None,
              root: Path | None = None, reporter: Reporter | None = None
              ) -> tuple[RunOutcome, BaseException | None]:
    if spec.experiment.name != spec.config.experiment:
        raise ValueError(f"execute: the config is for experiment {spec.config.experiment!r}, "
                         f"but the experiment handed over is {spec.experiment.name!r}")
    with signals_deferred() as received:
        try:
            run = _start(spec, quiet=quiet, argv=argv, executor=executor, root=root)
        except OSError as err:  # not started: a full disk, a folder made read-only
            if received:
                raise RunInterrupted(received[0]) from err
            where = Path(spec.config.output_dir if root is None else root) / spec.experiment.name
            return RunOutcome(where, "failed", 1, f"could not start: {os_error_line(err)}"), err
        try:
            outcome = _experiment(run, quiet=quiet, pending=received, reporter=reporter)
            return _end(run, outcome, finish, received)
        finally:
            with contextlib.suppress(OSError):
                run.lock.release()


def execute(spec: RunSpec, *, quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, executor: Mapping[str, Any] | None = None,
            root: Path | None = None, reporter: Reporter | None = None) -> RunOutcome:
    """Run one planned run; never raises for a failing experiment (see the outcome).

    ``finish(run_dir, experiment)`` runs once the files are written (not for interrupted
    runs); ``executor`` is recorded in ``meta.json``; ``root`` replaces ``output_dir`` as the
    folder the run folder is made in (a Dask worker's staging folder; ``config.toml`` keeps
    the output folder the run belongs to); ``reporter`` watches its progress.
    """
    return _run_once(spec, quiet=quiet, argv=argv, finish=finish, executor=executor,
                     root=root, reporter=reporter)[0]


def run_experiment(experiment: str | Path | RunConfig | Experiment | ModuleType,
                   params: Mapping[str, Any] | BaseModel | None = None, *,
                   seed: int = 0, device: str = "auto", dtype: str = "float32",
                   disable_blocks: Sequence[str] = ("*",), threads: int = 1,
                   output_dir: str | Path = "results", overrides: Sequence[str] = (),
                   quiet: bool = True, finish: Finish | None = None,
                   tensorboard: str | Path | None = None) -> RunResults:
    """Run one experiment from Python and return its results.

    Args:
        experiment: an experiment name (``"em_gmm"``), an
            :class:`~toolkit.lab.plan.registry.Experiment` or an experiment module (registered
            or not), a path to a TOML config giving one run, or a
            :class:`~toolkit.lab.results.schema.RunConfig` (a run's ``config.toml`` read back).
        params: the experiment's parameters (dict or ``Params``); with a config file they go
            on top of its ``[params]`` and the ``overrides``.
        seed, device, dtype, disable_blocks, threads: the common keys (for an experiment; a
            config file sets them itself: change them with ``overrides``).
        output_dir: root of the run folders (for a config file: replaces its ``output_dir``
            unless left at ``"results"``).
        overrides: ``"dotted.key=VALUE"`` strings for a config file.
        quiet: no progress bars.
        finish: called as ``finish(run_dir, experiment)`` once the files are written, e.g.
            ``toolkit.lab.report.write_report``.
        tensorboard: a folder for live curves: every logged metric also goes to TensorBoard
            event files in ``<tensorboard>/<experiment>/<run_id>/<variant>/`` (needs the
            ``tensorboard`` extra; see :mod:`toolkit.lab.execute.live_curves`).

    Raises:
        ConfigError: invalid input (nothing is written).
        RunInterrupted: SIGINT/SIGTERM during the run (marked ``interrupted``).
        Exception: whatever the experiment raised (the run is marked ``failed``).

    Example::

        run = run_experiment("quadratic_target", {"n_steps": 50}, seed=0, dtype="float64")
        run.summary["blocked"]["value_error"], run.metric("unblocked/value/error")
    """
    if isinstance(experiment, ModuleType):
        experiment = Experiment.from_module(experiment)
    if isinstance(experiment, RunConfig):
        c = experiment
        spec = plan_one(c.experiment, c.params if params is None else params, seed=c.seed,
                        device=c.device, dtype=c.dtype, disable_blocks=c.disable_blocks,
                        output_dir=c.output_dir, threads=c.threads, tensorboard=tensorboard)
    elif isinstance(experiment, Path) or (isinstance(experiment, str)
                                          and experiment.endswith(".toml")):
        if isinstance(params, BaseModel):
            params = params.model_dump(mode="json")
        specs = plan(experiment, overrides, params=params,
                     output_dir=output_dir if output_dir != "results" else None,
                     tensorboard=tensorboard)
        if len(specs) != 1:
            raise ConfigError(str(experiment), "sweep", f"gives {len(specs)} runs",
                              "run_experiment runs one; use `toolkit run` or run_all()")
        spec = specs[0]
    else:
        spec = plan_one(experiment, params, seed=seed, device=device, dtype=dtype,
                        disable_blocks=disable_blocks, threads=threads, output_dir=output_dir,
                        tensorboard=tensorboard)
    if spec.tensorboard is not None:
        from toolkit.lab.execute.live_curves import check_tensorboard

        check_tensorboard("tensorboard")
    check_output_dir(spec.config.output_dir, spec.config.experiment, source=spec.source)
    outcome, error = _run_once(spec, quiet=quiet, finish=finish)
    if error is not None:
        raise error
    return RunResults(outcome.run_dir)
