"""One run's life in one function, :func:`execute`: lock, ``config.toml``, ``meta.json``
running, the experiment, findings, ``meta.json`` complete (last), the lock released in
``finally``, then the report. A signal stops only the experiment or the report; one that comes
while the record is written waits until it is whole
(:data:`~toolkit.lab.execute.signals.held_signals`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy
import torch
from pydantic import BaseModel

import toolkit
from toolkit._utils.threads import intra_op_threads
from toolkit.core import record_blocks
from toolkit.lab.errors import ConfigError, os_error_line
from toolkit.lab.execute.context import Progress, RunContext, RunFiles
from toolkit.lab.execute.live_curves import check_tensorboard
from toolkit.lab.execute.resume import carry_over, replace_interrupted
from toolkit.lab.execute.signals import held_signals
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
from toolkit.lab.results.schema import RunConfig, RunMeta
from toolkit.lab.results.view import RunResults, lock_of

__all__ = ["Finish", "Listener", "RunOutcome", "check_output_dir", "execute", "run_experiment"]

#: ``finish(run_dir, experiment)``: what to do with a run folder once its files are written
#: (draw the report); its time is recorded in ``meta.json`` as ``finish_s``.
Finish = Callable[[Path, Experiment], Any]

#: ``listener(progress)``: hears each experiment of a run start and end, as it happens
Listener = Callable[[Progress], Any]


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
    """Make sure ``<root>/<experiment>/`` (made unless ``create=False``) can hold new runs:
    writable, with room for a few kilobytes; ConfigError otherwise."""
    parent = Path(root) / experiment
    inside(root, parent)  # an experiment folder that links out: refused before any probe
    where = parent
    while not create and not where.exists() and where.parent != where:
        where = where.parent
    try:
        if create:
            parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=where) as probe:  # a full disk refuses the bytes
            probe.write(b"\0" * 4096)
            probe.flush()
    except OSError as err:
        raise ConfigError(source, "output_dir", f"cannot write run folders to {str(root)!r} "
                          f"({err.strerror or type(err).__name__})", "choose a writable folder "
                          'with --out DIR or output_dir = "..."') from None
    return parent


def _about(experiment: Experiment, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What each experiment of the run says about itself (the report reads it from meta)."""
    parts = experiment.parts
    return {name: {"description": parts[name].description, "story": parts[name].story.to_dict()
                   if hasattr(parts[name].story, "to_dict") else None}
            for name in [experiment.name, *names] if name in parts}


def _ending(error: BaseException | None) -> tuple[str, int, dict[str, Any]]:
    """The status, exit code and ``meta.json`` keys of a run that raised ``error``."""
    if error is None:
        return "complete", 0, {}
    keys = {"error": f"{type(error).__name__}: {error}",
            "traceback": "".join(traceback.format_exception(error))}
    if isinstance(error, KeyboardInterrupt):  # RunInterrupted too
        signum = getattr(error, "signum", signal.SIGINT)
        return "interrupted", 128 + signum, {**keys, "interrupted_by": signal.Signals(signum).name}
    return "failed", 1, keys


def _began(spec: RunSpec, run_dir: Path, argv: Sequence[str] | None,
           executor: Mapping[str, Any] | None, board: Path | None) -> dict[str, Any]:
    """What a run runs with: ``meta.json`` says so from its start."""
    config = spec.config
    return dict(experiment=config.experiment, run_id=run_dir.name, seed=config.seed,
                device=str(spec.device), dtype=config.dtype, threads=config.threads,
                disable_blocks=list(config.disable_blocks), sweep_point=spec.sweep_point,
                argv=list(sys.argv if argv is None else argv), request=spec.request or None,
                executor=dict(executor or {"kind": "local"}), host=socket.gethostname(),
                pid=os.getpid(), started=utc_now().isoformat(), config_source=spec.source,
                platform=platform.platform(), tensorboard=None if board is None else str(board),
                versions={"python": platform.python_version(), "torch": torch.__version__,
                          "numpy": numpy.__version__, "toolkit": toolkit.__version__})


def execute(spec: RunSpec, *, quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, executor: Mapping[str, Any] | None = None,
            listener: Listener | None = None) -> RunOutcome:
    """Run one planned run; the outcome, not an exception, says how it ended (a signal kept
    while the record was written: in its exit code). ``finish(run_dir, experiment)`` runs once
    the files are written (not for an interrupted run); ``executor`` goes into meta.json;
    ``listener`` hears each experiment of the run start and end (:class:`Progress`)."""
    outcome = None
    try:
        with held_signals:
            outcome = _execute(spec, quiet, argv, finish, executor, listener)
            if held_signals.kept:  # the record is whole; what runs it stops
                outcome = dataclasses.replace(outcome, exit_code=128 + held_signals.kept[0])
    except KeyboardInterrupt:  # the kept signal, given back to its handler once held no more
        if outcome is None:
            raise
    assert outcome is not None
    return outcome


def _execute(spec: RunSpec, quiet: bool, argv: Sequence[str] | None, finish: Finish | None,
             executor: Mapping[str, Any] | None, listener: Listener | None) -> RunOutcome:
    config, experiment, t0 = spec.config, spec.experiment, time.perf_counter()
    run_dir = new_run_dir(config.output_dir, config.experiment, config.seed)
    path, lock, files = run_dir / "meta.json", lock_of(run_dir, timeout=10), None
    board = None if spec.tensorboard is None else \
        Path(spec.tensorboard) / config.experiment / run_dir.name
    began, started, error, late = _began(spec, run_dir, argv, executor, board), False, None, False
    try:
        lock.acquire()  # the run is running exactly while its process holds the lock
        atomic_write_text(run_dir / "config.toml", config.to_toml(spec.source))
        atomic_write_json(path, running := RunMeta(status="running", **began))
        files = RunFiles(run_dir, meta=running, tensorboard=board, listener=listener)
        files.write("summary", "costs")  # from the start: any run can be reported
        if spec.resumes is not None and carry_over(Path(spec.resumes), files):
            replace_interrupted(Path(spec.resumes), run_dir)  # no folder stays interrupted
        started = True
        with record_blocks() as seen, intra_op_threads(config.threads), held_signals.lifted():
            experiment.run(spec.params, RunContext(
                run_dir=run_dir, seed=config.seed, device=spec.device, dtype=spec.dtype,
                disable_patterns=config.disable_blocks, quiet=quiet, params=spec.params,
                _files=files))
    except BaseException as err:  # Ctrl-C and SIGTERM too: recorded below
        error = err
    try:
        if not started:  # a full disk: nothing worth keeping
            if files is not None:
                files.close()
            shutil.rmtree(run_dir, ignore_errors=True)
            if not isinstance(error, OSError):
                raise error  # type: ignore[misc]
            return RunOutcome(run_dir.parent, "failed", 1,
                              f"could not start: {os_error_line(error)}", exception=error)
        status, code, ending = _ending(error)
        ending |= {"ended": utc_now().isoformat(),
                   "duration_s": (duration := round(time.perf_counter() - t0, 3))}
        try:
            files.close()
            final = {**ending, "n_logged": files.n_logged, "warnings": files.warnings,
                     "blocks_seen": list({**dict.fromkeys(seen), **files.blocks_seen}),
                     "children": files.children,
                     "about": _about(experiment, list(files.children))}
            if status == "complete":  # findings read the files: meta.json still running
                atomic_write_json(path, RunMeta(status="running", **began, **final))
                per_seed, problems = compute_findings(run_dir, experiment)
                record = write_findings(run_dir, {config.seed: per_seed}, problems)
                final |= {"findings_problems": list(record.problems)} if record.problems else {}
            atomic_write_json(path, meta := RunMeta(status=status, **began, **final))
        except OSError as err:  # a full disk, a read-only folder
            (status, code), late = (status, code) if status == "interrupted" else (
                "failed", 1), True
            if not (isinstance(error, OSError) and err.filename == error.filename):
                ending["error"] = "; ".join(filter(None, [
                    ending.get("error"), f"the final writes failed: {os_error_line(err)}"]))
            save_meta(path, meta := RunMeta(status=status, **began, **ending))
    finally:
        with contextlib.suppress(OSError):
            lock.release()
    if status != "interrupted":  # the report (not of a run whose files are not whole)
        code = _finished(None if late else finish, run_dir, meta, experiment, t0) or code
    return RunOutcome(run_dir, status, code, meta.error, duration, error)


def _finished(finish: Finish | None, run_dir: Path, meta: RunMeta, experiment: Experiment,
              t0: float) -> int:
    """Call ``finish`` and record its time (``finish_s``), its error (``finish_error``: the
    numbers stay valid) and the run's ``wall_seconds``; 128 + the signal that stopped it."""
    t1, update, stopped = time.perf_counter(), {}, 0
    if finish is not None:
        try:
            with held_signals.lifted():
                finish(run_dir, experiment)
        except Exception as err:
            update["finish_error"] = f"{type(err).__name__}: {err}"
            print(f"toolkit: warning: {run_dir}: {update['finish_error']}", file=sys.stderr)
        except KeyboardInterrupt as err:  # the run stays complete; the command stops
            stopped = 128 + getattr(err, "signum", signal.SIGINT)
            update["finish_error"] = (f"interrupted by {signal.Signals(stopped - 128).name}: "
                                      f"the report was not drawn (`toolkit report` draws it)")
        update["finish_s"] = round(time.perf_counter() - t1, 3)
    if not save_meta(run_dir / "meta.json", meta.model_copy(update={
            **update, "wall_seconds": round(time.perf_counter() - t0, 3)})):
        print(f"toolkit: warning: {run_dir / 'meta.json'}: wall_seconds not recorded (the disk "
              f"is full or read-only); the run's results are complete", file=sys.stderr)
    return stopped


def run_experiment(experiment: str | Path | RunConfig | Experiment | ModuleType,
                   params: Mapping[str, Any] | BaseModel | None = None, *,
                   seed: int = 0, device: str = "auto", dtype: str = "float32",
                   disable_blocks: Sequence[str] = ("*",), threads: int = 1,
                   output_dir: str | Path = "results", overrides: Sequence[str] = (),
                   quiet: bool = True, finish: Finish | None = None,
                   tensorboard: str | Path | None = None) -> RunResults:
    """Run one experiment from Python and return its results.

    ``experiment``: a name, an :class:`~toolkit.lab.plan.registry.Experiment` or module, a TOML
    config of one run (``params`` and ``"key=VALUE"`` ``overrides`` on top; ``output_dir``
    replaces its own unless ``"results"``), or a :class:`~toolkit.lab.results.schema.RunConfig`
    read back. ``finish(run_dir, experiment)`` runs once the files are written; ``tensorboard``:
    a folder of live curves. Raises ConfigError for invalid input (nothing written),
    RunInterrupted on SIGINT/SIGTERM and whatever the experiment raised. Example::

        run = run_experiment("quadratic_target", {"n_steps": 50}, seed=0, dtype="float64")
        run.summary["blocked"]["value_error"], run.metric("unblocked/value/error")
    """
    if isinstance(experiment, ModuleType):
        experiment = Experiment.from_module(experiment)
    keys = dict(seed=seed, device=device, dtype=dtype, disable_blocks=disable_blocks,
                threads=threads, output_dir=output_dir)
    if isinstance(experiment, RunConfig):  # read back from a run: its keys and params
        keys = experiment.model_dump(exclude={"experiment", "params"})
        experiment, params = experiment.experiment, experiment.params if params is None else params
    if isinstance(experiment, Path) or (isinstance(experiment, str)
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
        spec = plan_one(experiment, params, tensorboard=tensorboard, **keys)
    if spec.tensorboard is not None:
        check_tensorboard("tensorboard")
    check_output_dir(spec.config.output_dir, spec.config.experiment, source=spec.source)
    outcome = execute(spec, quiet=quiet, finish=finish)
    if outcome.exception is not None:
        raise outcome.exception
    return RunResults(outcome.run_dir)
