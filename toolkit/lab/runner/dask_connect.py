"""Where a Dask sweep may connect, and a first look at the address before Dask is trusted with it.

A Dask scheduler runs whatever code it is sent, on every worker, and every result crosses the
network. So the toolkit connects:

- to ``tls://HOST:PORT`` with mutual TLS (:class:`distributed.security.Security`): the cluster's
  CA, this client's certificate and its key, given as ``--tls-ca-file``, ``--tls-cert`` and
  ``--tls-key`` (the names ``dask scheduler`` and ``dask worker`` use) or ``[executor]``
  ``tls_ca_file``/``tls_cert``/``tls_key``, or else read from dask's own configuration
  (``distributed.comm.tls.ca-file``, ``distributed.comm.tls.client.cert``,
  ``distributed.comm.tls.client.key``);
- to ``tcp://HOST:PORT`` only where HOST is this machine's loopback; another host is refused
  before any run starts, unless ``--insecure`` asks for it, which prints one warning line.

Before the Dask client is made, :func:`probe` opens a connection itself and reads the first
message: a Dask listener sends its handshake (a few dozen bytes: frame lengths, then a msgpack
map with ``python`` and ``pickle-protocol``) as soon as a connection opens. The read has one
deadline, ``connect_timeout``, covering connect, TLS handshake and reply, and a size cap, so an
address where something else listens fails at once or at the deadline with one line, instead of
Dask's own handshake, which has no deadline (a plain HTTP server there makes it wait forever) and
allocates whatever length the first eight bytes claim (a service that sends text first makes it
ask for exbibytes).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.lab.runner.config import ExecutorSpec
from toolkit.lab.runner.errors import ConfigError

__all__ = ["Address", "check_executor", "insecure_warning", "parse_address", "probe",
           "security_for"]

_TLS_OPTIONS = "--tls-ca-file, --tls-cert and --tls-key"
_DASK_TLS_KEYS = ("distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and "
                  "distributed.comm.tls.client.key")
_START_HINT = ("check the host and port (`dask scheduler` prints its address; a scheduler "
               "started with TLS needs tls://)")
#: Dask's handshake is about 60 bytes; anything claiming more than this is not Dask greeting us.
_GREETING_MAX = 64 * 1024
_FRAMES_MAX = 16


@dataclass(frozen=True)
class Address:
    """A scheduler address split into its parts: ``tls://10.0.0.5:8786``."""

    scheme: str
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether every address ``host`` names is this machine's loopback (127.0.0.0/8, ::1);
        a name that does not resolve is not."""
        return is_loopback(self.host)


def parse_address(address: str) -> Address:
    """``tcp://HOST:PORT`` or ``tls://HOST:PORT`` (``[v6]:PORT`` too; no scheme means tcp, as in
    Dask); :class:`ConfigError` for anything else."""
    fix = "give tls://HOST:PORT (or tcp://127.0.0.1:PORT for a scheduler on this machine)"
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls"):
        raise ConfigError("--address", address, f"the scheme {scheme}:// is not supported "
                          f"(tls:// or tcp://)", fix)
    host, colon, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("--address", address, "is not of the form SCHEME://HOST:PORT", fix)
    return Address(scheme, host, int(port))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or a name) names only loopback addresses."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback
                               for info in infos)


def check_executor(spec: ExecutorSpec) -> None:
    """Refuse, with one :class:`ConfigError` line, an executor that must not run: options of the
    dask executor given to another, TLS options without a ``tls://`` address, a ``tls://``
    address without certificates, certificate files that are not there, and a plain
    ``tcp://`` address off this machine without ``insecure``. Touches no network (a host name
    is resolved to tell loopback)."""
    tls_given = [name for name, value in (("--tls-ca-file", spec.tls_ca_file),
                                          ("--tls-cert", spec.tls_cert),
                                          ("--tls-key", spec.tls_key)) if value]
    if spec.kind != "dask":
        for name, given in (("--address", spec.address), ("--insecure", spec.insecure),
                            ("--dashboard", spec.dashboard), *((n, True) for n in tls_given)):
            if given:
                raise ConfigError(name, str(given) if isinstance(given, str) else "",
                                  "is only used by the dask executor", "add --executor dask")
        return
    if spec.address is None:
        if tls_given:
            raise ConfigError(tls_given[0], "", "is for a remote scheduler at a tls:// address; "
                              "the local cluster listens on loopback only",
                              "add --address tls://HOST:PORT, or leave the TLS options out")
        return
    if spec.dashboard:
        raise ConfigError("--dashboard", "", "shows the local cluster's dashboard; a remote "
                          "scheduler serves its own", "leave --dashboard out with --address")
    address = parse_address(spec.address)
    if address.scheme == "tcp":
        if tls_given:
            raise ConfigError(tls_given[0], "", f"is for a tls:// address, got {spec.address}",
                              f"write tls://{spec.address.partition('://')[2] or spec.address}")
        if not address.loopback and not spec.insecure:
            raise ConfigError("--address", spec.address, "plain TCP to a host that is not this "
                              "machine: anyone who can reach the scheduler can run code on its "
                              "workers and read every result",
                              f"use tls://HOST:PORT with {_TLS_OPTIONS}, or accept that risk "
                              f"with --insecure")
        return
    for name, value in (("--tls-ca-file", spec.tls_ca_file), ("--tls-cert", spec.tls_cert),
                        ("--tls-key", spec.tls_key)):
        if value and not Path(value).is_file():
            raise ConfigError(name, value, "no such file", "give the path of a PEM file")
    if tls_given:
        missing = [n for n, v in (("--tls-ca-file", spec.tls_ca_file),
                                  ("--tls-cert", spec.tls_cert)) if not v]
        if missing:
            raise ConfigError(missing[0], "", f"is needed with {tls_given[0]}: mutual TLS takes "
                              "the cluster's CA and this client's certificate",
                              f"give {_TLS_OPTIONS} (the key may sit in the certificate file)")
        return
    import dask.config

    if not (dask.config.get("distributed.comm.tls.ca-file", None)
            and dask.config.get("distributed.comm.tls.client.cert", None)):
        raise ConfigError("--address", spec.address, "a tls:// scheduler needs the cluster's "
                          "CA certificate and this client's certificate and key",
                          f"give {_TLS_OPTIONS}, or set {_DASK_TLS_KEYS} in dask's "
                          f"configuration")


def insecure_warning(spec: ExecutorSpec) -> str | None:
    """The one warning line of a plain ``tcp://`` address off this machine accepted with
    ``insecure``; ``None`` for any other executor."""
    if spec.kind != "dask" or spec.address is None:
        return None
    address = parse_address(spec.address)
    if address.scheme != "tcp" or address.loopback:
        return None
    return (f"toolkit: warning: {spec.address} is plain TCP (--insecure): anyone who can reach "
            f"it can run code on the workers and read every result; tls:// with "
            f"{_TLS_OPTIONS} prevents that")


def security_for(spec: ExecutorSpec) -> Any:
    """The :class:`distributed.security.Security` of a ``tls://`` address (encryption
    required), from the spec's files or else from dask's configuration; ``None`` otherwise."""
    if spec.address is None or parse_address(spec.address).scheme != "tls":
        return None
    from distributed.security import Security

    if spec.tls_ca_file or spec.tls_cert:
        return Security(require_encryption=True, tls_ca_file=spec.tls_ca_file,
                        tls_client_cert=spec.tls_cert, tls_client_key=spec.tls_key)
    return Security(require_encryption=True)


def probe(address: str, security: Any, timeout: float) -> None:
    """Connect to ``address`` and read Dask's handshake, all within ``timeout`` seconds and at
    most ``_GREETING_MAX`` bytes; :class:`ConfigError` saying what answered instead.

    ``security`` is the :class:`~distributed.security.Security` of a ``tls://`` address (its
    client context does the TLS handshake) or ``None``."""
    where = parse_address(address)
    deadline = time.monotonic() + timeout

    def nothing_dask(why: str) -> ConfigError:
        return ConfigError("--address", address, f"nothing Dask answered there ({why})",
                           _START_HINT)

    try:
        sock = socket.create_connection((where.host, where.port), timeout=timeout)
    except TimeoutError:
        raise nothing_dask(f"no connection within {timeout:g} s") from None
    except OSError as err:
        raise nothing_dask(f"cannot connect: {err.strerror or err}") from None
    try:
        if where.scheme == "tls":
            context = security.get_connection_args("client")["ssl_context"]
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock = context.wrap_socket(sock, server_hostname=None)
        head = _read(sock, 8, deadline)
        (size,) = struct.unpack("Q", head)
        if size > _GREETING_MAX:
            raise nothing_dask(f"it sent {head!r}, which is not Dask's handshake")
        _greeting(_read(sock, size, deadline))
    except TimeoutError:
        raise nothing_dask(f"no Dask handshake within {timeout:g} s") from None
    except ssl.SSLError as err:
        raise ConfigError("--address", address, f"the TLS handshake failed "
                          f"({err.reason or err}): these certificates are not the cluster's, "
                          f"or no Dask scheduler speaks TLS there",
                          f"check {_TLS_OPTIONS} (or dask's {_DASK_TLS_KEYS})") from None
    except (EOFError, ValueError) as err:
        raise nothing_dask(str(err)) from None
    except OSError as err:
        raise nothing_dask(f"the connection failed: {err.strerror or err}") from None
    finally:
        sock.close()


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Exactly ``n`` bytes before ``deadline`` (TimeoutError), or EOFError when the peer
    closes first."""
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(min(n - got, 65536))
        if not chunk:
            raise EOFError("the connection was closed before Dask's handshake")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _greeting(body: bytes) -> None:
    """ValueError unless ``body`` holds Dask's frames with a msgpack handshake map first."""
    import msgpack

    not_dask = ValueError("what it sent is not Dask's handshake")
    if len(body) < 8:
        raise not_dask
    (n_frames,) = struct.unpack_from("Q", body)
    if not 0 < n_frames <= _FRAMES_MAX or len(body) < 8 * (1 + n_frames):
        raise not_dask
    lengths = struct.unpack_from(f"{n_frames}Q", body, 8)
    start = 8 * (1 + n_frames)
    if sum(lengths) != len(body) - start:
        raise not_dask
    try:
        first = msgpack.unpackb(body[start:start + lengths[0]], raw=False, strict_map_key=True)
    except Exception:  # msgpack's errors have no common base beyond ValueError/TypeError
        raise not_dask from None
    if not isinstance(first, dict) or ("pickle-protocol" not in first and "python" not in first):
        raise not_dask
