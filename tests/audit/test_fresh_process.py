"""The fresh process each rerun of an edited script runs in (:mod:`toolkit.audit.verify.fresh`):
forked from a server that imported torch and the audit and did nothing else, it starts with
none of this process's state, in the folder it is given, with no standard input; its exit
status and what it printed come back as :func:`subprocess.run` gives them, and past its time
it is killed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
import torch

from toolkit.audit.verify import fresh

#: set in this process by a test: a fresh process must not see it
MADE_HERE = "made_here_by_a_test"


def _prints_and_returns(code: int) -> int:
    print("to stdout")
    print("to stderr", file=sys.stderr)
    return code


def _raises() -> None:
    raise ValueError("raised in the child")


def _reads_stdin() -> int:
    try:
        input()
    except EOFError:
        return 7
    return 0


def _state(out: str) -> None:
    Path(out).write_text(json.dumps([os.getcwd(), MADE_HERE in sys.modules, torch.initial_seed(),
                                     int(numpy.random.randint(2**31)), random.getrandbits(31),
                                     torch.get_default_dtype() == torch.float32]),
                         encoding="utf-8")


def _sleeps(pid_file: str) -> None:
    Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(120)


def test_the_exit_status_and_what_it_printed_come_back():
    done = fresh.run(_prints_and_returns, [3], cwd=os.getcwd())
    assert (done.returncode, done.stdout, done.stderr) == (3, "to stdout\n", "to stderr\n")
    assert fresh.run(_prints_and_returns, [0], cwd=os.getcwd()).returncode == 0


def test_an_exception_exits_1_with_its_traceback():
    done = fresh.run(_raises, [], cwd=os.getcwd())
    assert done.returncode == 1
    assert "ValueError: raised in the child" in done.stderr


def test_it_has_no_standard_input():
    assert fresh.run(_reads_stdin, [], cwd=os.getcwd()).returncode == 7


def test_it_starts_in_its_folder_with_nothing_of_this_process(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, MADE_HERE, sys.modules[__name__])
    states = []
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        torch.set_default_dtype(torch.float64)
        try:
            for n in range(2):
                assert fresh.run(_state, [str(tmp_path / f"{n}")], cwd=str(tmp_path)
                                 ).returncode == 0
                states.append(json.loads((tmp_path / f"{n}").read_text(encoding="utf-8")))
        finally:
            torch.set_default_dtype(torch.float32)
    for where, seen, *_, default_dtype in states:
        assert [where, seen, default_dtype] == [str(tmp_path), False, True]
    # each seeded anew, as a new interpreter is: not this process's seed, nor each other's
    seeds = [state[2:5] for state in states]
    assert seeds[0][0] != 1234 and all(a != b for a, b in zip(*seeds))


def test_past_its_time_it_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        fresh.run(_sleeps, [str(pid_file)], cwd=str(tmp_path), timeout=5)
    assert time.monotonic() - start < 60
    if pid_file.exists():  # (else it was killed before it wrote it)
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text(encoding="utf-8")), 0)


class _Interrupted(Exception):
    pass


def test_interrupted_here_it_is_killed(tmp_path):
    """Ctrl-C while a rerun runs: the exception goes on, and the child does not outlive it."""
    pid_file = tmp_path / "pid"
    fresh.run(_prints_and_returns, [0], cwd=str(tmp_path))  # the server started: the alarm
    # comes while the child sleeps

    def interrupt(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 3)
        with pytest.raises(_Interrupted):
            fresh.run(_sleeps, [str(pid_file)], cwd=str(tmp_path), timeout=120)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if pid_file.exists():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text(encoding="utf-8")), 0)


def _loaded(out: str) -> None:
    Path(out).write_text(json.dumps(sorted(m for m in ("torch", "torch._dynamo",
                                                       "toolkit.audit.cli") if m in sys.modules)),
                         encoding="utf-8")


@pytest.mark.skipif("forkserver" not in __import__("multiprocessing").get_all_start_methods(),
                    reason="no fork server here: each rerun is a new interpreter")
def test_it_starts_with_torch_its_compiler_and_the_audit_loaded(tmp_path):
    """Building a script's first optimizer imports torch's compiler (about 1 s): the server has
    it loaded, so that a rerun does not pay it."""
    out = tmp_path / "loaded.json"
    assert fresh.run(_loaded, [str(out)], cwd=str(tmp_path)).returncode == 0
    assert json.loads(out.read_text(encoding="utf-8")) == ["toolkit.audit.cli", "torch",
                                                            "torch._dynamo"]
