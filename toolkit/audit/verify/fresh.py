"""A fresh process for each rerun, started warm.

An edited script is audited again in a process of its own: nothing the first audit or the
script did in this one (modules imported from the user's folder, a module's state, torch's
random state, a thread pool) reaches the rerun. Starting Python and importing torch and the
audit is most of a small script's rerun (about 2.5 s of 4 on two cores), so each rerun is
forked from a server, :mod:`multiprocessing`'s ``forkserver``: it imports torch and the audit
once, at its start, and runs nothing else, so that a process forked from it begins with those
modules loaded and nothing done. Where ``fork`` is not available (Windows) the ``spawn``
context starts a new interpreter instead.

As with any :mod:`multiprocessing` start, the child runs with this process's ``sys.path`` and
imports its main module again as ``__mp_main__``: a program that calls the audit from a script
of its own keeps its top-level work under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

import torch

__all__ = ["run", "run_module"]

#: what the server imports before it forks anything: torch, its compiler (which building the first
#: optimizer imports, about 1 s of a rerun that builds one, nearly all of a small script's), and
#: the audit as the rerun runs it
_PRELOAD = ["torch", "torch._dynamo", "toolkit.audit.cli"]


def _context() -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context, its server preloading :data:`_PRELOAD` (when this call
    starts it), else ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _child(target: Callable[..., int | None], args: tuple, cwd: str, out: str,
           err: str) -> None:
    """In the fresh process: what it prints goes to ``out`` and ``err``, it runs in ``cwd``
    with its global random generators seeded anew, and ``target(*args)``'s return is its exit
    status (``None`` for 0)."""
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(cwd)
    # a new interpreter seeds torch's and NumPy's global generators anew (Python's `random`
    # reseeds itself after a fork); a child of the server would share the server's
    torch.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.exit(target(*args))


def run_module(name: str, argv: Sequence[str]) -> None:
    """``python -m NAME ARGV`` in this process (a target for :func:`run`)."""
    sys.argv = [name, *argv]
    runpy.run_module(name, run_name="__main__", alter_sys=True)


def run(target: Callable[..., int | None], args: Sequence[object], *, cwd: str,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """``target(*args)`` run in a fresh process (see the module's docstring) in ``cwd``, with
    no standard input: its exit status (``target``'s return, ``None`` for 0; 1 for an
    exception, whose traceback it printed) and what it printed, as :func:`subprocess.run`
    with ``capture_output=True, text=True, errors="replace"`` gives them. ``target`` is a
    function of a module the process can import. Past ``timeout`` seconds the process is
    killed and :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does."""
    described = [f"{target.__module__}.{target.__qualname__}", *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="toolkit-fresh-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out, err):
            open(path, "wb").close()
        process = _context().Process(target=_child, args=(target, tuple(args), cwd, out, err))
        process.start()
        try:
            process.join(timeout)
            late = process.exitcode is None
        finally:  # past the timeout, or this process interrupted: the child goes too
            if process.exitcode is None:
                process.kill()
                process.join()
        printed = []
        for path in (out, err):
            with open(path, encoding="utf-8", errors="replace") as fh:
                printed.append(fh.read())
        code = process.exitcode
        process.close()
    if late:
        raise subprocess.TimeoutExpired(described, timeout or 0, *printed)
    return subprocess.CompletedProcess(described, code, *printed)
