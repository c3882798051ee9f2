"""Sweeps run only for whom they belong to: TLS to a remote scheduler, plain TCP on loopback only,
what workers send checked as data, and a wrong address failing fast. Real Dask, no mocks."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

from toolkit.lab.cli import main
from toolkit.lab.runner import RunResults, plan
from toolkit.lab.runner.config import ExecutorSpec
from toolkit.lab.runner.dask_connect import is_loopback, parse_address, probe
from toolkit.lab.runner.errors import ConfigError
from toolkit.lab.runner.sweep import run_configs
from toolkit.lab.runner.tomlio import loads

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
    spec = ExecutorSpec(kind="dask", address=tls_cluster)
    with dask.config.set({"distributed.comm.tls.ca-file": str(certs["ca"]),
                          "distributed.comm.tls.client.cert": str(certs["cert"]),
                          "distributed.comm.tls.client.key": str(certs["key"])}):
        (outcome,), status = run_configs(configs, executor=spec)
    assert status == 0 and outcome.status == "complete"


def test_a_client_without_the_clusters_certificates_cannot_submit(tls_cluster: str, certs,
                                                                  tiny_config: Path,
                                                                  tmp_path: Path,
                                                                  capsys) -> None:
    # Dask's own client: no certificates, or plain TCP to the TLS port
    with pytest.raises(TypeError, match="TLS expects a `ssl_context`"):
        distributed.Client(tls_cluster, timeout="5s")
    with pytest.raises(OSError):
        distributed.Client(tls_cluster.replace("tls://", "tcp://"), timeout="5s")
    out = tmp_path / "r"
    common = ["run", str(tiny_config), "--out", str(out), "--executor", "dask", "--address"]
    # the toolkit: another cluster's certificates, then none at all
    assert main([*common, tls_cluster, *_tls_options(certs, "other_")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--address: {tls_cluster}: the TLS handshake failed" in line
    assert "--tls-ca-file, --tls-cert and --tls-key" in line
    assert main([*common, tls_cluster]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "needs the cluster's CA certificate" in line and "distributed.comm.tls.ca-file" in line
    assert not list(out.rglob("meta.json"))


def test_plain_tcp_to_another_host_is_refused_before_any_run(tiny_config: Path, tmp_path: Path,
                                                             capsys) -> None:
    out = tmp_path / "r"
    assert main(["run", str(tiny_config), "--out", str(out), "--executor", "dask",
                 "--address", "tcp://10.0.0.5:8786"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("toolkit: error: --address: tcp://10.0.0.5:8786: plain TCP")
    assert "tls://HOST:PORT with --tls-ca-file, --tls-cert and --tls-key" in line
    assert "--insecure" in line
    assert not out.exists()


@pytest.mark.parametrize(("address", "loopback"), [
    ("tcp://127.0.0.1:8786", True), ("127.0.0.5:8786", True), ("tcp://[::1]:8786", True),
    ("tcp://localhost:8786", True), ("tcp://10.0.0.5:8786", False),
    ("tcp://0.0.0.0:8786", False), ("tcp://[::ffff:10.0.0.5]:8786", False),
    ("tls://example.invalid:8786", False),
])
def test_loopback_is_told_by_the_address(address: str, loopback: bool) -> None:
    assert parse_address(address).loopback is loopback


@pytest.mark.parametrize(("address", "match"), [
    ("udp://127.0.0.1:8786", "the scheme udp:// is not supported"),
    ("tcp://127.0.0.1", "is not of the form SCHEME://HOST:PORT"),
    ("tls://host:70000", "is not of the form SCHEME://HOST:PORT"),
])
def test_a_malformed_address_is_an_input_error(address: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_address(address)


def _own_address() -> str | None:
    """A non-loopback IPv4 address of this machine, if it has one."""
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not is_loopback(a.address):
                return a.address
    return None


def test_insecure_accepts_plain_tcp_to_another_host_with_one_warning(
        tiny_config: Path, tmp_path: Path, capsys) -> None:
    host = _own_address()
    if host is None:
        pytest.skip("this machine has no address but loopback")
    # a worker thread in this process: what is tested is the client's side
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp://", host=host, dashboard_address=f"{host}:0",
                                  silence_logs=50) as cluster:
        args = ["run", str(tiny_config), "--out", str(tmp_path), "--no-report", "--quiet",
                "--executor", "dask", "--address", cluster.scheduler_address]
        assert main(args) == 2
        assert "plain TCP to a host that is not this machine" in capsys.readouterr().err
        assert main([*args, "--insecure"]) == 0
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"toolkit: warning: {cluster.scheduler_address} is plain TCP "
                           f"(--insecure): anyone who can reach it can run code")
    assert [RunResults(d).status for d in (tmp_path / "tiny_counter").iterdir()] == ["complete"]


def _escape(config: Path, tls_cluster: str, certs) -> tuple[object, Path]:
    out = config.parent / "results"
    configs = plan(config, output_dir=out)
    spec = ExecutorSpec(kind="dask", address=tls_cluster, tls_ca_file=str(certs["ca"]),
                        tls_cert=str(certs["cert"]), tls_key=str(certs["key"]))
    (outcome,), status = run_configs(configs, executor=spec)
    assert status == 1 and outcome.status == "failed"
    return outcome, out


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.mark.parametrize(("how", "path", "refused"), [
    ("dotdot", "../../../escaped.txt", "leads outside the run's folder"),
    ("dotdot", "artifacts/../../escaped.txt", "leads outside the run's folder"),
    ("absolute", "{tmp}/escaped.txt", "is not relative to the run's folder"),
    ("symlink", "{tmp}/secret.txt", "leak.json is a symbolic link"),
    ("pickle", "{tmp}/unpickled.txt", "objects.npz: x.npy holds Python objects (a pickle)"),
    ("object", "{tmp}/unpickled.txt", "only able to deserialize data with ['msgpack']"),
])
def test_what_a_worker_sends_outside_its_run_folder_is_refused(
        how: str, path: str, refused: str, tls_cluster: str, certs, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("not to be copied")
    config = tmp_path / "escape.toml"
    config.write_text(f'experiment = "escapes"\nseed = 0\ndevice = "cpu"\n[params]\n'
                      f'how = "{how}"\npath = {json.dumps(path.format(tmp=tmp_path))}\n')
    before = _files(tmp_path)
    outcome, out = _escape(config, tls_cluster, certs)
    assert refused in outcome.error
    run = RunResults(outcome.run_dir)
    assert run.status == "failed" and refused in run.meta["error"]
    assert outcome.run_dir.parent == out / "escapes"
    # only the failed run's config and meta were written, all inside the results folder
    new = _files(tmp_path) - before
    assert {p.relative_to(outcome.run_dir).as_posix() for p in new} == {"config.toml",
                                                                       "meta.json"}
    assert not any(p.name.startswith(".") for p in (out / "escapes").iterdir())  # no staging


def _serve(handler) -> tuple[str, threading.Thread, socket.socket]:
    """A TCP server on 127.0.0.1 that hands each connection to ``handler``, in a thread."""
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return f"tcp://127.0.0.1:{listener.getsockname()[1]}", thread, listener


def _garbage(conn: socket.socket) -> None:
    with conn:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")
        time.sleep(5)


def _closes(conn: socket.socket) -> None:
    conn.close()


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("kind", "says"), [
    ("garbage", "it sent b'SSH-2.0-', which is not Dask's handshake"),
    ("closes", "the connection was closed before Dask's handshake"),
    ("http", "no Dask handshake within 1 s"),
    ("nothing", "cannot connect"),
])
def test_probe_tells_what_answered_instead_of_dask(kind: str, says: str,
                                                   request: pytest.FixtureRequest) -> None:
    if kind == "http":
        address = request.getfixturevalue("http_server")
    elif kind == "nothing":
        with socket.create_server(("127.0.0.1", 0)) as s:  # a port nothing listens on now
            address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    else:
        address, _, listener = _serve(_garbage if kind == "garbage" else _closes)
    t0 = time.monotonic()
    try:
        with pytest.raises(ConfigError, match="nothing Dask answered there") as err:
            probe(address, None, timeout=1.0)
    finally:
        if kind in ("garbage", "closes"):
            listener.close()
    assert says in str(err.value)
    assert time.monotonic() - t0 < 1.0 + 2.0  # the connect timeout, and a loaded machine's slack


def test_an_http_server_or_a_garbage_port_fails_fast_with_one_line(
        http_server: str, tiny_config: Path, tmp_path: Path, capsys) -> None:
    garbage, _, listener = _serve(_garbage)
    try:
        for address in (http_server, garbage):
            tiny_config.write_text((FIXTURES / "tiny.toml").read_text() + f'[executor]\n'
                                   f'kind = "dask"\naddress = "{address}"\n'
                                   f'connect_timeout = 2\n')
            t0 = time.monotonic()
            assert main(["run", str(tiny_config), "--out", str(tmp_path)]) == 2
            elapsed = time.monotonic() - t0
            line = _one_line(capsys.readouterr().err)
            assert line.startswith(f"toolkit: error: --address: {address}: nothing Dask "
                                   f"answered there")
            # before: the HTTP server made the sweep hang (> 60 s), the other asked for 3 EiB
            assert elapsed < 2 + 10  # the timeout, plus loading the config and experiment
    finally:
        listener.close()
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


def _greets(port: int) -> bool:
    """Whether the listener sends first, as a Dask comm does (an HTTP server waits)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(0.5)
        try:
            return bool(sock.recv(8))
        except TimeoutError:
            return False


def _http_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("dashboard", [False, True])
def test_the_local_cluster_listens_on_loopback_only(dashboard: bool, tmp_path: Path) -> None:
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
        http_ports = [port for _, port in sockets if not _greets(port)]
        assert http_ports  # the scheduler's and the worker's
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
    assert ("dashboard" in link) is dashboard and "dashboard" not in err
