"""Runs on a Dask cluster: workers compute, this process writes the run directories.

Each run is one task. The worker runs it in a temporary folder of its own, with the run's seed and
thread count, and returns every file the run wrote (config, meta, metrics, summary, costs,
artifacts) as bytes; the client writes them under the run's output folder, atomically (a hidden
folder renamed into place). No filesystem is shared. ``meta.json`` records
``executor = {"kind": "dask", "worker": <worker address>}``.

Failure and interrupt:

- a run whose experiment raises is a normal outcome (``failed``, with the error);
- a worker that dies mid-run: the run is submitted once more; if that attempt dies too the run
  is written as ``failed`` with the reason (for a cluster this process starts, the scheduler
  gives up on a task at its first worker death, so a run is tried at most twice in all);
- Ctrl-C cancels the runs not started, and writes the started ones as ``interrupted`` with
  what their worker had logged by then, fetched from the worker; when a worker cannot be
  reached the run directory holds only ``config.toml`` and ``meta.json``, and its ``error``
  says that nothing else was kept.

Without an address a ``LocalCluster`` of ``workers`` processes with one thread each is started
and closed afterwards, in a process of its own session: Ctrl-C in a terminal reaches the whole
foreground process group, and only this process decides what an interrupt means (the workers
stop when the cluster closes). Every socket it opens listens on 127.0.0.1; its dashboard is off
unless ``spec.dashboard`` asks for it (then its link is printed).

Trust: a scheduler at an address is reached over TLS, or over plain TCP on loopback only, and is
probed before the client is made (:mod:`~toolkit.lab.runner.dask_connect`); what a task returns is
decoded as msgpack only and checked before a byte is written (:mod:`~toolkit.lab.runner.dask_results`):
a run whose worker sends a path outside its folder, or files that do not read as the results
format says, is written as ``failed`` with the reason, and nothing it sent is kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit.lab.runner.config import ExecutorSpec, RunConfig
from toolkit.lab.runner.dask_results import Refused, checked, files_of, write_marked, write_run
from toolkit.lab.runner.errors import ConfigError, RunInterrupted
from toolkit.lab.runner.planning import RunSpec
from toolkit.lab.runner.registry import Experiment
from toolkit.lab.runner.results import atomic_write_json, dumps_json, utc_now
from toolkit.lab.runner.run import Finish, RunOutcome, call_finish, check_output_dir, execute
from toolkit.lab.runner.signals import signals_deferred, signals_raise

__all__ = ["run_on_dask"]

_INSTALL_HINT = 'install the optional packages: pip install ".[distributed]"'


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError("--executor", "dask", "the dask executor needs the packages dask "
                          "and distributed, which are not installed", _INSTALL_HINT) from None
    return distributed


_STARTED = "toolkit-run-started"
#: How the client decodes what tasks return: msgpack only (no pickle, no dask serializers).
_RESULTS_AS = ["msgpack"]


def _task(spec: RunSpec, argv: list[str], key: str) -> dict[str, Any]:
    """Run one planned run on a worker (the spec arrives by reference: the worker imports the
    same module or file, and resolves the device on its own machine); return the outcome and
    every file the run wrote."""
    from distributed import get_worker

    try:
        this = get_worker()
    except ValueError:  # not inside a worker (called directly, e.g. in a test)
        worker = "<client>"
    else:
        worker = this.address
    with tempfile.TemporaryDirectory(prefix="toolkit-run-") as tmp:
        if worker != "<client>":
            # tells the client which runs had started, and where, if it is interrupted
            this.log_event(_STARTED, {"key": key, "worker": worker, "root": tmp})
        outcome = execute(spec, quiet=True, argv=argv, root=Path(tmp),
                          executor={"kind": "dask", "worker": worker})
        status, code, error = outcome.status, outcome.exit_code, outcome.error
        try:
            files = files_of(outcome.run_dir)
        except Refused as err:  # only config and meta go back, marked failed
            status, code, error = "failed", 1, f"its files were refused on the worker: {err}"
            meta = json.loads((outcome.run_dir / "meta.json").read_text(encoding="utf-8"))
            meta.update(status=status, error=error)
            files = {"config.toml": (outcome.run_dir / "config.toml").read_bytes(),
                     "meta.json": dumps_json(meta).encode("utf-8")}
    return {"run_id": outcome.run_dir.name, "status": status, "exit_code": code,
            "error": error, "duration_s": outcome.duration_s, "files": files, "worker": worker}


def _logged_so_far(root: str) -> dict[str, Any] | None:
    """On a worker: the files a run in progress under ``root`` has written so far."""
    for meta in Path(root).glob("*/*/meta.json"):
        return {"run_id": meta.parent.name, "files": files_of(meta.parent)}
    return None


def _fetch(client: Any, worker: str, root: str, timeout: float = 15.0) -> dict[str, Any] | None:
    """What a worker's run in progress has written, or ``None`` when it cannot be had in time."""
    box: list[Any] = []

    def ask() -> None:
        with contextlib.suppress(Exception):
            box.append(client.run(_logged_so_far, root, workers=[worker])[worker])

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else None


#: Runs a LocalCluster in a process of its own session: Ctrl-C in a terminal reaches the whole
#: foreground process group, and only the client decides what an interrupt means. The cluster
#: lives until the client closes this process's stdin (or dies, which closes it too).
#: Every socket it opens listens on 127.0.0.1. Dask always starts an HTTP server beside the
#: scheduler and each worker; without the dashboard they serve no route at all.
_CLUSTER_MAIN = """
import logging, sys
sys.path[:0] = [p for p in sys.argv[3:] if p not in sys.path]
import dask, distributed
dashboard = sys.argv[2] == "1"
settings = {"distributed.scheduler.allowed-failures": 0}
if not dashboard:
    settings.update({"distributed.scheduler.http.routes": [],
                     "distributed.worker.http.routes": []})
# the scheduler gives up on a task at the first worker death; the client retries once
with dask.config.set(settings):
    # workers log at CRITICAL only: closing the cluster while a worker is busy makes its
    # heartbeat fail with a logged traceback; what a user must see reaches the client as results
    cluster = distributed.LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1,
                                       processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0",
                                       scheduler_kwargs={"dashboard": dashboard},
                                       silence_logs=logging.CRITICAL)
print(cluster.scheduler_address, flush=True)
print(cluster.dashboard_link if dashboard else "-", flush=True)
sys.stdin.read()
cluster.close(timeout=20)
"""


class _ClusterProcess:
    """A LocalCluster of ``workers`` processes on loopback, started in a session of its own;
    ``dashboard`` is its dashboard's link when asked for, else ``None``."""

    def __init__(self, workers: int, timeout: float = 300.0, *, dashboard: bool = False
                 ) -> None:
        import subprocess

        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CLUSTER_MAIN, str(workers), "1" if dashboard else "0",
             *sys.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True, text=True)
        try:
            line = self._next_line(timeout)
            link = self._next_line(timeout) if line.startswith("tcp://") else ""
        except BaseException:
            self.close()
            raise
        if not line.startswith("tcp://"):
            self._log.seek(0)
            lines = self._log.read().decode("utf-8", "replace").strip().splitlines()
            self.close()
            raise ConfigError("--executor", "dask", f"the local Dask cluster did not start ("
                              f"{lines[-1] if lines else 'no message'})",
                              "check the dask and distributed installation, or give "
                              "--address of a running scheduler")
        self.address = line
        self.dashboard = link if link.startswith("http") else None

    def _next_line(self, timeout: float) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        return box[0].strip() if box else ""

    def close(self) -> None:
        """Stop the cluster (gracefully, else its whole process group) and wait for it."""
        import subprocess

        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a worker left behind
        self._log.close()


def _client(spec: ExecutorSpec, distributed: Any) -> tuple[Any, Any]:
    """A client of the scheduler at ``spec.address`` (checked and probed first, see
    :mod:`~toolkit.lab.runner.dask_connect`), or of a LocalCluster started for the sweep. Task
    results are taken as msgpack only: a run's files come back as plain bytes and text, never as
    pickles."""
    from toolkit.lab.runner.dask_connect import (
        check_executor,
        insecure_warning,
        probe,
        security_for,
    )

    check_executor(spec)
    if spec.address:
        warning = insecure_warning(spec)
        if warning:
            print(warning, file=sys.stderr, flush=True)
        security = security_for(spec)
        probe(spec.address, security, spec.connect_timeout)
        try:
            return distributed.Client(spec.address, security=security,
                                      timeout=f"{spec.connect_timeout}s",
                                      deserializers=_RESULTS_AS), None
        except (OSError, TimeoutError) as err:
            raise ConfigError("--address", spec.address, f"cannot reach a Dask scheduler there "
                              f"({type(err).__name__}: {err})",
                              "start one with `dask scheduler` and give its address"
                              ) from None
    cluster = _ClusterProcess(spec.workers, dashboard=spec.dashboard)
    if cluster.dashboard:
        import importlib.util

        note = "" if importlib.util.find_spec("bokeh") else \
            ' (bokeh is not installed, so that page only asks for it: pip install "bokeh>=3.1")'
        print(f"dashboard: {cluster.dashboard}{note}", file=sys.stderr, flush=True)
    try:
        return distributed.Client(cluster.address, timeout="60s",
                                  deserializers=_RESULTS_AS), cluster
    except BaseException:
        cluster.close()
        raise


def run_on_dask(specs: Sequence[RunSpec], spec: ExecutorSpec, *, argv: list[str],
                finish: Finish | None = None, on_done: Any = None
                ) -> tuple[list[RunOutcome], int]:
    """Run the planned runs as tasks on a Dask cluster (see the module docstring)."""
    distributed = import_distributed()
    for run in specs:
        check_output_dir(run.config)
    # keep Dask's INFO lines off the console; a result refused as not plain data is logged by
    # Dask as a CRITICAL traceback, and said once, in the run's error, by this executor
    quiet = {"distributed": logging.WARNING, "distributed.protocol.core": logging.CRITICAL + 1}
    levels = {name: logging.getLogger(name).level for name in quiet}
    for name, level in quiet.items():
        logging.getLogger(name).setLevel(max(levels[name], level))
    try:
        return _run(specs, spec, distributed, argv=argv, finish=finish, on_done=on_done)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _run(specs: Sequence[RunSpec], spec: ExecutorSpec, distributed: Any, *, argv: list[str],
         finish: Finish | None, on_done: Any) -> tuple[list[RunOutcome], int]:
    client, cluster = _client(spec, distributed)
    configs = [s.config for s in specs]
    total = len(configs)
    outcomes: list[RunOutcome] = []
    status = 0
    futures: dict[Any, int] = {}
    retried: set[int] = set()

    def submit(i: int) -> Any:
        key = f"toolkit-run-{i}-{secrets.token_hex(4)}"
        future = client.submit(_task, specs[i], argv, key, pure=False, key=key)
        futures[future] = i
        return future

    def done(i: int, outcome: RunOutcome) -> None:
        nonlocal status
        outcomes.append(outcome)
        status = max(status, outcome.exit_code)
        if on_done:
            on_done(i, total, outcome)

    try:
        with signals_raise():
            pending = distributed.as_completed([submit(i) for i in range(total)])
            for future in pending:
                i = futures.pop(future)
                config = configs[i]
                try:
                    info = future.result()
                except distributed.KilledWorker as err:
                    if i not in retried:
                        retried.add(i)
                        pending.add(submit(i))
                        continue
                    run_dir = write_marked(config, "failed", f"the worker died twice while "
                                            f"running it (retried once): {err}", None)
                    done(i, RunOutcome(run_dir, "failed", 1, "worker died twice"))
                    continue
                except Exception as err:  # the task raised, or sent what is not plain data
                    done(i, _refused(config, f"{type(err).__name__}: {err}", None))
                    continue
                try:
                    run_dir = write_run(config, checked(info)["run_id"], info["files"])
                except Refused as err:
                    done(i, _refused(config, str(err), info.get("worker")
                                     if isinstance(info, dict) else None))
                    continue
                if finish is not None and info["status"] != "interrupted":
                    _finish(finish, run_dir, specs[i].experiment)
                done(i, RunOutcome(run_dir, info["status"], info["exit_code"], info["error"],
                                   info["duration_s"] or 0.0))
    except (RunInterrupted, KeyboardInterrupt) as err:
        with signals_deferred():
            code = err.exit_code if isinstance(err, RunInterrupted) else 130
            _interrupt(client, futures, configs, code, on_done, outcomes, total)
        return outcomes, code
    finally:
        with contextlib.suppress(Exception):
            client.close()
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close()
    return outcomes, status


def _refused(config: RunConfig, why: str, worker: Any) -> RunOutcome:
    """A run whose worker sent nothing usable: written as failed, config and meta only."""
    error = f"what its worker sent was refused, and nothing of it kept: {why}"
    run_dir = write_marked(config, "failed", error, worker if isinstance(worker, str) else None)
    return RunOutcome(run_dir, "failed", 1, error)


def _finish(finish: Finish, run_dir: Path, experiment: Experiment) -> None:
    meta_path = run_dir / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    call_finish(finish, run_dir, meta, experiment)
    meta["wall_seconds"] = round(meta.get("wall_seconds", 0.0) + meta["finish_s"], 3)
    atomic_write_json(meta_path, meta)


def _interrupt(client: Any, futures: dict[Any, int], configs: Sequence[RunConfig], code: int,
               on_done: Any, outcomes: list[RunOutcome], total: int) -> None:
    """Cancel what has not run; mark what was running as interrupted."""
    try:
        running = {msg["key"]: msg for _, msg in client.get_events(_STARTED)}
    except Exception:  # the scheduler is gone: nothing is known to have started
        running = {}
    logged = {i: _fetch(client, running[f.key]["worker"], running[f.key]["root"])
              for f, i in futures.items() if f.key in running}
    client.cancel(list(futures))
    for future, i in sorted(futures.items(), key=lambda item: item[1]):
        if future.key not in running:
            continue
        worker = running[future.key]["worker"]
        error = f"interrupted (exit status {code}) while running on {worker}"
        got = logged.get(i)
        try:
            run_dir = _kept(configs[i], got, error)
        except Refused as err:
            run_dir = None
            got = f"what the worker sent was refused ({err})"
        if run_dir is None:
            why = got if isinstance(got, str) else "nothing it had logged could be fetched " \
                                                   "from the worker"
            error += f"; {why}, so nothing but config.toml and meta.json was kept"
            run_dir = write_marked(configs[i], "interrupted", error, worker)
        outcome = RunOutcome(run_dir, "interrupted", code, error)
        outcomes.append(outcome)
        if on_done:
            on_done(i, total, outcome)


def _kept(config: RunConfig, got: Any, error: str) -> Path | None:
    """Write what an interrupted run's worker had logged, marked interrupted; ``None`` when
    nothing came back, :class:`Refused` when what came back cannot be taken."""
    if got is None:
        return None
    got = checked(got, keys=("run_id", "files"))
    try:
        meta = json.loads(got["files"]["meta.json"])
    except ValueError as err:
        raise Refused(f"meta.json is not JSON ({err})") from None
    if not isinstance(meta, dict):
        raise Refused("meta.json is not a JSON object")
    meta.update(status="interrupted", ended=utc_now().isoformat(),
                error=f"{error}; kept what the worker had logged")
    got["files"]["meta.json"] = dumps_json(meta).encode("utf-8")
    return write_run(config, got["run_id"], got["files"])
