"""Runs on a Dask cluster, every connection over TLS with mutual certificates: a
``LocalCluster`` with ``Security.temporary()``, or a scheduler's ``tls://`` address. Each run
is one task of ``client.map``, written into ``output_dir`` (a remote cluster shares it); its
outcome is read as msgpack. Ctrl-C cancels the runs not started and closes a local cluster;
the runs it ended are written ``interrupted``. A run leaves one folder however often its
worker dies: a retry removes the dead attempt's folder and names its worker (``died_on`` in
``meta.json``'s executor), a run given up is written ``failed`` naming the workers it died
on, and a run that ended is not run again when Dask recomputes a result lost with a worker.

Trust: a scheduler you connect to can run code in this process: connect only to schedulers
you trust. Holding a certificate of your CA is what makes a peer a scheduler of yours, and
distributed's client unpickles what its scheduler sends (``__Pickled__`` parts of every
message, the handshake included, whatever the client's ``deserializers``, and reads frames
of any size it declares); no setting of distributed turns that off. Before the client starts, the peer's first message is read here
with the connect timeout, its size checked before anything is allocated for it
(:data:`MAX_HANDSHAKE_BYTES`) and decoded as plain msgpack: a peer of your CA that is silent
after the TLS handshake, answers as another service (an HTTPS server's reply reads as a
3.07 EiB frame) or sends a pickle in its handshake is refused in one line, exit status 2.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import signal
import struct
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import byte_size, fmt
from toolkit._utils.lazy import install_line
from toolkit.lab.errors import ConfigError, RunInterrupted
from toolkit.lab.execute.run import Finish, RunOutcome, execute
from toolkit.lab.plan.config import RunSpec
from toolkit.lab.results.files import read_record, utc_now
from toolkit.lab.results.records import save_meta
from toolkit.lab.results.schema import ExecutorConfig, RunMeta
from toolkit.lab.results.view import RunResults

__all__ = ["MAX_HANDSHAKE_BYTES", "check_executor", "import_distributed", "run_on_dask"]

_TLS = "--tls-ca-file, --tls-cert and --tls-key"

#: The largest first message read from a scheduler before the client starts (its handshake:
#: a few hundred bytes of msgpack).
MAX_HANDSHAKE_BYTES = 1 << 20


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError("--executor", "dask", "the dask executor needs the packages dask "
                          "and distributed, which are not installed",
                          f"install the optional packages: {install_line('distributed')}") from None
    return distributed


def check_executor(config: ExecutorConfig) -> None:
    """Refuse options that do not apply and TLS files that are not regular files (a FIFO
    would be waited for); touches no network."""
    given = [(flag, value) for flag, value in (
        ("--address", config.address), ("--tls-ca-file", config.tls_ca_file),
        ("--tls-cert", config.tls_cert), ("--tls-key", config.tls_key),
        ("--dashboard", config.dashboard)) if value]
    if config.kind != "dask" and given:
        raise ConfigError(given[0][0], "", "is only used by the dask executor",
                          "add --executor dask")
    if config.kind != "dask" or (config.address is None and len(given) <= int(config.dashboard)):
        return
    if config.address is None:
        raise ConfigError(given[0][0], "", "is for a remote scheduler at a tls:// address; the "
                          "local cluster makes certificates of its own",
                          "add --address tls://HOST:PORT, or leave the TLS options out")
    if config.dashboard:
        raise ConfigError("--dashboard", "", "shows the local cluster's dashboard; a remote "
                          "scheduler serves its own", "leave --dashboard out with --address")
    for flag, value in given[1:]:
        path = Path(str(value))
        if not path.is_file():
            kind = ("a folder" if path.is_dir() else "a FIFO" if path.is_fifo() else
                    "/dev/null" if path.resolve() == Path("/dev/null") else "not a regular file")
            problem = f"is {kind}, not a PEM file" if path.exists() else "no such file"
            raise ConfigError(flag, str(value), problem, "give the path of a PEM file")
    if bool(config.tls_ca_file) != bool(config.tls_cert):
        raise ConfigError("--tls-ca-file" if not config.tls_ca_file else "--tls-cert", "",
                          "is needed: mutual TLS takes the cluster's CA and this client's "
                          "certificate", f"give {_TLS} (the key may sit in the certificate file)")
    import dask.config

    if not config.tls_ca_file and not (dask.config.get("distributed.comm.tls.ca-file", None)
                                       and dask.config.get("distributed.comm.tls.client.cert",
                                                           None)):
        raise ConfigError("--address", config.address, "a tls:// scheduler needs the cluster's "
                          "CA certificate and this client's certificate and key",
                          f"give {_TLS}, or set distributed.comm.tls.ca-file and "
                          "distributed.comm.tls.client.cert in dask's configuration")


def _task(spec: RunSpec, task: int, argv: list[str], command: str, finish: Finish | None
          ) -> dict[str, Any]:
    """Run one planned run on a worker; its outcome as plain data. One folder per run,
    however often Dask runs the task: a run that ended already (its result was lost with its
    worker, and Dask computes it again) is not run again, its outcome is read back; an
    earlier attempt whose worker died is removed first and that worker named in
    ``died_on``."""
    from distributed import get_worker

    ended = [(run_dir, meta) for run_dir, meta in _attempts(spec, command, task, abandoned=False)
             if meta.status in ("complete", "failed", "interrupted")]
    if ended:
        run_dir, meta = ended[-1]
        code = {"complete": 0, "failed": 1}.get(meta.status, 128 + (
            signal.Signals[meta.interrupted_by] if meta.interrupted_by else signal.SIGINT))
        return {"run_dir": str(run_dir), "status": meta.status, "exit_code": int(code),
                "error": meta.error, "duration_s": meta.duration_s or 0.0, "exception": None}
    died_on = [worker for attempt in _attempts(spec, command, task, abandoned=True)
               for worker in _forget(attempt)]
    outcome = execute(spec, quiet=True, argv=argv, finish=finish, executor={
        "kind": "dask", "worker": get_worker().address, "command": command, "task": task,
        **({"died_on": died_on} if died_on else {})})
    return {**vars(outcome), "run_dir": str(outcome.run_dir), "exception": None}


def _attempts(spec: RunSpec, command: str, task: int, *, abandoned: bool
              ) -> list[tuple[Path, RunMeta]]:
    """The folders that ``command`` started for its task number ``task``, oldest first; with
    ``abandoned``, only those that say running while nothing holds them (a dead worker's)."""
    parent, found = Path(spec.config.output_dir) / spec.experiment.name, []
    for run_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
        try:
            meta = read_record(run_dir / "meta.json", RunMeta, root=run_dir)
            if meta is None or meta.executor.get("command") != command \
                    or meta.executor.get("task") != task \
                    or (abandoned and RunResults(run_dir).status != "abandoned"):
                continue
        except (OSError, ValueError):
            continue
        found.append((run_dir, meta))
    return sorted(found, key=lambda attempt: attempt[1].started or "")


def _forget(attempt: tuple[Path, RunMeta]) -> list[str]:
    """Remove an abandoned attempt's folder; the workers it died on (its own, and those its
    earlier attempts died on)."""
    run_dir, meta = attempt
    shutil.rmtree(run_dir, ignore_errors=True)
    return [*meta.executor.get("died_on", []), str(meta.executor.get("worker"))]


class _NotAScheduler(ValueError):
    """The peer at the address passed TLS but did not greet as a Dask scheduler."""


def _greeting(address: str, ssl_context: Any, timeout: float) -> None:
    """Read the first message of the peer at ``address`` within ``timeout`` seconds, as a
    Dask scheduler sends it on every connection: an 8-byte length, then frames whose first
    is msgpack. This end greets first, as a Dask client does (a handshake without
    compression), so that a service that waits for a request answers at once. Raise
    :class:`_NotAScheduler`, ``TimeoutError`` or ``OSError`` unless it is a Dask handshake;
    nothing is allocated beyond :data:`MAX_HANDSHAKE_BYTES` and nothing is unpickled."""
    import asyncio
    import pickle

    import msgpack
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.protocol.utils import pack_frames, unpack_frames

    host, port = parse_host_port(parse_address(address)[1])
    hello = pack_frames([msgpack.packb({"compression": None, "python": sys.version_info[:3],
                                        "pickle-protocol": pickle.HIGHEST_PROTOCOL})])

    async def read() -> bytes:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context,
                                                       server_hostname=host)
        try:
            writer.write(struct.pack("Q", len(hello)) + hello)
            await writer.drain()
            (size,) = struct.unpack("Q", await reader.readexactly(8))
            if size > MAX_HANDSHAKE_BYTES:
                raise _NotAScheduler(f"its first message declares {byte_size(size)}, a Dask "
                                     f"handshake takes at most {byte_size(MAX_HANDSHAKE_BYTES)}: "
                                     f"not a Dask scheduler")
            return await reader.readexactly(size)
        finally:
            writer.close()

    async def bounded() -> bytes:
        try:
            return await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no Dask handshake within {fmt(timeout)} s after the TLS "
                               f"handshake") from None

    body = _in_own_loop(bounded)
    try:
        message = msgpack.unpackb(unpack_frames(body)[0], strict_map_key=False)
    except Exception as err:  # any malformed body: struct, msgpack, index errors
        raise _NotAScheduler(f"its first message is not a Dask handshake ({type(err).__name__})"
                             ) from None
    if _holds_pickle(message):
        raise _NotAScheduler("it sent a pickle in its handshake: not loaded")
    if not isinstance(message, dict) or "compression" not in message:
        raise _NotAScheduler("its first message is not a Dask handshake")


def _holds_pickle(message: Any) -> bool:
    """Whether a msgpack-decoded message carries a serialized object (distributed marks them
    ``__Pickled__`` or ``__Serialized__``); a loop, not recursion, however deep it nests."""
    pending = [message]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            if {"__Pickled__", "__Serialized__"} & set(value):
                return True
            pending.extend(value.values())
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
    return False


def _in_own_loop(coroutine_fn: Any) -> Any:
    """``asyncio.run(coroutine_fn())`` in a thread of its own (the caller may be inside a
    running event loop, as in a notebook); its result, or its exception raised here."""
    import asyncio
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coroutine_fn())
        except BaseException as err:  # handed to the caller
            box["error"] = err

    thread = threading.Thread(target=target, name="toolkit-dask-greeting", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def _within(seconds: float, make_client: Any) -> Any:
    """``make_client()`` (a distributed ``Client``) if it returns within ``seconds``, else a
    ``TimeoutError``. distributed bounds the TCP and TLS connect and the scheduler's later
    answers by the client's timeout, each once, but not the handshake read between them: a
    peer that greets the probe and then stalls would hold the caller for ever. The client is
    made in a thread of its own; one that connects after the caller gave up is closed."""
    import threading

    box: dict[str, Any] = {}
    lock = threading.Lock()

    def target() -> None:
        try:
            client = make_client()
        except BaseException as err:  # handed to the caller
            box["error"] = err
            return
        with lock:
            late = "gave_up" in box
            if not late:
                box["client"] = client
        if late:
            client.close()

    thread = threading.Thread(target=target, name="toolkit-dask-client", daemon=True)
    thread.start()
    thread.join(seconds)
    with lock:
        if "client" not in box and "error" not in box:
            box["gave_up"] = True
            raise TimeoutError(f"the scheduler did not finish connecting the client within "
                               f"{fmt(seconds)} s")
    if "error" in box:
        raise box["error"]
    return box["client"]


def _client(config: ExecutorConfig, distributed: Any) -> Any:
    """A client of the scheduler at ``config.address`` or of a LocalCluster of its own."""
    from distributed.security import Security

    check_executor(config)
    if config.address:
        try:
            files = {"tls_ca_file": config.tls_ca_file, "tls_client_cert": config.tls_cert,
                     "tls_client_key": config.tls_key} if config.tls_ca_file else {}
            security = Security(require_encryption=True, **files)
            _greeting(config.address, security.get_connection_args("client")["ssl_context"],
                      config.connect_timeout)
            return _within(3 * config.connect_timeout, lambda: distributed.Client(
                config.address, timeout=f"{config.connect_timeout}s", security=security,
                deserializers=["msgpack"]))
        except (OSError, TimeoutError, ValueError, TypeError, MemoryError,
                AssertionError) as err:
            # ValueError: not a TLS peer; TypeError: a pickle where msgpack was asked for;
            # MemoryError: a frame too large for this machine, sent after the greeting;
            # AssertionError: distributed's client checks the scheduler's answers so
            why = (str(err) if isinstance(err, _NotAScheduler) else
                   f"{type(err).__name__}: {err or 'an answer a scheduler does not give'}")
            raise ConfigError("--address", config.address, f"cannot reach a Dask scheduler "
                              f"there over TLS ({why})",
                              "start one with `dask scheduler --tls-...` and give its address"
                              ) from None
    import dask.config

    security = Security.temporary()
    # one retry; a run is sent to a worker only when it has a free thread, so that a worker's
    # death counts against the run it ran and no other (1.1, Dask's default, sends two)
    settings: dict[str, Any] = {"distributed.scheduler.allowed-failures": 1,
                                "distributed.scheduler.worker-saturation": 1.0}
    if not config.dashboard:  # Dask's HTTP servers then serve no route at all
        settings |= {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(
            n_workers=config.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            protocol="tls://", security=security, silence_logs=logging.CRITICAL,
            dashboard_address="127.0.0.1:0" if config.dashboard else None)
    if config.dashboard:
        print(f"dashboard: {cluster.dashboard_link}", file=sys.stderr, flush=True)
    return distributed.Client(cluster, security=security, deserializers=["msgpack"])


def run_on_dask(specs: Sequence[RunSpec], config: ExecutorConfig, *, argv: list[str],
                finish: Finish | None = None, on_done: Any = None
                ) -> tuple[list[RunOutcome], int]:
    """Run the planned runs as tasks on a Dask cluster (see the module docstring)."""
    distributed = import_distributed()
    command, outcomes, signum = secrets.token_hex(8), list[RunOutcome](), 0  # names its runs

    def ended(i: int, outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        if on_done is not None:
            on_done(i, len(specs), outcome)

    import dask.config

    # distributed's LocalCluster closes a nanny for good when no worker of its name is back
    # ``lost-worker-timeout`` (15 s) after a death; a run that kills every worker it reaches can
    # kill a restarted worker in that window, and with its nannies closed the other runs would
    # wait for ever. The nannies restart their workers themselves; the cluster ends with the runs.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": _KEEP_NANNIES}):
        client = _client(config, distributed)
        cluster = client.cluster
        kwargs = {"argv": argv, "command": command, "finish": finish, "pure": False}
        futures = client.map(_task, specs, range(len(specs)), **kwargs)
        task_of, resent = {f.key: i for i, f in enumerate(futures)}, [0] * len(specs)
        try:
            for future in (done := distributed.as_completed(futures)):
                i = task_of[future.key]
                try:
                    outcome = RunOutcome(**{k: Path(v) if k == "run_dir" else v
                                            for k, v in future.result().items()})
                    future.release()  # read: Dask need not compute it again when a worker dies
                except Exception as err:  # the task raised, or its worker died twice
                    if resent[i] < _RESENT and _died_for_others(err, specs[i], i, command):
                        resent[i] += 1  # given up for deaths its run did not cause: once more
                        futures.append(again := client.submit(_task, specs[i], i, **kwargs))
                        task_of[again.key] = i
                        done.add(again)
                        continue
                    error = f"{type(err).__name__}: {err}"
                    outcome = ([*_abandoned(specs[i:i + 1], [i], command, "failed", error)] or [
                        RunOutcome(Path(specs[i].config.output_dir) / specs[i].experiment.name,
                                   "failed", 1, error)])[-1]
                ended(i, outcome)
        except KeyboardInterrupt as err:  # RunInterrupted too
            client.cancel(futures)
            signum = getattr(err, "signum", signal.SIGINT)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    if not signum:
        return outcomes, max((o.exit_code for o in outcomes), default=0)
    for outcome in _abandoned(specs, range(len(specs)), command, "interrupted",
                              str(RunInterrupted(signum)), signum):
        ended(len(outcomes), outcome)
    return outcomes, 128 + signum


#: How long a local cluster waits before closing a nanny whose worker died: the whole sweep.
_KEEP_NANNIES = "365 days"

#: How often a run given up by Dask for worker deaths it did not cause is sent again.
_RESENT = 2


def _died_for_others(err: Exception, spec: RunSpec, task: int, command: str) -> bool:
    """Whether Dask gave the task up (``KilledWorker``) while its run died less than twice:
    the other deaths were of workers that held it queued, or died before it started."""
    if type(err).__name__ != "KilledWorker":
        return False
    workers = [w for _, meta in _attempts(spec, command, task, abandoned=True)
               for w in [*meta.executor.get("died_on", []), meta.executor.get("worker")]]
    return len(dict.fromkeys(workers)) < 2


def _abandoned(specs: Sequence[RunSpec], tasks: Sequence[int], command: str, status: str,
               error: str, signum: int = 0) -> list[RunOutcome]:
    """The runs of ``specs`` (task numbers ``tasks``) that ``command`` started and nothing
    holds now (their worker died, the cluster was closed), written ``status`` with ``error``
    and the workers they died on; of a task's abandoned attempts the last is kept, the
    others removed."""
    found = []
    for spec, task in zip(specs, tasks):
        *earlier, last = _attempts(spec, command, task, abandoned=True) or [None]
        if last is None:
            continue
        run_dir, meta = last
        workers = [w for attempt in earlier for w in _forget(attempt)]
        workers = [*workers, *meta.executor.get("died_on", []), str(meta.executor.get("worker"))]
        ended, text = utc_now(), f"{error} (on {', then '.join(dict.fromkeys(workers))})"
        seconds = round((ended - datetime.fromisoformat(meta.started)).total_seconds(), 3) \
            if meta.started else None
        save_meta(run_dir / "meta.json", meta.model_copy(update={
            "status": status, "error": text, "ended": ended.isoformat(), "duration_s": seconds,
            "executor": {**meta.executor, "died_on": workers[:-1]} if workers[:-1]
            else meta.executor,
            **({"interrupted_by": signal.Signals(signum).name} if signum else {})}))
        found.append(RunOutcome(run_dir, status, 128 + signum if signum else 1, text,
                                seconds or 0.0))
    return found
