"""``toolkit.explain_unused_parameters`` against the real ``DistributedDataParallel``: two
processes, a ``gloo`` process group on the CPU (``ddp_worker.py``).

DDP names the parameters that got no gradient when ``TORCH_DISTRIBUTED_DEBUG`` is ``INFO`` or
``DETAIL`` ("Parameters which did not receive grad for rank 0: ..."); the test runs with
``INFO`` (on the CPU build of torch 2.13 we test with, ``DETAIL`` crashed inside DDP's
constructor, in ``Logger.set_construction_data_and_log``; both modes print the same list). No
step can hang: the process group times out after 60 s and the processes are killed after 240.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolkit

WORKER = Path(__file__).with_name("ddp_worker.py")
DDP_ERROR = "Expected to have finished reduction in the prior iteration before starting a new one"
EXPECTED = {  # parameter -> why it gets no gradient, as the worker's model is written
    **{f"token_predict_head.{i}.{p}": "not_used" for i in (0, 2) for p in ("weight", "bias")},
    **{f"aux_head.{p}": "no_graph" for p in ("weight", "bias")},
    **{f"teacher.0.{p}": "detach" for p in ("weight", "bias")},
}


def _marked(marker: str) -> int:
    """The line of ``ddp_worker.py`` that carries the comment ``# (marker)``."""
    lines = WORKER.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(f"# ({marker})"))


@pytest.fixture
def ranks(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "TORCH_DISTRIBUTED_DEBUG": "INFO",
           "PYTHONPATH": os.pathsep.join([str(Path(toolkit.__file__).parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: no network needed
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(rank), "2",
                               str(folder / "rendezvous"), str(folder / f"rank{rank}.json")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for rank in range(2)]
    try:
        logs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    return [json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.slow
def test_the_explanation_names_exactly_what_ddp_names(ranks) -> None:
    """One test (the two processes run once): for each rank, DDP's error and the set it
    names, the reasons, the frozen block, the lines, and DDP after the proposed fix."""
    for rank, seen in enumerate(ranks):
        assert DDP_ERROR in seen["error"]
        named = re.search(rf"Parameters which did not receive grad for rank {rank}: (.*)",
                          seen["error"])
        assert named, seen["error"]
        ddp_names = set(named.group(1).strip().split(", "))
        explained = {name: kind for name, kind, _ in seen["explained"]}
        assert set(explained) == ddp_names == set(EXPECTED)
        assert explained == EXPECTED  # each with its right reason
        # DDP never reports the frozen block; the explanation lists it apart
        assert seen["frozen"] == ["frozen_proj.weight", "frozen_proj.bias"]
        assert seen["n_parameters"] == 12  # DDP's reducer: every parameter requiring grad
        # freezing what the explanation names: DDP runs without find_unused_parameters
        assert seen["after_ok"] and seen["error_after"] is None
        assert "the step calls the DistributedDataParallel wrapper; call its .module" in (
            seen["refused"] or "")

    lines = {name: line for name, _, line in ranks[0]["explained"]}
    assert lines["teacher.0.weight"] == f"at ddp_worker.py:{_marked('c')} (forward)"
    assert lines["aux_head.bias"] == f"called at ddp_worker.py:{_marked('b')} (forward)"
    assert lines["token_predict_head.0.weight"] == (
        f"defined at ddp_worker.py:{_marked('a')} (Detector.__init__)")
    text = ranks[0]["text"]
    assert DDP_ERROR in text and "token_predict_head.0.weight" in text
