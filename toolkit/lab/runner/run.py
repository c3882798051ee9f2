"""Executing one run: the run directory, its files, failures.

:func:`execute` runs a :class:`~toolkit.lab.runner.planning.RunSpec` (made by
:func:`~toolkit.lab.runner.planning.plan` or :func:`~toolkit.lab.runner.planning.plan_one`, validated
there) and calls its experiment's ``run`` and ``findings``. It knows nothing of reports: a caller
that wants one passes a ``finish(run_dir, experiment)`` callable, run after the run's files are
written. ``meta.json`` is :mod:`~toolkit.lab.runner.meta`'s; signals are
:mod:`~toolkit.lab.runner.signals`'.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
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
from toolkit.lab.runner.config import RunConfig
from toolkit.lab.runner.context import Reporter, RunContext, RunFiles
from toolkit.lab.runner.errors import ConfigError, RunInterrupted, os_error_line
from toolkit.lab.runner.liveness import heartbeat
from toolkit.lab.runner.meta import save_meta, start_meta
from toolkit.lab.runner.planning import RunSpec, plan, plan_one
from toolkit.lab.runner.registry import Experiment
from toolkit.lab.runner.results import (
    RunResults,
    atomic_write_json,
    atomic_write_text,
    inside,
    new_run_dir,
    utc_now,
)
from toolkit.lab.runner.signals import signals_deferred, signals_raise
from toolkit.lab.runner.verdicts import write_findings

__all__ = ["Finish", "RunOutcome", "call_finish", "check_output_dir", "execute",
           "run_experiment"]


def check_output_dir(config: RunConfig, *, source: str | None = None, create: bool = True
                     ) -> Path:
    """Make sure ``<output_dir>/<experiment>/`` can hold a new run: it is (or can be made) a
    folder, writable, with room for a few kilobytes; ConfigError otherwise.

    ``create=False`` (``--dry-run``) makes no folder: the nearest folder that exists on the way
    is probed instead.
    """
    root = Path(config.output_dir)
    parent = root / config.experiment
    src = source or config.source
    inside(root, parent)  # an experiment folder that links out: refused before any probe
    where = parent
    if not create:
        while not where.exists() and where.parent != where:
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
        reason = err.strerror or type(err).__name__
        raise ConfigError(src, "output_dir", f"cannot write run directories to {str(root)!r} "
                          f"({reason})", "choose a writable folder with --out DIR or "
                          "output_dir = \"...\"") from None
    return parent


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended: directory, status (complete|failed|interrupted) and exit code."""

    run_dir: Path
    status: str
    exit_code: int
    error: str | None = None
    duration_s: float = 0.0


#: ``finish(run_dir, experiment)``: what to do with a run directory once its files are written
#: (draw a report with the experiment's figures, copy it somewhere); its time is recorded in
#: ``meta.json`` as ``finish_s``.
Finish = Callable[[Path, Experiment], Any]


@dataclass
class _Started:
    """A run whose directory, ``config.toml``, ``meta.json`` and empty results exist."""

    spec: RunSpec
    run_dir: Path
    meta: dict[str, Any]
    files: RunFiles
    t0: float


def _prepare(spec: RunSpec, *, quiet: bool, argv: Sequence[str] | None,
             executor: Mapping[str, Any] | None, root: Path | None) -> _Started:
    """Make the run directory and write what a report of an unfinished run needs."""
    config = spec.config
    if root is None:  # else a worker writes to a folder of its own, the client moves the files
        check_output_dir(config)
    run_dir = new_run_dir(config.output_dir if root is None else root, config.experiment,
                          config.seed)
    t0 = time.perf_counter()
    meta = start_meta(spec, run_dir.name, argv=argv, executor=executor)
    files = None
    try:
        atomic_write_text(run_dir / "config.toml", config.to_toml())
        atomic_write_json(run_dir / "meta.json", meta)
        files = RunFiles(run_dir, quiet=quiet)
        # Empty summary/costs exist from the start, so a report can be drawn from any run.
        files.write_summary()
        files.write_costs()
    except OSError:  # a full disk or a folder turned read-only: nothing worth keeping was made
        if files is not None:
            with contextlib.suppress(OSError):
                files.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return _Started(spec, run_dir, meta, files, t0)


def _execute(run: _Started, *, quiet: bool, pending: Sequence[int] = (),
             reporter: Reporter | None = None
             ) -> tuple[str, int, BaseException | None, list[str]]:
    """Call the experiment's ``run``; ``(status, exit code, error, blocks seen)``. A signal
    that came while the run was prepared (``pending``) interrupts it before it starts."""
    spec = run.spec
    config = spec.config
    seen: list[str] = []
    try:
        # every named block that runs anywhere in the run, inside ctx.compare or not
        with signals_raise(pending), record_blocks() as seen, \
                intra_op_threads(config.threads):
            ctx = RunContext(run_dir=run.run_dir, seed=config.seed, device=spec.device,
                             dtype=config.torch_dtype, disable_patterns=config.disable_blocks,
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
    """What each experiment of the run says about itself (the report reads it from meta.json)."""
    parts = experiment.parts
    out = {}
    for name in [experiment.name, *names]:
        if name in parts:
            story = parts[name].story
            out[name] = {"description": parts[name].description,
                         "story": story.to_dict() if hasattr(story, "to_dict") else None}
    return out


def _final_writes(run: _Started, experiment: Experiment, status: str) -> None:
    """Close metrics.jsonl, write meta.json and, for a complete run, the findings."""
    meta = run.meta
    run.files.close()
    atomic_write_json(run.run_dir / "meta.json", meta)
    if status == "complete":
        _, problems = write_findings(run.run_dir, experiment)
        if problems:
            meta["findings_problems"] = problems
            atomic_write_json(run.run_dir / "meta.json", meta)


def _finish(run: _Started, outcome: tuple[str, int, BaseException | None, list[str]],
            finish: Finish | None, received: list[int]
            ) -> tuple[RunOutcome, BaseException | None]:
    """Close the files; write meta.json, the findings and (through ``finish``) the report.

    Called while :func:`signals_deferred` holds the signals, whose list is ``received``.
    When a final write fails (a full disk), a complete run becomes ``failed`` with the reason,
    recorded in meta.json wherever space allows (:func:`save_meta`).
    """
    status, exit_code, error, seen = outcome
    files, meta, experiment = run.files, run.meta, run.spec.experiment
    meta_path = run.run_dir / "meta.json"
    # in the order the blocks first ran (ctx.compare's names are in ``seen`` too)
    files.blocks_seen = {**dict.fromkeys(seen), **files.blocks_seen}
    meta.update({
        "status": status,
        "ended": utc_now().isoformat(),
        "duration_s": round(time.perf_counter() - run.t0, 3),
        "n_logged": files.n_logged,
        "blocks_seen": list(files.blocks_seen),
        "children": files.children,
        "warnings": files.warnings,
        "about": _about(experiment, list(files.children)),
    })
    if error is not None:
        meta["error"] = f"{type(error).__name__}: {error}"
        meta["traceback"] = "".join(traceback.format_exception(error))
    try:
        _final_writes(run, experiment, status)
    except OSError as err:
        if status == "complete":
            status, exit_code = "failed", 1
        reason = f"the final writes failed: {os_error_line(err)}"
        meta["status"] = status
        if not meta["error"]:
            meta["error"] = reason
        elif not (isinstance(error, OSError) and error.filename == err.filename):
            meta["error"] = f"{meta['error']}; {reason}"  # not the run's own error again
        if not save_meta(meta_path, meta):
            meta["error"] += " (meta.json could not be updated either)"
    else:
        if finish is not None and status != "interrupted":
            call_finish(finish, run.run_dir, meta, experiment)
        # the whole run as the user waited for it: experiment, findings and report
        meta["wall_seconds"] = round(time.perf_counter() - run.t0, 3)
        if not save_meta(meta_path, meta):
            print(f"toolkit: warning: {meta_path}: wall_seconds not recorded (the disk "
                  f"is full or read-only); the run's results are complete", file=sys.stderr)
    if received and error is None:
        # A signal during the final writes: the experiment finished, say so but exit non-zero.
        exit_code = 128 + received[0]
    return RunOutcome(run.run_dir, status, exit_code, meta["error"], meta["duration_s"]), error


def _run_once(spec: RunSpec, *, quiet: bool, argv: Sequence[str] | None,
              finish: Finish | None = None, executor: Mapping[str, Any] | None = None,
              root: Path | None = None, reporter: Reporter | None = None
              ) -> tuple[RunOutcome, BaseException | None]:
    """Prepare, execute and finish one run; the experiment's error, if any, is returned."""
    config = spec.config
    if spec.experiment.name != config.experiment:
        raise ValueError(f"execute: the config is for experiment {config.experiment!r}, but "
                         f"the experiment handed over is {spec.experiment.name!r}")
    # From before meta.json says "running" to its last write, SIGINT and SIGTERM never take the
    # default action (which would leave the run saying "running"): while the run directory is
    # made and the files are finished they are remembered; while the experiment runs they
    # interrupt it (_execute's handler, which gives the remembering one back when it ends).
    with signals_deferred() as received:
        try:
            run = _prepare(spec, quiet=quiet, argv=argv, executor=executor, root=root)
        except OSError as err:  # not started: a full disk, a folder made read-only meanwhile
            if received:
                raise RunInterrupted(received[0]) from err
            where = Path(config.output_dir if root is None else root) / config.experiment
            return RunOutcome(where, "failed", 1, f"could not start: {os_error_line(err)}"), err
        with heartbeat(run.run_dir / "meta.json"):  # read elsewhere, it shows the run is alive
            outcome = _execute(run, quiet=quiet, pending=received, reporter=reporter)
        return _finish(run, outcome, finish, received)


def call_finish(finish: Finish, run_dir: Path, meta: dict[str, Any],
                experiment: Experiment) -> None:
    """Run ``finish(run_dir, experiment)`` (e.g. the report); record its time, and its error if
    any, in ``meta`` (``finish_s``, ``finish_error``). A failing finish leaves the run's numbers
    valid: it is reported as a warning, not raised."""
    t0 = time.perf_counter()
    try:
        finish(run_dir, experiment)
    except Exception as err:  # the run's numbers stay valid without a report
        meta["finish_error"] = f"{type(err).__name__}: {err}"
        print(f"toolkit: warning: {run_dir}: {meta['finish_error']}", file=sys.stderr)
    meta["finish_s"] = round(time.perf_counter() - t0, 3)


def execute(spec: RunSpec, *, quiet: bool = False, argv: Sequence[str] | None = None,
            finish: Finish | None = None, executor: Mapping[str, Any] | None = None,
            root: Path | None = None, reporter: Reporter | None = None) -> RunOutcome:
    """Run one planned run (see :func:`~toolkit.lab.runner.planning.plan`); never raises for a
    failing experiment (see the outcome).

    ``finish(run_dir, experiment)`` runs after the files are written (not for interrupted runs);
    ``executor`` is recorded in ``meta.json`` (default: local, this host and process);
    ``root`` replaces ``config.output_dir`` as the folder the run directory is made in (the
    config, and so ``config.toml``, keep the output folder the run belongs to);
    ``reporter`` watches the run's progress (see :class:`~toolkit.lab.runner.context.Reporter`).
    """
    outcome, _ = _run_once(spec, quiet=quiet, argv=argv, finish=finish, executor=executor,
                           root=root, reporter=reporter)
    return outcome


def run_experiment(experiment: str | Path | RunConfig | Experiment | ModuleType,
                   params: Mapping[str, Any] | BaseModel | None = None, *,
                   seed: int = 0, device: str = "auto", dtype: str = "float32",
                   disable_blocks: Sequence[str] = ("*",), threads: int = 1,
                   output_dir: str | Path = "results", overrides: Sequence[str] = (),
                   quiet: bool = True, finish: Finish | None = None) -> RunResults:
    """Run one experiment from Python and return its results.

    Args:
        experiment: an experiment name (``"em_gmm"``, found through the registry), an
            :class:`~toolkit.lab.runner.Experiment` or an experiment module (your own, registered
            or not), a path to a TOML config (one run; its ``[sweep]``/``seeds`` must give a
            single run), or a :class:`RunConfig`.
        params: the experiment's parameters (dict or ``Params`` instance); with a config file
            they go on top of its ``[params]`` and the ``overrides``.
        seed, device, dtype, disable_blocks, threads: the common config keys (for an
            experiment name; a config file sets them itself, change them with ``overrides``).
        output_dir: root of the run directories (for a config file: replaces its
            ``output_dir`` unless left at the default ``"results"``).
        overrides: ``"dotted.key=VALUE"`` strings for a config file.
        quiet: no progress bars.
        finish: called as ``finish(run_dir, experiment)`` once the run's files are written,
            e.g. ``toolkit.lab.report.write_report`` to draw figures and report.html/report.md.

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
                        output_dir=c.output_dir, threads=c.threads, source=c.source)
    elif isinstance(experiment, Path) or (isinstance(experiment, str)
                                          and experiment.endswith(".toml")):
        if isinstance(params, BaseModel):
            params = params.model_dump(mode="json")
        specs = plan(experiment, overrides, params=params,
                     output_dir=output_dir if output_dir != "results" else None)
        if len(specs) != 1:
            raise ConfigError(str(experiment), "sweep", f"gives {len(specs)} runs",
                              "run_experiment runs one; use `toolkit run` or run_configs()")
        spec = specs[0]
    else:
        spec = plan_one(experiment, params, seed=seed, device=device, dtype=dtype,
                        disable_blocks=disable_blocks, threads=threads, output_dir=output_dir)
    outcome, error = _run_once(spec, quiet=quiet, argv=None, finish=finish)
    if error is not None:
        raise error
    return RunResults(outcome.run_dir)
