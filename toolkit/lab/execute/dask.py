"""Runs on a Dask cluster, every connection authenticated: workers compute, this process writes.

Each run is one task. The worker runs it in a temporary folder of its own and returns every
file the run wrote as bytes; the client checks them and writes them under the run's output
folder (:mod:`~toolkit.lab.execute.dask_files`). No filesystem is shared; ``meta.json``
records ``executor = {"kind": "dask", "worker": <address>}``.

Trust: every cluster speaks TLS with mutual certificates, so nothing is deserialised from a
peer that has not proved it holds a certificate of the cluster's CA:

- without an address, a ``LocalCluster`` is started on loopback in a process of its own
  session, with certificates made for this sweep alone
  (:meth:`distributed.security.Security.temporary`), handed to it over a pipe;
- a scheduler at an address is reached at ``tls://`` only, with the CA, certificate and key
  given (``--tls-ca-file``, ``--tls-cert``, ``--tls-key``) or in dask's configuration; plain
  ``tcp://`` is refused everywhere (:class:`~toolkit.lab.results.schema.ExecutorConfig`).

What a task returns is decoded as msgpack only (never a pickle) and checked before a byte is
written. A worker that dies mid-run: the run is submitted once more, then written ``failed``.
Ctrl-C cancels the runs not started and writes the started ones ``interrupted``, with what
their worker had logged when it can be fetched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.lab.errors import ConfigError, RunInterrupted
from toolkit.lab.execute.dask_files import Refused, checked, files_of, write_marked, write_run
from toolkit.lab.execute.run import (
    Finish,
    RunOutcome,
    call_finish,
    check_output_dir,
    execute,
    signals_deferred,
    signals_raise,
)
from toolkit.lab.plan.config import RunSpec
from toolkit.lab.results.files import atomic_write_json, json_text, read_record, utc_now
from toolkit.lab.results.schema import ExecutorConfig, RunConfig, RunMeta

__all__ = ["import_distributed", "run_on_dask", "security_for"]

_STARTED = "toolkit-run-started"
#: How the client decodes what tasks return: msgpack only (no pickle, no dask serializers).
_RESULTS_AS = ["msgpack"]
_TLS_OPTIONS = "--tls-ca-file, --tls-cert and --tls-key"


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError("--executor", "dask", "the dask executor needs the packages dask "
                          "and distributed, which are not installed",
                          'install the optional packages: pip install ".[distributed]"') from None
    return distributed


def check_executor(config: ExecutorConfig) -> None:
    """Refuse options that do not apply: dask options for a local executor, TLS files without
    an address (the local cluster makes its own), files that are not there, an address without
    certificates. Touches no network."""
    given = [(flag, value) for flag, value in (("--address", config.address),
                                               ("--tls-ca-file", config.tls_ca_file),
                                               ("--tls-cert", config.tls_cert),
                                               ("--tls-key", config.tls_key),
                                               ("--dashboard", config.dashboard)) if value]
    if config.kind != "dask":
        if given:
            raise ConfigError(given[0][0], "", "is only used by the dask executor",
                              "add --executor dask")
        return
    if config.address is None:
        if len(given) > int(config.dashboard):
            raise ConfigError(given[0][0], "", "is for a remote scheduler at a tls:// address; "
                              "the local cluster makes certificates of its own",
                              "add --address tls://HOST:PORT, or leave the TLS options out")
        return
    if config.dashboard:
        raise ConfigError("--dashboard", "", "shows the local cluster's dashboard; a remote "
                          "scheduler serves its own", "leave --dashboard out with --address")
    for flag, value in given[1:]:
        if not Path(str(value)).is_file():
            raise ConfigError(flag, str(value), "no such file", "give the path of a PEM file")
    if config.tls_ca_file or config.tls_cert:
        if not (config.tls_ca_file and config.tls_cert):
            raise ConfigError("--tls-ca-file" if not config.tls_ca_file else "--tls-cert", "",
                              "is needed: mutual TLS takes the cluster's CA and this client's "
                              "certificate", f"give {_TLS_OPTIONS} (the key may sit in the "
                              "certificate file)")
        return
    import dask.config

    if not (dask.config.get("distributed.comm.tls.ca-file", None)
            and dask.config.get("distributed.comm.tls.client.cert", None)):
        raise ConfigError("--address", config.address, "a tls:// scheduler needs the cluster's "
                          "CA certificate and this client's certificate and key",
                          f"give {_TLS_OPTIONS}, or set distributed.comm.tls.ca-file and "
                          "distributed.comm.tls.client.cert in dask's configuration")


def security_for(config: ExecutorConfig) -> Any:
    """The client's :class:`distributed.security.Security` for a remote scheduler: encryption
    required, from the given files or else from dask's configuration."""
    from distributed.security import Security

    if config.tls_ca_file or config.tls_cert:
        return Security(require_encryption=True, tls_ca_file=config.tls_ca_file,
                        tls_client_cert=config.tls_cert, tls_client_key=config.tls_key)
    return Security(require_encryption=True)


def _task(spec: RunSpec, argv: list[str], key: str) -> dict[str, Any]:
    """Run one planned run on a worker; return its outcome and every file it wrote."""
    from distributed import get_worker

    try:
        this = get_worker()
        worker = this.address
    except ValueError:  # not inside a worker (called directly, e.g. in a test)
        this, worker = None, "<client>"
    with tempfile.TemporaryDirectory(prefix="toolkit-run-") as tmp:
        if this is not None:  # which runs had started, and where, if the client is interrupted
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
                     "meta.json": json_text(meta).encode("utf-8")}
    return {"run_id": outcome.run_dir.name, "status": status, "exit_code": code,
            "error": error, "duration_s": outcome.duration_s, "files": files, "worker": worker}


def _logged_so_far(root: str) -> dict[str, Any] | None:
    """On a worker: the files a run in progress under ``root`` has written so far."""
    for meta in Path(root).glob("*/*/meta.json"):
        return {"run_id": meta.parent.name, "files": files_of(meta.parent)}
    return None


def _fetch(client: Any, worker: str, root: str, timeout: float = 15.0) -> dict[str, Any] | None:
    """What a worker's run in progress has written, or ``None`` when not had in time."""
    box: list[Any] = []

    def ask() -> None:
        with contextlib.suppress(Exception):
            box.append(client.run(_logged_so_far, root, workers=[worker])[worker])

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else None


#: A LocalCluster in a process of its own session (Ctrl-C in a terminal reaches the whole
#: foreground group; only the client decides what an interrupt means), on loopback, TLS with
#: the certificates read from stdin; it lives until the client closes its stdin. Dask starts
#: an HTTP server beside the scheduler and each worker: without the dashboard they serve no
#: route at all.
_CLUSTER_MAIN = """
import json, logging, sys
sys.path[:0] = [p for p in sys.argv[3:] if p not in sys.path]
import dask, distributed
from distributed.security import Security
security = Security(require_encryption=True, **json.loads(sys.stdin.readline()))
dashboard = sys.argv[2] == "1"
settings = {"distributed.scheduler.allowed-failures": 0}
if not dashboard:
    settings.update({"distributed.scheduler.http.routes": [],
                     "distributed.worker.http.routes": []})
with dask.config.set(settings):
    cluster = distributed.LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1,
                                       processes=True, host="127.0.0.1", protocol="tls://",
                                       security=security, dashboard_address="127.0.0.1:0",
                                       scheduler_kwargs={"dashboard": dashboard},
                                       silence_logs=logging.CRITICAL)
print(cluster.scheduler_address, flush=True)
print(cluster.dashboard_link if dashboard else "-", flush=True)
sys.stdin.read()
cluster.close(timeout=20)
"""
_PEMS = ("tls_ca_file", "tls_client_cert", "tls_client_key", "tls_scheduler_cert",
         "tls_scheduler_key", "tls_worker_cert", "tls_worker_key")


class _ClusterProcess:
    """A LocalCluster of ``workers`` processes on loopback behind mutual TLS (``security``:
    the sweep's own certificates); ``dashboard``: its link when asked for, else ``None``."""

    def __init__(self, workers: int, security: Any, *, dashboard: bool = False,
                 timeout: float = 300.0) -> None:
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CLUSTER_MAIN, str(workers), "1" if dashboard else "0",
             *sys.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True, text=True)
        try:
            pems = {name: getattr(security, name) for name in _PEMS}
            self.process.stdin.write(json.dumps(pems) + "\n")
            self.process.stdin.flush()
            line = self._next_line(timeout)
            link = self._next_line(timeout) if line.startswith("tls://") else ""
        except BaseException:
            self.close()
            raise
        if not line.startswith("tls://"):
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
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a worker left behind
        self.process.wait()
        self._log.close()


def _client(config: ExecutorConfig, distributed: Any) -> tuple[Any, Any]:
    """A client of the scheduler at ``config.address`` or of a LocalCluster started for the
    sweep; TLS with mutual certificates either way, results as msgpack only."""
    check_executor(config)
    timeout = f"{config.connect_timeout}s"
    if config.address:
        try:
            return distributed.Client(config.address, security=security_for(config),
                                      timeout=timeout, deserializers=_RESULTS_AS), None
        except (OSError, TimeoutError, ValueError) as err:
            # ValueError: the peer spoke before the TLS handshake (tornado: "IOStream is not
            # idle; cannot convert to SSL"), i.e. it is not a TLS scheduler
            raise ConfigError("--address", config.address, f"cannot reach a Dask scheduler "
                              f"there over TLS ({type(err).__name__}: {err})",
                              "start one with `dask scheduler --tls-...` and give its address"
                              ) from None
    from distributed.security import Security

    security = Security.temporary()
    cluster = _ClusterProcess(config.workers, security, dashboard=config.dashboard)
    if cluster.dashboard:
        print(f"dashboard: {cluster.dashboard}", file=sys.stderr, flush=True)
    try:
        return distributed.Client(cluster.address, security=security, timeout="60s",
                                  deserializers=_RESULTS_AS), cluster
    except BaseException:
        cluster.close()
        raise


def run_on_dask(specs: Sequence[RunSpec], config: ExecutorConfig, *, argv: list[str],
                finish: Finish | None = None, on_done: Any = None
                ) -> tuple[list[RunOutcome], int]:
    """Run the planned runs as tasks on a Dask cluster (see the module docstring)."""
    distributed = import_distributed()
    for root, experiment in dict.fromkeys((s.config.output_dir, s.experiment.name)
                                          for s in specs):
        check_output_dir(root, experiment)
    # Dask's INFO lines stay off the console; a result refused as not plain data is logged by
    # Dask as a CRITICAL traceback, and said once, in the run's error, here
    quiet = {"distributed": logging.WARNING, "distributed.protocol.core": logging.CRITICAL + 1}
    levels = {name: logging.getLogger(name).level for name in quiet}
    for name, level in quiet.items():
        logging.getLogger(name).setLevel(max(levels[name], level))
    try:
        return _run(specs, config, distributed, argv=argv, finish=finish, on_done=on_done)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _run(specs: Sequence[RunSpec], config: ExecutorConfig, distributed: Any, *,
         argv: list[str], finish: Finish | None, on_done: Any) -> tuple[list[RunOutcome], int]:
    client, cluster = _client(config, distributed)
    configs = [s.config for s in specs]
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
            on_done(i, len(specs), outcome)

    try:
        with signals_raise():
            pending = distributed.as_completed([submit(i) for i in range(len(specs))])
            for future in pending:
                i = futures.pop(future)
                try:
                    info = future.result()
                except distributed.KilledWorker as err:
                    if i not in retried:
                        retried.add(i)
                        pending.add(submit(i))
                        continue
                    run_dir = write_marked(configs[i], "failed", f"the worker died twice while "
                                           f"running it (retried once): {err}", None)
                    done(i, RunOutcome(run_dir, "failed", 1, "worker died twice"))
                    continue
                except Exception as err:  # the task raised, or sent what is not plain data
                    done(i, _refused(configs[i], f"{type(err).__name__}: {err}", None))
                    continue
                try:
                    run_dir = write_run(configs[i], checked(info)["run_id"], info["files"])
                except Refused as err:
                    done(i, _refused(configs[i], str(err), info.get("worker")
                                     if isinstance(info, dict) else None))
                    continue
                if finish is not None and info["status"] != "interrupted":
                    _finish(finish, run_dir, specs[i])
                done(i, RunOutcome(run_dir, info["status"], info["exit_code"], info["error"],
                                   info["duration_s"] or 0.0))
    except (RunInterrupted, KeyboardInterrupt) as err:
        with signals_deferred():
            code = err.exit_code if isinstance(err, RunInterrupted) else 130
            _interrupt(client, futures, configs, code, done)
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


def _finish(finish: Finish, run_dir: Path, spec: RunSpec) -> None:
    meta = read_record(run_dir / "meta.json", RunMeta, root=run_dir)
    if meta is None:
        return
    call_finish(finish, run_dir, meta, spec.experiment)
    meta.wall_seconds = round((meta.wall_seconds or 0.0) + (meta.finish_s or 0.0), 3)
    atomic_write_json(run_dir / "meta.json", meta, root=run_dir)


def _interrupt(client: Any, futures: dict[Any, int], configs: Sequence[RunConfig], code: int,
               done: Any) -> None:
    """Cancel what has not run; write what was running as interrupted."""
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
            run_dir, got = None, f"what the worker sent was refused ({err})"
        if run_dir is None:
            why = got if isinstance(got, str) else "nothing it had logged could be fetched " \
                                                   "from the worker"
            error += f"; {why}, so nothing but config.toml and meta.json was kept"
            run_dir = write_marked(configs[i], "interrupted", error, worker)
        done(i, RunOutcome(run_dir, "interrupted", code, error))


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
    ended = utc_now()
    meta.update(status="interrupted", ended=ended.isoformat(),
                error=f"{error}; kept what the worker had logged")
    with contextlib.suppress(TypeError, ValueError):  # how long it ran, as a local run says
        meta["duration_s"] = round(max(0.0, (ended - datetime.fromisoformat(
            meta["started"])).total_seconds()), 3)
    got["files"]["meta.json"] = json_text(meta).encode("utf-8")
    return write_run(config, got["run_id"], got["files"])
