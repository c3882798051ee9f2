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
stop when the cluster closes).
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.lab.runner.config import ExecutorSpec, RunConfig
from toolkit.lab.runner.errors import ConfigError, RunInterrupted
from toolkit.lab.runner.registry import Experiment
from toolkit.lab.runner.results import (
    atomic_write_json,
    atomic_write_text,
    dumps_json,
    new_run_dir,
    utc_now,
)
from toolkit.lab.runner.run import (
    Finish,
    RunOutcome,
    _signals_deferred,
    _signals_raise,
    call_finish,
    check_output_dir,
    execute,
)

__all__ = ["run_on_dask"]

_INSTALL_HINT = 'install the optional packages: pip install ".[distributed]"'


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError("--executor", "dask", "the dask executor needs the packages dask "
                          "and distributed, which are not installed", _INSTALL_HINT) from None
    return distributed


_STARTED = "toolkit-run-started"


def _task(config: RunConfig, experiment: Experiment, argv: list[str], key: str
          ) -> dict[str, Any]:
    """Run one config on a worker (``experiment`` arrives by reference: the worker imports the
    same module or file); return the outcome and every file the run wrote."""
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
        outcome = execute(config, experiment, quiet=True, argv=argv, root=Path(tmp),
                          executor={"kind": "dask", "worker": worker})
        files = _files_of(outcome.run_dir)
    return {"run_id": outcome.run_dir.name, "status": outcome.status,
            "exit_code": outcome.exit_code, "error": outcome.error,
            "duration_s": outcome.duration_s, "files": files, "worker": worker}


def _files_of(run_dir: Path) -> dict[str, bytes]:
    """Every file under ``run_dir``, by its path relative to it, in sorted order."""
    return {p.relative_to(run_dir).as_posix(): p.read_bytes()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _logged_so_far(root: str) -> dict[str, Any] | None:
    """On a worker: the files a run in progress under ``root`` has written so far."""
    for meta in Path(root).glob("*/*/meta.json"):
        return {"run_id": meta.parent.name, "files": _files_of(meta.parent)}
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


def _write_run(config: RunConfig, run_id: str, files: dict[str, bytes]) -> Path:
    """Write a run's files as ``<output_dir>/<experiment>/<run_id>/``, all at once."""
    parent = Path(config.output_dir) / config.experiment
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_id}.", suffix=".partial", dir=parent))
    try:
        for rel, data in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        final = parent / run_id
        if final.exists():  # the same id from another machine: keep both, under a new suffix
            final = parent / f"{run_id.rsplit('__', 1)[0]}__{secrets.token_hex(3)}"
            meta = json.loads((staging / "meta.json").read_text(encoding="utf-8"))
            meta["run_id"] = final.name
            atomic_write_json(staging / "meta.json", meta)
        os.rename(staging, final)
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _write_marked(config: RunConfig, status: str, error: str, worker: str | None) -> Path:
    """A run directory for a run whose files never came back: config and meta only."""
    run_dir = new_run_dir(config.output_dir, config.experiment, config.seed)
    atomic_write_text(run_dir / "config.toml", config.to_toml())
    now = utc_now().isoformat()
    atomic_write_json(run_dir / "meta.json", {
        "status": status, "experiment": config.experiment, "run_id": run_dir.name,
        "seed": config.seed, "executor": {"kind": "dask", "worker": worker},
        "started": None, "ended": now, "error": error,
    })
    return run_dir


#: Runs a LocalCluster in a process of its own session: Ctrl-C in a terminal reaches the whole
#: foreground process group, and only the client decides what an interrupt means. The cluster
#: lives until the client closes this process's stdin (or dies, which closes it too).
_CLUSTER_MAIN = """
import logging, sys
sys.path[:0] = [p for p in sys.argv[2:] if p not in sys.path]
import dask, distributed
# the scheduler gives up on a task at the first worker death; the client retries once
with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
    # workers log at CRITICAL only: closing the cluster while a worker is busy makes its
    # heartbeat fail with a logged traceback; what a user must see reaches the client as results
    cluster = distributed.LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1,
                                       processes=True, dashboard_address=":0",
                                       silence_logs=logging.CRITICAL)
print(cluster.scheduler_address, flush=True)
sys.stdin.read()
cluster.close(timeout=20)
"""


class _ClusterProcess:
    """A LocalCluster of ``workers`` processes, started in a session of its own."""

    def __init__(self, workers: int, timeout: float = 300.0) -> None:
        import subprocess

        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CLUSTER_MAIN, str(workers), *sys.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True, text=True)
        try:
            line = self._first_line(timeout)
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

    def _first_line(self, timeout: float) -> str:
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
    if spec.address:
        try:
            return distributed.Client(spec.address, timeout="10s"), None
        except (OSError, TimeoutError) as err:
            raise ConfigError("--address", spec.address, f"cannot reach a Dask scheduler there "
                              f"({type(err).__name__}: {err})",
                              "start one with `dask scheduler` and give its tcp://HOST:PORT"
                              ) from None
    cluster = _ClusterProcess(spec.workers)
    try:
        return distributed.Client(cluster.address, timeout="60s"), cluster
    except BaseException:
        cluster.close()
        raise


def run_on_dask(configs: Sequence[RunConfig], experiments: Mapping[str, Experiment],
                spec: ExecutorSpec, *, argv: list[str], finish: Finish | None = None,
                on_done: Any = None) -> tuple[list[RunOutcome], int]:
    """Run ``configs`` as tasks on a Dask cluster (see the module docstring)."""
    distributed = _import_distributed()
    for config in configs:
        check_output_dir(config)
    # the scheduler of a LocalCluster lives in this process: keep its INFO lines off the console
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(max(level, logging.WARNING))
    try:
        return _run(configs, experiments, spec, distributed, argv=argv, finish=finish,
                    on_done=on_done)
    finally:
        log.setLevel(level)


def _run(configs: Sequence[RunConfig], experiments: Mapping[str, Experiment],
         spec: ExecutorSpec, distributed: Any, *, argv: list[str], finish: Finish | None,
         on_done: Any) -> tuple[list[RunOutcome], int]:
    client, cluster = _client(spec, distributed)
    total = len(configs)
    outcomes: list[RunOutcome] = []
    status = 0
    futures: dict[Any, int] = {}
    retried: set[int] = set()

    def submit(i: int) -> Any:
        key = f"toolkit-run-{i}-{secrets.token_hex(4)}"
        experiment = experiments[configs[i].experiment]
        future = client.submit(_task, configs[i], experiment, argv, key, pure=False, key=key)
        futures[future] = i
        return future

    def done(i: int, outcome: RunOutcome) -> None:
        nonlocal status
        outcomes.append(outcome)
        status = max(status, outcome.exit_code)
        if on_done:
            on_done(i, total, outcome)

    try:
        with _signals_raise():
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
                    run_dir = _write_marked(config, "failed", f"the worker died twice while "
                                            f"running it (retried once): {err}", None)
                    done(i, RunOutcome(run_dir, "failed", 1, "worker died twice"))
                    continue
                run_dir = _write_run(config, info["run_id"], info["files"])
                if finish is not None and info["status"] != "interrupted":
                    _finish(finish, run_dir, experiments[config.experiment])
                done(i, RunOutcome(run_dir, info["status"], info["exit_code"], info["error"],
                                   info["duration_s"] or 0.0))
    except (RunInterrupted, KeyboardInterrupt) as err:
        with _signals_deferred():
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
        if got is not None and "meta.json" in got["files"]:
            meta = json.loads(got["files"]["meta.json"])
            meta.update(status="interrupted", ended=utc_now().isoformat(),
                        error=f"{error}; kept what the worker had logged")
            got["files"]["meta.json"] = dumps_json(meta).encode("utf-8")
            run_dir = _write_run(configs[i], got["run_id"], got["files"])
        else:
            error += "; nothing it had logged could be fetched from the worker, so nothing " \
                     "but config.toml and meta.json was kept"
            run_dir = _write_marked(configs[i], "interrupted", error, worker)
        outcome = RunOutcome(run_dir, "interrupted", code, error)
        outcomes.append(outcome)
        if on_done:
            on_done(i, total, outcome)
