"""One run's life, in one function (:func:`execute`), read top to bottom like Hydra's
``run_job``:

1. the run folder is made and its lock (``.lock``) taken: a run is *running* exactly while its
   process holds the lock (the kernel drops it when the process dies: no clock, no heartbeat);
2. ``config.toml`` (the validated :class:`~toolkit.lab.results.schema.RunConfig`) and
   ``meta.json`` saying ``running``;
3. the experiment's ``run(params, ctx)``; ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM where the
   command line turns it into :class:`~toolkit.lab.errors.RunInterrupted`) makes the run
   ``interrupted``, any other exception ``failed``;
4. the findings, then ``meta.json`` built once from what happened: ``complete`` is the last
   thing a run writes; then ``finish(run_dir, experiment)`` (the report), its time recorded
   (not for an interrupted run).

The lock is released in ``finally``, however the run ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import shutil
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from toolkit._utils.threads import intra_op_threads
from toolkit.core import record_blocks
from toolkit.lab.errors import ConfigError, RunInterrupted, os_error_line
from toolkit.lab.execute.context import RunContext, RunFiles
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

__all__ = ["Finish", "RunOutcome", "check_output_dir", "execute", "run_experiment"]

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
    #: what the experiment raised (this process only: a pool's worker sends ``None``)
    exception: BaseException | None = field(default=None, compare=False, repr=False)


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


def _about(experiment: Experiment, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What each experiment of the run says about itself (the report reads it from meta)."""
    parts = experiment.parts
    return {name: {"description": parts[name].description,
                   "story": parts[name].story.to_dict()
                   if hasattr(parts[name].story, "to_dict") else None}
            for name in [experiment.name, *names] if name in parts}


def _ending(error: BaseException | None) -> tuple[str, int, dict[str, Any]]:
    """The status, exit code and ``meta.json`` keys of a run that raised ``error``."""
    if error is None:
        return "complete", 0, {}
    keys = {"error": f"{type(error).__name__}: {error}",
            "traceback": "".join(traceback.format_exception(error))}
    if isinstance(error, KeyboardInterrupt):  # RunInterrupted too
        signum = error.signum if isinstance(error, RunInterrupted) else 2
        return "interrupted", 128 + signum, {**keys, "interrupted_by": RunInterrupted(
            signum).signal_name}
    return "failed", 1, keys


def _begun(spec: RunSpec, run_dir: Path, argv: Sequence[str] | None,
           executor: Mapping[str, Any] | None, board: Path | None) -> RunMeta:
    """``meta.json`` as a run starts: ``running``, and what it runs with."""
    config = spec.config
    return RunMeta(
        status="running", experiment=config.experiment, run_id=run_dir.name, seed=config.seed,
        device=str(spec.device), dtype=config.dtype, threads=config.threads,
        disable_blocks=list(config.disable_blocks), sweep_point=spec.sweep_point,
        argv=list(sys.argv if argv is None else argv),
        executor=dict(executor or {"kind": "local"}), versions=versions(),
        host=socket.gethostname(), pid=os.getpid(), started=utc_now().isoformat(),
        config_source=spec.source, request=spec.request or None, platform=platform.platform(),
        tensorboard=None if board is None else str(board))


def execute(spec: RunSpec, *, quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, executor: Mapping[str, Any] | None = None
            ) -> RunOutcome:
    """Run one planned run (see the module docstring); a failing or interrupted experiment
    is not raised: the outcome says how it ended. ``finish(run_dir, experiment)`` runs once
    the files are written (not for an interrupted run); ``executor`` goes into meta.json."""
    config, experiment, t0 = spec.config, spec.experiment, time.perf_counter()
    run_dir = new_run_dir(config.output_dir, config.experiment, config.seed)
    path, lock = run_dir / "meta.json", lock_of(run_dir, timeout=10)
    files, seen, error, board = None, [], None, None
    try:
        if spec.tensorboard is not None:
            from toolkit.lab.execute.live_curves import log_dir

            board = log_dir(spec.tensorboard, config.experiment, run_dir.name)
        begun = _begun(spec, run_dir, argv, executor, board)
        lock.acquire()
        atomic_write_text(run_dir / "config.toml", config.to_toml(spec.source))
        atomic_write_json(path, begun)
        files = RunFiles(run_dir, quiet=quiet, meta=begun, tensorboard=board)
        files.write_summary()  # empty summary/costs from the start: any run can be reported
        files.write_costs()
        if spec.resumes is not None:
            from toolkit.lab.execute.resume import carry_over

            carry_over(Path(spec.resumes), files)
    except (OSError, KeyboardInterrupt) as err:  # a full disk, a signal: nothing worth keeping
        with contextlib.suppress(OSError):
            lock.release()
        if files is not None:
            files.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        if isinstance(err, KeyboardInterrupt):
            raise  # not started
        return RunOutcome(run_dir.parent, "failed", 1, f"could not start: {os_error_line(err)}",
                          exception=err)
    try:
        with record_blocks() as seen, intra_op_threads(config.threads):
            experiment.run(spec.params, RunContext(
                run_dir=run_dir, seed=config.seed, device=spec.device, dtype=spec.dtype,
                disable_patterns=config.disable_blocks, quiet=quiet, params=spec.params,
                _files=files))
    except BaseException as err:  # Ctrl-C and SIGTERM too: recorded below
        error = err
    status, code, ending = _ending(error)
    duration = round(time.perf_counter() - t0, 3)
    try:
        files.close()
        seen = list({**dict.fromkeys(seen), **files.blocks_seen})
        meta = begun.model_copy(update={
            **ending, "ended": utc_now().isoformat(), "duration_s": duration,
            "n_logged": files.n_logged, "blocks_seen": seen, "warnings": files.warnings,
            "children": {k: ChildMeta(**v) for k, v in files.children.items()},
            "about": _about(experiment, list(files.children))})
        if status == "complete":
            atomic_write_json(path, meta)  # still running: what the findings read
            per_seed, problems = compute_findings(run_dir, experiment)
            record = write_findings(run_dir, {config.seed: per_seed}, problems)
            meta = meta.model_copy(update={"findings_problems": list(record.problems)}
                                   if record.problems else {})
        atomic_write_json(path, meta := meta.model_copy(update={"status": status}))
    except (OSError, KeyboardInterrupt) as err:  # a full disk, a read-only folder, a signal
        late = _ending(err) if isinstance(err, KeyboardInterrupt) else (
            "failed", 1, {"error": f"the final writes failed: {os_error_line(err)}"})
        status, code = (status, code) if status == "interrupted" else late[:2]
        same = isinstance(error, OSError) and getattr(err, "filename", 0) == error.filename
        ending = {**late[2], "error": "; ".join(dict.fromkeys(
            e for e in (ending.get("error"), None if same else late[2]["error"]) if e))}
        save_meta(path, meta := begun.model_copy(update={
            **ending, "status": status, "ended": utc_now().isoformat(), "duration_s": duration}))
        finish = None  # no report of a run whose files are not whole
    finally:
        with contextlib.suppress(OSError):
            lock.release()
    if status != "interrupted":  # the report, then the wall time
        code = _finished(finish, run_dir, meta, experiment, t0) or code
    return RunOutcome(run_dir, status, code, ending.get("error"), duration, error)


def _finished(finish: Finish | None, run_dir: Path, meta: RunMeta, experiment: Experiment,
              t0: float) -> int:
    """Call ``finish(run_dir, experiment)`` and record its time (``finish_s``), its error
    (``finish_error``: a failing or interrupted report leaves the numbers valid) and the run's
    ``wall_seconds`` in meta.json; 128 + the signal when a signal stopped it, else 0."""
    t1, update, stopped = time.perf_counter(), {}, 0
    try:
        if finish is not None:
            finish(run_dir, experiment)
    except Exception as err:
        update["finish_error"] = f"{type(err).__name__}: {err}"
        print(f"toolkit: warning: {run_dir}: {update['finish_error']}", file=sys.stderr)
    except KeyboardInterrupt as err:  # the run stays complete; the command stops
        stopped = 128 + getattr(err, "signum", 2)
        update["finish_error"] = (f"interrupted by {RunInterrupted(stopped - 128).signal_name}"
                                  f": the report was not drawn (`toolkit report` draws it)")
    if finish is not None:
        update["finish_s"] = round(time.perf_counter() - t1, 3)
    path = run_dir / "meta.json"
    if not save_meta(path, meta.model_copy(update={
            **update, "wall_seconds": round(time.perf_counter() - t0, 3)})):
        print(f"toolkit: warning: {path}: wall_seconds not recorded (the disk is full or "
              f"read-only); the run's results are complete", file=sys.stderr)
    return stopped


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
    outcome = execute(spec, quiet=quiet, finish=finish)
    if outcome.exception is not None:
        raise outcome.exception
    return RunResults(outcome.run_dir)
