"""DDP's side of :mod:`audit_peers`: two gloo processes on 127.0.0.1 train a corpus case
under ``DistributedDataParallel`` (``TORCH_DISTRIBUTED_DEBUG=DETAIL``), and the parent reads
the first error each raises. ``python benchmarks/peers_ddp.py --worker RANK`` is one worker;
the table is made by ``python benchmarks/audit_peers.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from peers_cases import (
    DDP_ITERATIONS,
    ROOT,
    CaseUnavailable,
    Cell,
    build,
    error_text,
    full_error,
    one_line,
    train,
)
from torch import nn

# --- DDP: the worker side -----------------------------------------------------------------------


def route_forward_through(ddp: Any, module: nn.Module, key: str, seen: dict[str, Any]) -> None:
    """Make every outermost call into ``module``'s tree run DDP's pre- and post-forward (see
    the module's docstring); ``seen["forwards"][key]`` counts those with gradient enabled,
    ``seen["raised_by"]`` names the module whose DDP pre-forward raised."""
    depth = [0]
    seen["forwards"][key] = seen["calls"][key] = 0

    def pre(_module: nn.Module, args: tuple) -> None:
        if depth[0] == 0:
            try:
                ddp._pre_forward(*args)  # returns args unchanged on CPU, without device_ids
            except Exception:
                seen.setdefault("raised_by", key)
                raise
            seen["calls"][key] += 1
            if torch.is_grad_enabled():
                seen["forwards"][key] += 1
        depth[0] += 1

    def post(_module: nn.Module, _args: tuple, output: Any) -> None:
        depth[0] -= 1
        if depth[0] == 0:
            ddp._post_forward(output)  # returns output unchanged: find_unused_parameters=False

    for sub in module.modules():
        sub.register_forward_pre_hook(pre)
        sub.register_forward_hook(post)


def ddp_run(name: str, seed: int, rank: int, port: int, iterations: int = DDP_ITERATIONS,
            timeout_s: float = 20.0) -> dict[str, Any]:
    """One rank of the DDP run of a case (in a worker process): its first error or ``None``,
    the modules wrapped, the forwards DDP saw and the time."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    start = time.perf_counter()
    # DETAIL wraps a new gloo group in a ProcessGroupWrapper (collective desync checks), and
    # DDP's constructor then segfaults in c10d::Logger::set_env_variables on this CPU build
    # (torch 2.13): the group is made at INFO, the reducer and DDP run at DETAIL.
    dist.set_debug_level(dist.DebugLevel.INFO)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=timedelta(seconds=timeout_s))
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    wrapped: list[str] = []
    seen: dict[str, Any] = {"forwards": {}, "calls": {}}
    error = detail = None
    try:
        case = build(name, seed)
        for key, module in case.modules.items():
            if any(p.requires_grad for p in module.parameters()):
                route_forward_through(DistributedDataParallel(module), module, key, seen)
                wrapped.append(key)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(case, iterations)
    except Exception as err:  # the answer
        error, detail = error_text(err), full_error(err)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
    return {"error": error, "detail": detail, "wrapped": wrapped, "forwards": seen["forwards"],
            "calls": seen["calls"],
            "raised_by": seen.get("raised_by"), "seconds": time.perf_counter() - start}


def worker(rank: int, warm: list[str]) -> None:
    """A DDP worker: one JSON request per line on stdin, one JSON answer per line on the
    original stdout (the cases' own prints go to stderr). The cases in ``warm`` are built once
    first, so that no case's time holds its imports."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    torch.set_num_threads(1)
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401  (the imports, once)

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # the first optimizer imports dynamo
    for name in warm:
        with contextlib.suppress(CaseUnavailable):
            build(name, 0)
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        request = json.loads(line)
        answer = ddp_run(request["case"], request["seed"], rank, request["port"],
                         request["iterations"], request["pg_timeout"])
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


# --- DDP: the parent side -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerPair:
    """Two worker processes (ranks 0 and 1) answering one case at a time; restarted after a
    hang or a death. ``start()`` raises ``RuntimeError`` when they cannot start."""

    def __init__(self, timeout_s: float = 60.0, pg_timeout_s: float = 20.0,
                 warm: tuple[str, ...] = ()) -> None:
        self.timeout_s, self.pg_timeout_s, self.warm = timeout_s, pg_timeout_s, warm
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Any] = []

    def start(self) -> None:
        env = {**os.environ, "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "OMP_NUM_THREADS": "1",
               "PYTHONUNBUFFERED": "1"}
        if "GLOO_SOCKET_IFNAME" not in env and Path("/sys/class/net/lo").exists():
            env["GLOO_SOCKET_IFNAME"] = "lo"  # 127.0.0.1, whatever the hostname resolves to
        for rank in (0, 1):
            log = tempfile.TemporaryFile()
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--worker", str(rank),
                 "--cases", ",".join(self.warm)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT))
        for rank, proc in enumerate(self.procs):
            if self._readline(proc, time.monotonic() + 120) != "ready":
                tail = self._log_tail(rank)
                self.close()
                raise RuntimeError(f"DDP worker {rank} did not start: {tail}")

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(Exception):
                    stream.close()
        for log in self.logs:
            log.close()
        self.procs, self.logs = [], []

    def _log_tail(self, rank: int) -> str:
        log = self.logs[rank]
        log.seek(0)
        lines = log.read().decode(errors="replace").strip().splitlines()
        return one_line(lines[-1] if lines else "(nothing on stderr)", 150)

    @staticmethod
    def _readline(proc: subprocess.Popen, deadline: float) -> str | None:
        out, buf = proc.stdout, b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return None
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                return None
            buf += chunk
        return buf.decode().strip()

    def run(self, name: str, seed: int, iterations: int) -> dict[str, Any]:
        """Both ranks' answers for ``name``, or ``{"failed": why}``."""
        if not self.procs:
            self.start()
        request = json.dumps({"case": name, "seed": seed, "port": free_port(),
                              "iterations": iterations, "pg_timeout": self.pg_timeout_s})
        for proc in self.procs:
            proc.stdin.write((request + "\n").encode())
            proc.stdin.flush()
        deadline = time.monotonic() + self.timeout_s
        answers = [self._readline(proc, deadline) for proc in self.procs]
        if all(answers):
            return {"ranks": [json.loads(a) for a in answers]}
        dead = [r for r, p in enumerate(self.procs) if p.poll() is not None]
        why = (f"worker {dead[0]} died: {self._log_tail(dead[0])}" if dead else
               f"hang: no answer in {self.timeout_s:g} s")
        self.close()
        return {"failed": why}


_NAMES = re.compile(r"Parameters which did not receive grad for rank \d+: ([^\n]*)")


def ddp_cell(name: str, seed: int = 0, pair: WorkerPair | None = None,
             iterations: int = DDP_ITERATIONS) -> Cell:
    """DDP's first error on the case (rank 0's, or rank 1's if rank 0 had none), with the
    parameters it lists; ``no error``; or why it could not run."""
    own = pair is None
    pair = pair or WorkerPair()
    start = time.perf_counter()
    try:
        result = pair.run(name, seed, iterations)
    finally:
        if own:
            pair.close()
    seconds = time.perf_counter() - start
    if "failed" in result:
        return Cell(f"could not run: {result['failed']}", False, seconds)
    ranks = result["ranks"]
    rank = ranks[0] if ranks[0]["error"] or not ranks[1]["error"] else ranks[1]
    error, by = rank["error"], rank["raised_by"]
    detail = rank["detail"] or ""
    blind = [k for k, n in rank["calls"].items() if n == 0]
    note = f" (no call into {', '.join(blind)}: DDP saw no forward)" if blind else ""
    if not rank["wrapped"]:
        return Cell("could not run: no module with trainable parameters to wrap", False, seconds)
    if error is None:
        return Cell(f"no error{note}", False, seconds)
    match = _NAMES.search(detail)
    names = [f"{by}.{n}" if by else n for n in match[1].strip().split(", ")] if match else []
    head = error.replace(": RuntimeError", f", DDP of {by}: RuntimeError", 1) if by else error
    if names:
        head = f"{head} Did not receive grad: {', '.join(names)}"
    return Cell(one_line(head + note, 300), True, seconds, names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", type=int, required=True, help="this worker's rank")
    parser.add_argument("--cases", help="comma-separated cases to build once before the first")
    args = parser.parse_args(argv)
    worker(args.worker, args.cases.split(",") if args.cases else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
