"""A pass over the data's chunks on all of the CPU's cores, with one hand-off per pass.

An EM iteration on the CPU is a loop over chunks of columns (a few MiB each, so that a chunk
stays in cache from one operation to the next), and each chunk is about ten torch operations.
Left to torch's intra-op threads, every one of those operations is a parallel region of its
own: some 140 fork-joins per iteration at n = 1e5, and on a machine whose cores are shared
with other programs a join can wait a whole scheduling slice for a thread that is not running
(measured on a loaded 2-core AMD EPYC, n = 1e5, d = k = 8, float64: one iteration's median
time 2.9x that of its two GEMMs alone, against 0.9x with the chunks split as below; the whole
fit, setup included, 2.2x against 1.4x in benchmarks/bench_em.py).

:func:`map_chunks` instead gives each of ``torch.get_num_threads()`` threads a contiguous run
of chunks, which it works through with one intra-op thread: one hand-off per pass. The chunk
boundaries do not depend on the number of threads, and the results come back in chunk order,
so a caller that sums them in that order gets the same numbers with any number of threads.
The EM loop runs inside :func:`chunked_threads`: one intra-op thread for everything between
the passes (operations on (k, d, d) parameters, each of which a second thread would only
delay), the passes on all threads.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

import torch

from toolkit._utils.threads import one_intra_op_thread

__all__ = ["chunked_threads", "map_chunks"]

T = TypeVar("T")


class _Pool:
    """The worker threads, made on first use in each process (a forked child makes its own:
    the parent's threads do not exist there) and remade when the number of threads changes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple[int, int] | None = None
        self.executor: ThreadPoolExecutor | None = None

    def get(self, workers: int) -> ThreadPoolExecutor:
        with self.lock:
            key = (os.getpid(), workers)
            if self.key != key or self.executor is None:
                if self.executor is not None and self.key is not None \
                        and self.key[0] == os.getpid():
                    self.executor.shutdown(wait=False)
                self.executor = ThreadPoolExecutor(workers, thread_name_prefix="toolkit-em")
                self.key = key
            return self.executor


_pool = _Pool()


def chunked_threads(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """One intra-op thread on the CPU, so that the small operations between passes (parameter
    updates, reductions to a number) never wait for a second thread; :func:`map_chunks` inside
    still uses the number of threads set before. The setting is restored on exit."""
    return one_intra_op_thread() if device.type == "cpu" else contextlib.nullcontext()


def _run(fn: Callable[[int, int], T], bounds: list[tuple[int, int]]) -> list[T]:
    torch.set_num_threads(1)  # this thread's own setting (already 1 for the process)
    return [fn(start, stop) for start, stop in bounds]


def map_chunks(fn: Callable[[int, int], T], n: int, chunk: int, device: torch.device
               ) -> list[T]:
    """``[fn(start, stop) for each chunk]`` of ``range(n)`` in chunks of ``chunk``, in order.

    On the CPU with ``torch.get_num_threads() > 1`` (the setting from before
    :func:`chunked_threads`, inside it) and more than one chunk, the chunks are
    split into that many contiguous runs, each worked through by one thread (the caller's
    thread takes the first) with one intra-op thread; the setting is restored afterwards.
    ``fn`` must write only to what belongs to its chunk. Elsewhere (one thread, one chunk, or
    another device) it is a plain loop in the calling thread.
    """
    bounds = [(start, min(start + chunk, n)) for start in range(0, n, chunk)]
    threads = min(one_intra_op_thread.outer, len(bounds)) if device.type == "cpu" else 1
    if threads <= 1:
        return [fn(start, stop) for start, stop in bounds]
    per, extra = divmod(len(bounds), threads)
    runs, first = [], 0
    for i in range(threads):
        last = first + per + (i < extra)
        runs.append(bounds[first:last])
        first = last
    with one_intra_op_thread():
        executor = _pool.get(threads - 1)
        futures: list[Future[list[T]]] = [executor.submit(_run, fn, run) for run in runs[1:]]
        try:
            results = [fn(start, stop) for start, stop in runs[0]]
        finally:
            wait(futures)  # every worker is done before what they write is read or freed
        for future in futures:
            results.extend(future.result())
    return results
