"""One intra-op thread for a while, nested and thread-safe, shared by every fit that asks.

Small operations run faster on one torch thread than split across several (each split waits for
a thread that may not be running). A fit enters :data:`one_intra_op_thread` around its loop: the
first entrant saves ``torch.get_num_threads()`` and sets 1, the last one out restores it, and
:attr:`OneIntraOpThread.outer` tells code inside what the caller had asked for. One instance for
the whole process, so that fits nested in one another (or run from several Python threads) save
and restore the caller's setting exactly once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

__all__ = ["OneIntraOpThread", "intra_op_threads", "one_intra_op_thread"]


@contextlib.contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` inside the ``with``, the setting from before
    restored on exit (a run's ``threads``, a benchmark's, a test's)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class OneIntraOpThread:
    """Nested, thread-safe ``torch.set_num_threads(1)``: the first entrant saves the setting,
    the last one out restores it; :attr:`outer` is the setting from before while inside."""

    def __init__(self) -> None:
        self.lock, self.depth, self.saved = threading.Lock(), 0, 1

    @property
    def outer(self) -> int:
        """The intra-op threads the caller asked for (saved while inside, else the setting)."""
        return self.saved if self.depth else torch.get_num_threads()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.saved = torch.get_num_threads()
                torch.set_num_threads(1)
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    torch.set_num_threads(self.saved)


#: the process's one guard (see the module docstring)
one_intra_op_thread = OneIntraOpThread()
