"""Sweeps run only for whom they belong to. Every cluster speaks TLS with mutual certificates:
the LocalCluster a sweep starts, with certificates made for it alone, and a scheduler at an
address, tls:// only. Plain tcp:// is refused everywhere, loopback included, before anything is
sent; nothing is read from a peer that has not shown a certificate of the cluster's CA; what
a task returns is read as msgpack only. Real Dask, no mocks."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tomllib import loads

import pytest
from pydantic import ValidationError
from runner_testutil import FIXTURES, REPO

from toolkit.lab import RunResults
from toolkit.lab.cli import main
from toolkit.lab.execute.local import run_all
from toolkit.lab.plan.config import plan
from toolkit.lab.results.schema import ExecutorConfig

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")  # Security.temporary() makes its certificates with it
pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """PEM files of the cluster's own certificates, and of another cluster's."""
    from distributed.security import Security

    folder = tmp_path_factory.mktemp("certs")
    files = {}
    for who, sec in (("", Security.temporary()), ("other_", Security.temporary())):
        for name, pem in (("ca", sec.tls_ca_file), ("cert", sec.tls_client_cert),
                          ("key", sec.tls_client_key)):
            files[who + name] = folder / f"{who}{name}.pem"
            files[who + name].write_text(pem)
    return files


@pytest.fixture(scope="module")
def tls_cluster(certs: dict[str, Path]) -> Iterator[str]:
    """A scheduler and one worker process that speak TLS only, with the certificates of
    ``certs``; yields the scheduler's tls:// address."""
    from distributed.security import Security

    security = Security(require_encryption=True, tls_ca_file=str(certs["ca"]),
                        **{f"tls_{role}_{part}": str(certs[part])
                           for role in ("client", "scheduler", "worker")
                           for part in ("cert", "key")})
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  protocol="tls://", host="127.0.0.1", security=security,
                                  dashboard_address="127.0.0.1:0", silence_logs=50) as cluster:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        yield cluster.scheduler_address


def _tls_options(certs: dict[str, Path], who: str = "") -> list[str]:
    return ["--tls-ca-file", str(certs["ca"]), "--tls-cert", str(certs[f"{who}cert"]),
            "--tls-key", str(certs[f"{who}key"])]


def _security(certs: dict[str, Path], who: str = "") -> object:
    """A client's :class:`~distributed.security.Security` from the PEM files of ``certs``."""
    from distributed.security import Security

    return Security(require_encryption=True, tls_ca_file=str(certs[f"{who}ca"]),
                    tls_client_cert=str(certs[f"{who}cert"]),
                    tls_client_key=str(certs[f"{who}key"]))


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _run_files(root: Path) -> dict[tuple[int, str], bytes]:
    """Every file of every run below ``root`` by (seed, path); meta.json (times, host, worker)
    left out, config.toml without output_dir (the folder the runs were written to)."""
    files = {}
    for meta in (root / "tiny_counter").glob("*/meta.json"):  # not the seed group's folder
        run_dir = meta.parent
        seed = RunResults(run_dir).meta["seed"]
        for path in run_dir.rglob("*"):
            rel = path.relative_to(run_dir).as_posix()
            if path.is_file() and rel != "meta.json":
                data = path.read_bytes()
                if rel == "config.toml":
                    config = loads(data.decode())
                    assert config.pop("output_dir") == str(root)
                    data = json.dumps(config, sort_keys=True).encode()
                files[seed, rel] = data
    return files


def test_a_sweep_over_tls_equals_the_local_run_byte_for_byte(tls_cluster: str, certs,
                                                             tiny_config: Path, tmp_path: Path,
                                                             capsys) -> None:
    common = ["run", str(tiny_config), "--seeds", "0,1", "--no-report", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--out", str(tmp_path / "tls"), "--executor", "dask", "--address",
                 tls_cluster, *_tls_options(certs)]) == 0
    local, remote = _run_files(tmp_path / "local"), _run_files(tmp_path / "tls")
    assert {seed for seed, _ in local} == {0, 1}
    assert {rel for _, rel in local} >= {"config.toml", "summary.json", "metrics.jsonl",
                                         "findings.json", "artifacts/curve.npz"}
    assert remote == local
    for meta in (tmp_path / "tls" / "tiny_counter").glob("*/meta.json"):
        assert RunResults(meta.parent).meta["executor"]["worker"].startswith("tls://")
    assert capsys.readouterr().err == ""


def test_dasks_own_configuration_carries_the_certificates(tls_cluster: str, certs,
                                                          tiny_config: Path,
                                                          tmp_path: Path) -> None:
    import dask

    configs = plan(tiny_config, output_dir=tmp_path)
    spec = ExecutorConfig(kind="dask", address=tls_cluster)
    with dask.config.set({"distributed.comm.tls.ca-file": str(certs["ca"]),
                          "distributed.comm.tls.client.cert": str(certs["cert"]),
                          "distributed.comm.tls.client.key": str(certs["key"])}):
        (outcome,), status = run_all(configs, executor=spec)
    assert status == 0 and outcome.status == "complete"


def test_a_client_without_the_clusters_certificates_cannot_attach(tls_cluster: str, certs,
                                                                  tiny_config: Path,
                                                                  tmp_path: Path,
                                                                  capsys) -> None:
    # Dask's own client: no certificates, plain TCP to the TLS port, another CA's certificates
    with pytest.raises(TypeError, match="TLS expects a `ssl_context`"):
        distributed.Client(tls_cluster, timeout="5s")
    # AssertionError: under load distributed's own loop thread gives up starting the refused
    # client (utils.LoopRunner waits 10 s for it, then "assert loop is not None"); refused
    # either way
    with pytest.raises((OSError, AssertionError)):
        distributed.Client(tls_cluster.replace("tls://", "tcp://"), timeout="5s")
    with pytest.raises((OSError, TimeoutError, AssertionError)):
        distributed.Client(tls_cluster, security=_security(certs, "other_"), timeout="5s")
    out = tmp_path / "r"
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 3\n")
    common = ["run", str(tiny_config), "--out", str(out), "--executor", "dask", "--address"]
    # the toolkit: another cluster's certificates, then none at all
    assert main([*common, tls_cluster, *_tls_options(certs, "other_")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {tls_cluster}: cannot reach a Dask scheduler there over TLS" in line
    assert main([*common, tls_cluster]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "needs the cluster's CA certificate" in line and "distributed.comm.tls.ca-file" in line
    assert not list(out.rglob("meta.json"))


class _Planted:
    """Unpickling it creates ``path``: the proof that a peer's pickle was loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return Path.touch, (self.path,)


@contextlib.contextmanager
def _fake_scheduler(marker: Path, protocol: str = "tcp://", security: object = None,
                    wrap: object = None) -> Iterator[tuple[str, list[str]]]:
    """A Dask comm listener on 127.0.0.1 that sends whoever connects a message carrying a
    pickle (:class:`_Planted`, serialized with pickle, or wrapped in ``wrap``: distributed's
    ``ToPickle``); yields its address and the list of peers it has seen."""
    from distributed.comm import listen
    from distributed.protocol import to_serialize

    seen: list[str] = []
    box: queue.Queue = queue.Queue()

    async def handler(comm) -> None:
        seen.append(comm.peer_address)
        with contextlib.suppress(Exception):
            planted = _Planted(marker)
            await comm.write({"op": "planted", "x": wrap(planted) if wrap is not None
                              else to_serialize(planted)}, serializers=["pickle"])
            await comm.read()

    async def serve() -> None:
        kwargs = security.get_listen_args("scheduler") if security is not None else {}
        listener = listen(f"{protocol}127.0.0.1:0", handler, deserialize=False, **kwargs)
        await listener.start()
        stop = asyncio.Event()
        box.put((listener.contact_address, asyncio.get_running_loop(), stop))
        await stop.wait()
        listener.stop()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    address, loop, stop = box.get(timeout=30)
    try:
        yield address, seen
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def _read_from(address: str, **connection_args: object) -> object:
    from distributed.comm import connect

    async def read() -> object:
        comm = await connect(address, timeout=5, **connection_args)
        try:
            return await comm.read()
        finally:
            comm.abort()

    return asyncio.run(read())


def test_the_fake_schedulers_pickle_is_loaded_by_whoever_trusts_it(tmp_path: Path) -> None:
    """The trap of the tests below works: a client that trusts the fake loads its pickle."""
    marker = tmp_path / "unpickled"
    with _fake_scheduler(marker) as (address, seen):
        _read_from(address)
    assert marker.exists() and len(seen) == 1


@pytest.mark.parametrize("address", [
    "tcp://127.0.0.1:{port}", "127.0.0.1:{port}", "tcp://localhost:{port}",
    "tcp://[::1]:8786", "tcp://10.0.0.5:8786", "tcp://0.0.0.0:8786", "inproc://x/1/2",
])
def test_plain_tcp_is_refused_everywhere_before_any_connection(
        address: str, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """A fake scheduler bound on loopback (an attacker on this machine) is never even
    connected to: its pickle is not loaded, and nothing runs or is written."""
    marker, out = tmp_path / "unpickled", tmp_path / "r"
    with _fake_scheduler(marker) as (fake, seen):
        address = address.format(port=fake.rsplit(":", 1)[1])
        assert main(["run", str(tiny_config), "--out", str(out), "--executor", "dask",
                     "--address", address]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith("toolkit: error: --address: ") and "over TLS only" in line
        assert "give tls://HOST:PORT" in line
        # the same from the config's [executor] table, and from Python
        tiny_config.write_text(tiny_config.read_text() + f'[executor]\nkind = "dask"\n'
                               f'address = "{address}"\n')
        assert main(["run", str(tiny_config), "--out", str(out)]) == 2
        assert "executor.address: a scheduler is reached over TLS only" in \
            _one_line(capsys.readouterr().err)
        with pytest.raises(ValidationError, match="over TLS only"):
            ExecutorConfig(kind="dask", address=address)
        time.sleep(0.2)
    assert seen == [] and not marker.exists() and not out.exists()


def test_there_is_no_insecure_way_around(tiny_config: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(tiny_config), "--out", str(tmp_path / "r"), "--executor", "dask",
              "--address", "tcp://127.0.0.1:8786", "--insecure"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --insecure" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("fake", ["plain", "other_ca"])
def test_nothing_is_read_from_a_scheduler_without_the_clusters_certificate(
        fake: str, certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """At a tls:// address: a fake scheduler speaking plain TCP, or TLS with a certificate of
    another CA. The handshake fails before a message is read: the fake's pickle is not
    loaded (by the toolkit, nor by Dask's own client with the cluster's certificates)."""
    marker, out = tmp_path / "unpickled", tmp_path / "r"
    listen = ("tcp://", None) if fake == "plain" else ("tls://", _other_server(certs))
    with _fake_scheduler(marker, *listen) as (address, _):
        address = "tls://" + address.split("://", 1)[1]
        tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 3\n")
        assert main(["run", str(tiny_config), "--out", str(out), "--executor", "dask",
                     "--address", address, *_tls_options(certs)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
        # ValueError: tornado's "IOStream is not idle; cannot convert to SSL" (a plain peer)
        with pytest.raises((OSError, TimeoutError, ValueError)):
            _read_from(address, **_security(certs).get_connection_args("client"))
    assert not marker.exists() and not list(out.rglob("meta.json"))


def _other_server(certs: dict[str, Path]) -> object:
    """A scheduler's Security with another CA's certificate (a self-made, untrusted one)."""
    from distributed.security import Security

    return Security(require_encryption=True, tls_ca_file=str(certs["other_ca"]),
                    tls_scheduler_cert=str(certs["other_cert"]),
                    tls_scheduler_key=str(certs["other_key"]))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_http_server_at_the_address_fails_fast_with_one_line(
        http_server: int, certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    address = f"tls://127.0.0.1:{http_server}"
    tiny_config.write_text((FIXTURES / "tiny.toml").read_text() + f'[executor]\n'
                           f'kind = "dask"\naddress = "{address}"\nconnect_timeout = 2\n')
    t0 = time.monotonic()
    assert main(["run", str(tiny_config), "--out", str(tmp_path), *_tls_options(certs)]) == 2
    elapsed = time.monotonic() - t0
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"toolkit: error: --address: {address}: cannot reach a Dask "
                           f"scheduler there over TLS")
    assert elapsed < 2 + 10  # the timeout, plus loading the config and experiment
    assert not list(tmp_path.rglob("meta.json"))


def _listening(pid: int) -> list[tuple[str, int]]:
    """The (address, port) of every socket that process ``pid`` and its descendants listen on."""
    import psutil

    root = psutil.Process(pid)
    found = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            found += [c.laddr for c in proc.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN]
        except psutil.NoSuchProcess:
            pass
    return found


def _http_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def _is_http(port: int) -> bool:
    """Whether an HTTP server answers there (a TLS listener drops a plain request)."""
    try:
        _http_status(port, "/")
    except (OSError, http.client.HTTPException):
        return False
    return True


def _attach_fails(address: str, certs: dict[str, Path]) -> None:
    """Plain TCP, TLS without a certificate, and TLS with another CA's: none gets a message."""
    import ssl

    from distributed.comm import connect

    async def attempt(**connection_args: object) -> None:
        comm = await connect(address, timeout=3, **connection_args)
        try:
            await asyncio.wait_for(comm.read(), 3)
        finally:
            comm.abort()

    plain = "tcp://" + address.split("://", 1)[1]
    with pytest.raises((OSError, TimeoutError)):
        asyncio.run(connect(plain, timeout=3))
    no_cert = ssl.create_default_context()
    no_cert.check_hostname, no_cert.verify_mode = False, ssl.CERT_NONE
    with pytest.raises((OSError, TimeoutError, ssl.SSLError)):
        asyncio.run(attempt(ssl_context=no_cert))
    with pytest.raises((OSError, TimeoutError, ssl.SSLError)):
        asyncio.run(attempt(**_security(certs, "other_").get_connection_args("client")))


@pytest.mark.parametrize("dashboard", [False, True])
def test_the_local_cluster_is_tls_on_loopback_only(dashboard: bool, certs,
                                                   tmp_path: Path) -> None:
    """The LocalCluster a sweep starts: every socket on 127.0.0.1; every Dask listener
    (scheduler, worker, nanny) speaks TLS and wants a certificate of the sweep's own CA, so
    another process of this machine cannot attach; its HTTP servers serve nothing unless the
    dashboard is asked for."""
    started = tmp_path / "started"
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "run", str(FIXTURES / "tiny.toml"), "--out",
         str(tmp_path / "r"), "--executor", "dask", "--workers", "1", "--no-report",
         "--quiet", *(["--dashboard"] if dashboard else []),
         "--set", "params.n_logged=100000", "--set", "params.sleep_s=0.01",
         "--set", f"params.started_file={json.dumps(str(started))}"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        link = proc.stderr.readline().strip() if dashboard else ""
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        sockets = _listening(proc.pid)
        # the scheduler, the worker and its nanny, and the HTTP servers Dask always starts
        assert len(sockets) >= 3
        assert all(ip == "127.0.0.1" for ip, _ in sockets), sockets
        http_ports = [port for _, port in sockets if _is_http(port)]
        dask_ports = [port for _, port in sockets if port not in http_ports]
        assert http_ports and len(dask_ports) >= 2  # the scheduler's, the worker's (nanny's)
        for port in dask_ports:
            _attach_fails(f"tls://127.0.0.1:{port}", certs)
        if dashboard:
            assert link.startswith("dashboard: http://127.0.0.1:") and "/status" in link
            port = int(link.split("http://127.0.0.1:")[1].split("/")[0])
            assert port in http_ports and _http_status(port, "/status") == 200
        else:  # Dask's HTTP servers serve nothing: no dashboard, no worker or task pages
            for port in http_ports:
                assert {_http_status(port, p) for p in ("/status", "/health", "/json/"
                                                         "counts.json")} == {404}
        proc.send_signal(signal.SIGINT)  # the run goes on until the sockets are read: stop it
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    # the summary's command to finish repeats --dashboard; no link is printed there
    assert ("dashboard" in link) is dashboard and "dashboard: http" not in err
    # the run still ran there: nothing an attaching process did reached it
    assert [RunResults(d).status for d in (tmp_path / "r" / "tiny_counter").iterdir()
            if (d / "meta.json").exists()] == ["interrupted"]


# ---- a peer that holds a certificate of the cluster's CA (issue 73) ------------------------
#
# Such a peer passes the TLS handshake. What the toolkit promises about it: before the client
# is started, the peer's first message is read with the connect timeout, its size checked
# before anything is allocated for it, and it is decoded as plain msgpack (no object hooks):
# a peer that is silent, that answers as another service, or that puts a pickle in its
# handshake is refused in one line. Beyond that the scheduler is trusted: distributed's
# client unpickles what a scheduler sends (the module docstring and the guide say so).


@contextlib.contextmanager
def _tls_peer(certs: dict[str, Path], answer: bytes | None, then: bytes | None = b""
              ) -> Iterator[str]:
    """A TLS server on 127.0.0.1 holding the cluster's own certificate (its CA's), wanting
    the client's; once the handshake is done it reads, then sends ``answer`` and stays open,
    or (``None``) says nothing at all. From the second connection on it answers ``then``
    instead (``b""``: the same as the first). Yields its tls:// address."""
    import socket
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    context.load_verify_locations(certs["ca"])
    context.verify_mode = ssl.CERT_REQUIRED
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop, held = threading.Event(), []

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                raw.settimeout(5)
                peer = context.wrap_socket(raw, server_side=True)
                reply = answer if not held or then == b"" else then
                held.append(peer)
                if reply is not None:
                    with contextlib.suppress(OSError):
                        peer.recv(4096)
                    peer.sendall(reply)
            except OSError:
                raw.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tls://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(10)
        server.close()
        for peer in held:
            peer.close()


def _run_within(seconds: float, argv: list[str]) -> tuple[int | None, float]:
    """``main(argv)`` in a thread: its exit status and duration, or ``None`` when it was still
    waiting after ``seconds`` (the thread is left behind, a daemon)."""
    box: list[int] = []
    thread = threading.Thread(target=lambda: box.append(main(argv)), daemon=True)
    t0 = time.monotonic()
    thread.start()
    thread.join(seconds)
    return (box[0] if box else None), time.monotonic() - t0


def test_a_silent_peer_after_the_tls_handshake_ends_within_the_connect_timeout(
        certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """It holds a certificate of the cluster's CA, finishes the TLS handshake, then never
    speaks: the 3 s connect timeout ends the wait (well under 60 s), one line, nothing run."""
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 3\n")
    out = tmp_path / "r"
    with _tls_peer(certs, None) as address:
        status, elapsed = _run_within(60, ["run", str(tiny_config), "--out", str(out),
                                           "--executor", "dask", "--address", address,
                                           *_tls_options(certs)])
    assert status == 2, f"still waiting after {elapsed:.0f} s" if status is None else status
    assert elapsed < 3 + 20
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
    assert "no Dask handshake within 3 s" in line
    assert not list(out.rglob("meta.json"))


def test_a_peer_that_greets_then_stalls_the_client_ends_within_the_timeouts(
        certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """It answers the first connection with a Dask handshake, then falls silent on the
    client's own connection (distributed reads that handshake without a timeout): the wait
    ends within three connect timeouts of 3 s (well under 60 s), in one line."""
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 3\n")
    out = tmp_path / "r"
    handshake = _wire({"compression": None, "python": (3, 11, 0), "pickle-protocol": 5})
    with _tls_peer(certs, handshake, then=None) as address:
        status, elapsed = _run_within(60, ["run", str(tiny_config), "--out", str(out),
                                           "--executor", "dask", "--address", address,
                                           *_tls_options(certs)])
    assert status == 2, f"still waiting after {elapsed:.0f} s" if status is None else status
    assert elapsed < 3 * 3 + 20
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
    assert "did not finish connecting the client within 9 s" in line
    assert not list(out.rglob("meta.json"))


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",  # an HTTPS server of your CA
    b"\xff" * 8 + b"garbage",
])
def test_a_huge_first_frame_is_refused_before_it_is_allocated(
        answer: bytes, certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """The first 8 bytes a Dask peer sends are its message's length: an HTTPS server's
    "HTTP/1.1" reads as 3.07 EiB. The size is checked against a bound before anything is
    allocated: one line naming it, exit status 2, no MemoryError."""
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 5\n")
    out = tmp_path / "r"
    with _tls_peer(certs, answer) as address:
        status, _ = _run_within(60, ["run", str(tiny_config), "--out", str(out), "--executor",
                                     "dask", "--address", address, *_tls_options(certs)])
    assert status == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
    assert "its first message declares" in line and "EiB" in line and "at most" in line
    assert "MemoryError" not in line and not list(out.rglob("meta.json"))


def _wire(message: dict) -> bytes:
    """``message`` as a Dask peer sends it: an 8-byte length, then the packed frames."""
    import struct

    from distributed.protocol import dumps
    from distributed.protocol.utils import pack_frames

    packed = pack_frames(dumps(message))
    return struct.pack("Q", len(packed)) + packed


def test_a_pickle_in_the_handshake_of_a_peer_of_your_ca_is_not_loaded(
        certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """A peer with a certificate of the cluster's CA greets with a handshake carrying a
    pickle (a ``ToPickle`` part, which distributed loads whatever the deserializers): it is
    read as plain msgpack and refused in one line; the pickle is never loaded."""
    from distributed.protocol import ToPickle

    marker, out = tmp_path / "unpickled", tmp_path / "r"
    handshake = {"compression": None, "python": (3, 11, 0), "pickle-protocol": 5,
                 "x": ToPickle(_Planted(marker))}
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 5\n")
    with _tls_peer(certs, _wire(handshake)) as address:
        status, _ = _run_within(60, ["run", str(tiny_config), "--out", str(out), "--executor",
                                     "dask", "--address", address, *_tls_options(certs)])
    assert not marker.exists()
    assert status == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
    assert "it sent a pickle in its handshake: not loaded" in line
    assert not list(out.rglob("meta.json"))


def test_past_the_handshake_a_scheduler_of_your_ca_is_trusted_with_code(
        certs, tiny_config: Path, tmp_path: Path, capsys) -> None:
    """What the docs state, shown: a fake scheduler of the cluster's CA that answers the
    handshake as Dask does and then sends a ``ToPickle`` gets it loaded by distributed's
    client (no setting refuses it). The sweep still ends, in one line, with nothing run."""
    from distributed.protocol import ToPickle

    marker, out = tmp_path / "unpickled", tmp_path / "r"
    ours = _own_server(certs)
    tiny_config.write_text(tiny_config.read_text() + "[executor]\nconnect_timeout = 5\n")
    with _fake_scheduler(marker, "tls://", ours, ToPickle) as (address, seen):
        status, _ = _run_within(60, ["run", str(tiny_config), "--out", str(out), "--executor",
                                     "dask", "--address", address, *_tls_options(certs)])
    assert seen and marker.exists()  # the trust the docs ask for is real
    assert status == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {address}: cannot reach a Dask scheduler there over TLS" in line
    assert not list(out.rglob("meta.json"))


def _own_server(certs: dict[str, Path]) -> object:
    """A scheduler's Security with the cluster's own certificate (one of its CA's)."""
    from distributed.security import Security

    return Security(require_encryption=True, tls_ca_file=str(certs["ca"]),
                    tls_scheduler_cert=str(certs["cert"]), tls_scheduler_key=str(certs["key"]))


def test_the_trust_in_a_scheduler_is_stated_where_the_executor_is_described() -> None:
    """Past its handshake, a scheduler holding a certificate of your CA can run code in this
    process (distributed's client unpickles what it sends): the docstring and the guide say
    so in the same words."""
    from toolkit.lab.execute import dask as executor

    sentence = ("a scheduler you connect to can run code in this process: connect only to "
                "schedulers you trust")
    guide = " ".join((REPO / "docs" / "guides" / "experiments.md").read_text().split())
    assert sentence in " ".join(executor.__doc__.split())
    assert sentence in guide
    assert "never unpickled" not in guide and "never a pickle" not in executor.__doc__
