"""Running many configs: in this process, in a local pool of processes, or on a Dask cluster.

:func:`run_configs` takes the planned runs (:class:`~toolkit.lab.runner.planning.RunSpec`) and an :class:`~toolkit.lab.runner.config.ExecutorSpec`:

- ``local`` with one worker: one run after the other in this process;
- ``local`` with ``workers > 1``: a pool of processes, each writing its own run directory (the
  machine's own disk). Where the platform has one, the workers are forked from a fork server
  that imported torch and the runs' experiments once (:func:`pool_context`); elsewhere each is
  a spawned interpreter that imports them again;
- ``dask``: tasks on a Dask cluster (``toolkit.lab.runner.dask_executor``); workers return the
  files of a run and this process writes the run directories, so no shared filesystem is needed.

Whatever the executor, a run sets its own seed and thread count, so the same config and seed give
the same ``summary.json`` bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.lab.runner.config import ExecutorSpec
from toolkit.lab.runner.context import Reporter
from toolkit.lab.runner.errors import DamagedFile, RunInterrupted
from toolkit.lab.runner.meta import local_worker
from toolkit.lab.runner.planning import RunSpec
from toolkit.lab.runner.results import confined, inside
from toolkit.lab.runner.run import Finish, RunOutcome, check_output_dir, execute
from toolkit.lab.runner.signals import signals_deferred, signals_raise

try:  # POSIX; elsewhere runs are not locked (see claim_runs)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["Progress", "ResumePlan", "claim_runs", "plan_resume", "pool_context",
           "preload_modules", "run_configs", "run_identity", "start_pool_server"]

#: ``on_done(index, total, outcome)``: called as each run ends, in the order they end.
Progress = Callable[[int, int, RunOutcome], None]
#: ``watch(index)``: the :class:`~toolkit.lab.runner.context.Reporter` of the run at ``index``
#: (the command line's bars); in a pool, what the workers report reaches it through a queue.
Watch = Callable[[int], Reporter]

_REPORTS: Any = None  # a pool worker's queue to the parent (set by _worker_init)


class _QueueReporter:
    """A pool worker's reporter: sends each report of run ``index`` to the parent."""

    def __init__(self, index: int, queue: Any) -> None:
        self.index, self.queue = index, queue

    def advance(self, label: str, done: int, total: int, current: str) -> None:
        self.queue.put(("advance", self.index, (label, done, total, current)))

    def write(self, text: str) -> None:
        self.queue.put(("write", self.index, (text,)))

    def child_done(self, run_dir: str, name: str) -> None:
        self.queue.put(("child_done", self.index, (run_dir, name)))


#: What a pool's worker takes over from the process that made the pool when it starts: the
#: environment, the import path and the working directory (as a spawned worker would; a fork
#: server's worker starts with the server's, from the first pool this process made).
_Setting = tuple[dict[str, str], list[str], str]


def _setting() -> _Setting:
    return dict(os.environ), list(sys.path), os.getcwd()


def _worker_init(reports: Any = None, setting: _Setting | None = None) -> None:
    # Between runs a worker ignores Ctrl-C (the parent decides); during a run the runner's own
    # handlers mark the run interrupted.
    global _REPORTS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _REPORTS = reports
    if setting is not None:
        env, path, cwd = setting
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        os.chdir(cwd)


def _relay(reports: Any, watch: Watch) -> None:
    """In the parent: hand what the workers report to the watching reporters, until ``None``."""
    while (message := reports.get()) is not None:
        kind, index, args = message
        with contextlib.suppress(Exception):  # a bar that fails never stops the runs
            getattr(watch(index), kind)(*args)


def _outcome_dict(outcome: RunOutcome) -> dict[str, Any]:
    return {"run_dir": str(outcome.run_dir), "status": outcome.status,
            "exit_code": outcome.exit_code, "error": outcome.error,
            "duration_s": outcome.duration_s}


def _pool_worker(args: tuple[int, RunSpec, list[str], Finish | None]
                 ) -> tuple[int, dict[str, Any]]:
    index, spec, argv, finish = args
    config = spec.config
    reporter = _QueueReporter(index, _REPORTS) if _REPORTS is not None else None
    try:
        with confined(config.output_dir):  # nothing of the run lands outside its folder
            outcome = execute(spec, quiet=True, argv=argv, finish=finish,
                              executor={"kind": "local", "worker": local_worker()},
                              reporter=reporter)
    except Exception as err:  # not a failing experiment: a fault of the runner itself
        return index, {"run_dir": str(Path(config.output_dir) / config.experiment),
                       "status": "failed", "exit_code": 1,
                       "error": f"could not run: {type(err).__name__}: {err}", "duration_s": 0.0}
    if outcome.status == "interrupted":
        # The run is marked and its files are written. An interrupted worker stops the whole
        # sweep (as in a single process): tell the parent, and leave without taking the next
        # run from the queue.
        signum = outcome.exit_code - 128 if outcome.exit_code > 128 else signal.SIGINT
        with contextlib.suppress(OSError):
            os.kill(os.getppid(), signum)
        os._exit(outcome.exit_code)
    return index, _outcome_dict(outcome)


def run_identity(config: Mapping[str, Any]) -> str:
    """A run's identity: the SHA-256 of its resolved config (seed included) without
    ``output_dir``, which only says where the run lives. A moved or copied results folder, or
    another spelling of its path (relative, with a trailing slash), keeps its runs' identity."""
    data = {k: v for k, v in config.items() if k != "output_dir"}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ResumePlan:
    """What ``--resume`` does with each config: run it, or leave it to a run that exists.

    ``done``: complete runs of some configs (not run again); ``running``: runs of some configs
    whose process is alive (not run twice); ``damaged``: run folders of the same experiments
    that cannot be read (their configs run again); ``todo``: the configs to run, abandoned,
    failed and interrupted runs included.
    """

    todo: list[RunSpec] = field(default_factory=list)
    done: list[Path] = field(default_factory=list)
    running: list[Path] = field(default_factory=list)
    damaged: list[DamagedFile] = field(default_factory=list)


def plan_resume(specs: Sequence[RunSpec]) -> ResumePlan:
    """Match each planned run with the runs under its output folder by :func:`run_identity`."""
    from toolkit.lab.runner.check import check_run
    from toolkit.lab.runner.results import RunResults, read_toml

    plan = ResumePlan()
    index: dict[str, list[Path]] = {}
    for root, parent in dict.fromkeys((s.config.output_dir, Path(s.config.output_dir)
                                       / s.config.experiment) for s in specs):
        inside(root, parent)  # a link to someone else's runs is refused, not resumed
        for run_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
            if run_dir.name.startswith(".") or not os.path.lexists(run_dir / "meta.json"):
                continue
            try:
                index.setdefault(run_identity(read_toml(run_dir / "config.toml",
                                                        root=run_dir)), []).append(run_dir)
            except DamagedFile as err:
                plan.damaged.append(err)
    for spec in specs:
        found = index.get(run_identity(spec.config.to_dict()), [])
        status = {}
        for run_dir in found:
            try:
                status[run_dir] = RunResults(run_dir).status
            except DamagedFile as err:
                plan.damaged.append(err)
        checked = {d: check_run(d) for d in found if status.get(d) == "complete"}
        readable = [d for d, problems in checked.items() if not problems]
        running = [d for d in found if status.get(d) == "running"]
        if readable:
            plan.done.append(readable[-1])
        elif running:
            plan.running.append(running[-1])
        else:
            plan.damaged += [problems[0] for problems in checked.values()]
            plan.todo.append(spec)
    _RESUMED.update((id(s), weakref.ref(s)) for s in plan.todo)
    return plan


#: The runs :func:`plan_resume` left to run (by ``id``, with a weak reference to tell a new
#: object at the same address apart): :func:`run_configs` claims them before it starts them,
#: and starts only those no other process holds or has completed.
_RESUMED: dict[int, weakref.ref[RunSpec]] = {}
LOCKS = ".locks"


def _was_resumed(spec: RunSpec) -> bool:
    ref = _RESUMED.pop(id(spec), None)
    return ref is not None and ref() is spec


def _claim(spec: RunSpec, held: dict[str, int]) -> bool:
    """Take the lock of ``spec``'s run (``<output>/<experiment>/.locks/<identity>.lock``,
    an exclusive ``flock``, never waited for): ``False`` when another process holds it. The
    kernel releases it when the process ends, however it ends (SIGKILL included)."""
    config = spec.config
    identity = run_identity(config.to_dict())
    if fcntl is None or identity in held:
        return True
    folder = Path(config.output_dir) / config.experiment / LOCKS
    inside(config.output_dir, folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = inside(config.output_dir, folder / f"{identity}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    held[identity] = fd
    return True


@contextlib.contextmanager
def claim_runs(specs: Sequence[RunSpec]) -> Iterator[list[RunSpec]]:
    """The runs of ``specs`` this process may start, with the lock of each resumed run held
    until the ``with`` ends: a run that :func:`plan_resume` left to run is started only when
    no other process holds its lock and, the lock taken, no complete or live run of the same
    identity has appeared since it was planned; the others are named on stderr. So two
    ``--resume`` at once never run the same seed twice. Runs not resumed are not locked (a
    plain ``toolkit run`` always makes a new run).

    Without ``fcntl`` (Windows) nothing is locked: two ``--resume`` at once there may both
    run a seed that neither found complete.
    """
    held: dict[str, int] = {}
    try:
        resumed = [s for s in specs if _was_resumed(s)]
        busy = {id(s) for s in resumed if not _claim(s, held)}
        again = plan_resume([s for s in resumed if id(s) not in busy]) if resumed else None
        for s in again.todo if again is not None else ():
            _RESUMED.pop(id(s), None)  # marked again by that plan: not a mark of the caller's
        todo = {id(s) for s in again.todo} if again is not None else set()
        for spec in resumed:
            if id(spec) not in todo:
                why = ("running now in another process" if id(spec) in busy else
                       "complete or running since it was planned")
                print(f"toolkit: warning: {spec.config.experiment} seed {spec.config.seed}: "
                      f"{why}; not started twice", file=sys.stderr, flush=True)
        skipped = {id(s) for s in resumed} - todo
        yield [s for s in specs if id(s) not in skipped]
    finally:
        for fd in held.values():
            os.close(fd)  # closing the last descriptor releases the lock


def _in_process(specs: Sequence[RunSpec], *, quiet: bool, argv: list[str],
                finish: Finish | None, on_done: Progress | None, watch: Watch | None = None
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


def _in_progress(specs: Sequence[RunSpec], workers: set[int], code: int
                 ) -> list[tuple[int, RunOutcome]]:
    """The runs the pool's ``workers`` (pids) had in progress when it was stopped, found by the
    pid in their meta.json, each matched to its config's index by identity."""
    from toolkit.lab.runner.results import RunResults, read_toml

    configs = [s.config for s in specs]
    wanted = {}
    for i, config in enumerate(configs):
        wanted.setdefault(run_identity(config.to_dict()), []).append(i)
    found = []
    for parent in dict.fromkeys(Path(c.output_dir) / c.experiment for c in configs):
        for run_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
            try:
                run = RunResults(run_dir)
                if run.meta.get("pid") not in workers or run.status == "complete":
                    continue
                indices = wanted.get(run_identity(read_toml(run_dir / "config.toml")), [])
            except (DamagedFile, OSError):
                continue
            if indices:
                found.append((indices.pop(0), RunOutcome(
                    run_dir, "interrupted", code, run.meta.get("error"),
                    run.meta.get("duration_s") or 0.0)))
    return found


def preload_modules(specs: Sequence[RunSpec]) -> list[str]:
    """The modules every worker of a pool running ``specs`` imports: the runner (and with it
    torch) and each experiment a run may contain (a composite's ``parts``), by module name.
    An experiment loaded from a loose file has no importable name; a worker loads it from its
    file."""
    names = {__name__: None}
    for spec in specs:
        for part in spec.experiment.parts.values():
            source = part.source
            if source is not None and source.module is not None:
                names.setdefault(source.module, None)
    return list(names)


def start_pool_server(modules: Sequence[str] | None = None) -> bool:
    """Start the fork server of this process's local pools now, importing ``modules`` (default:
    the runner and every installed experiment) while this process goes on: call it as soon as
    a pool is likely, so that the server's imports and this process's own planning overlap.
    A pool made later forks its workers from it at once. ``False`` where the platform has no
    fork server (pools spawn their workers there); nothing happens when it runs already."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from multiprocessing import forkserver

    from toolkit.lab.runner.registry import installed_modules

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(modules) if modules is not None
                               else [__name__, *installed_modules()])
    # started with SIGINT ignored, which it and its workers keep (see _in_pool)
    main = threading.current_thread() is threading.main_thread()
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        forkserver.ensure_running()  # returns once started; the imports go on over there
    finally:
        if main:
            signal.signal(signal.SIGINT, ignored)
    return True


def pool_context(specs: Sequence[RunSpec]) -> Any:
    """The multiprocessing context a local pool starts its workers with.

    ``forkserver`` where the platform has it: one fresh, single-threaded server process
    imports :func:`preload_modules` once (torch and the experiments: about 3 s of CPU), and
    every worker is a fork of it, ready at once, where a spawned worker would import them all
    again. Forking the server, not this process, keeps the workers clear of this process's
    threads and of anything torch set up here. Elsewhere ``spawn``.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # takes effect when the server starts (the first pool of this process); a module that
    # fails to import there is imported by the worker that needs it
    ctx.set_forkserver_preload(preload_modules(specs))
    return ctx


def _in_pool(specs: Sequence[RunSpec], *, workers: int, argv: list[str],
             finish: Finish | None, on_done: Progress | None, watch: Watch | None = None
             ) -> tuple[list[RunOutcome], int]:
    total = len(specs)
    ctx = pool_context(specs)
    # The workers start with SIGINT ignored (a Python started with SIGINT ignored keeps it
    # ignored, and so do the fork server's children): Ctrl-C in a terminal reaches the whole
    # process group, and a worker still starting must not die with a traceback; during a run
    # the runner's own handler marks it interrupted.
    main = threading.current_thread() is threading.main_thread()
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    reports = ctx.SimpleQueue() if watch is not None else None
    try:
        pool = ctx.Pool(processes=min(workers, total), initializer=_worker_init,
                        initargs=(reports, _setting()))
    finally:
        if main:
            signal.signal(signal.SIGINT, ignored)
    relay = None
    if reports is not None and watch is not None:
        relay = threading.Thread(target=_relay, args=(reports, watch), daemon=True)
        relay.start()
    try:
        return _pool_results(pool, specs, argv=argv, finish=finish, on_done=on_done)
    finally:
        if relay is not None and reports is not None:
            reports.put(None)
            relay.join(timeout=5)


def _pool_results(pool: Any, specs: Sequence[RunSpec], *, argv: list[str],
                  finish: Finish | None, on_done: Progress | None
                  ) -> tuple[list[RunOutcome], int]:
    """Hand the runs to the pool and collect their outcomes as they end."""
    total = len(specs)
    outcomes: list[RunOutcome | None] = [None] * total
    status = 0
    jobs = [(i, spec, argv, finish) for i, spec in enumerate(specs)]
    try:
        with signals_raise():
            for i, info in pool.imap_unordered(_pool_worker, jobs):
                outcome = RunOutcome(Path(info["run_dir"]), info["status"], info["exit_code"],
                                     info["error"], info["duration_s"] or 0.0)
                outcomes[i] = outcome
                if on_done:
                    on_done(i, total, outcome)
                status = max(status, outcome.exit_code)
        pool.close()
    except (RunInterrupted, KeyboardInterrupt) as err:
        code = err.exit_code if isinstance(err, RunInterrupted) else 130
        with signals_deferred():  # more signals (e.g. from the workers) change nothing now
            workers = {p.pid for p in multiprocessing.active_children()}
            pool.terminate()  # SIGTERM: runs in progress mark themselves interrupted
            pool.join()
            for i, outcome in _in_progress(specs, workers, code):
                if outcomes[i] is None:
                    outcomes[i] = outcome
                    if on_done:
                        on_done(i, total, outcome)
        return [o for o in outcomes if o is not None], code
    pool.join()
    done = [o for o in outcomes if o is not None]
    if any(o.status == "interrupted" for o in done):
        status = max(status, 130)
    return done, status


def run_configs(specs: Sequence[RunSpec], *, executor: ExecutorSpec | None = None,
                quiet: bool = False, argv: Sequence[str] | None = None,
                finish: Finish | None = None, on_done: Progress | None = None,
                watch: Watch | None = None) -> tuple[list[RunOutcome], int]:
    """Run every planned run (:func:`~toolkit.lab.runner.planning.plan`); returns the outcomes
    (in the order they ended) and the exit status.

    Process pools and Dask workers receive each spec by reference: they load the same
    experiment modules again and rebuild the validated params without validating them again.

    Exit status: 0 when all completed, 1 when any failed (the others still run), 128 + signal
    when interrupted (the remaining runs are not started; runs in progress are marked
    ``interrupted``). ``finish(run_dir, experiment)`` runs after each run's files are written
    (the command line draws the report there); with a process pool it runs in the worker, so it
    must be a module-level function. ``watch(index)`` gives the reporter each run's progress
    goes to, as each item of its top-level loop ends (local executors; Dask runs report only
    as they end).
    """
    spec = executor or ExecutorSpec()
    argv = list(sys.argv if argv is None else argv)
    with claim_runs(specs) as claimed:
        if len(claimed) < len(specs):
            kept = {id(s) for s in claimed}
            watch, on_done = _renumbered(watch, on_done, len(specs),
                                         [i for i, s in enumerate(specs) if id(s) in kept])
        if spec.kind == "dask":
            from toolkit.lab.runner.dask_executor import run_on_dask

            return run_on_dask(claimed, spec, argv=argv, finish=finish, on_done=on_done)
        for run in claimed:
            check_output_dir(run.config)
        if spec.workers <= 1 or len(claimed) <= 1:
            return _in_process(claimed, quiet=quiet, argv=argv, finish=finish,
                               on_done=on_done, watch=watch)
        return _in_pool(claimed, workers=spec.workers, argv=argv, finish=finish,
                        on_done=on_done, watch=watch)


def _renumbered(watch: Watch | None, on_done: Progress | None, total: int, kept: list[int]
                ) -> tuple[Watch | None, Progress | None]:
    """``watch`` and ``on_done`` for the runs left after some were not started: index ``i``
    of the runs started is the ``kept[i]``-th of the ``total`` planned."""
    new_watch = None if watch is None else (lambda i: watch(kept[i]))
    new_done = None if on_done is None else (lambda i, _n, o: on_done(kept[i], total, o))
    return new_watch, new_done
