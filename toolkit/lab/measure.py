"""Measurement: wall time, memory and graph size of a callable, on CPU or CUDA.

One module for experiments and benchmarks alike:

- :func:`time_fn`: median (min, mean, std) wall time of repeated calls;
- :func:`race`: several contenders timed in interleaved rounds, with per-round ratios (the
  harness every benchmark script uses: on a shared machine the speed of one call drifts by tens
  of percent from one moment to the next, so contenders are compared round by round), and
  :meth:`Race.ratio`: the median of the per-round ratios with a distribution-free 95 % interval
  (:func:`median_interval`); a timing supports a claim only when that interval excludes 1;
- :class:`Timer`: a context manager for one stretch of work;
- :func:`count_graph_nodes`: the size of the backward graph behind an output;
- :func:`measure_memory`: peak tensor memory and the bytes saved for backward.

``measure_memory`` reports these numbers:

- ``peak_bytes``: the peak of live tensor memory allocated while ``fn`` ran, above what was
  live when it started. On CUDA this is ``torch.cuda.max_memory_allocated``; on CPU it is
  reconstructed from the allocation and free events of the PyTorch profiler
  (``profile_memory=True``), so it counts tensors only, not Python objects.
- ``saved_tensor_bytes``: bytes that autograd saved for backward while ``fn`` ran
  (``torch.autograd.graph.saved_tensors_hooks``), counted once per storage, summed over the
  whole call (a graph built and freed ten times counts ten times);
- ``saved_tensor_peak_bytes``: the most bytes saved for backward that were alive at one time.
  Both are exact and deterministic, and they are the part of memory that a ``stop_gradient``
  boundary changes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit._utils.array_validation import resolve_device
from toolkit._utils.param_validation import Integer, check
from toolkit.lens.gradients import count_graph_nodes

__all__ = [
    "MemoryStats",
    "Race",
    "Ratio",
    "Timer",
    "TimingStats",
    "count_graph_nodes",
    "measure_memory",
    "median_interval",
    "race",
    "time_fn",
]


@dataclass(frozen=True)
class MemoryStats:
    """Memory used by one call: peak live tensors, and bytes saved for backward (total, peak)."""

    peak_bytes: int
    saved_tensor_bytes: int
    device: str
    result: Any = field(default=None, repr=False, compare=False)
    saved_tensor_peak_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"peak_bytes": self.peak_bytes, "saved_tensor_bytes": self.saved_tensor_bytes,
                "saved_tensor_peak_bytes": self.saved_tensor_peak_bytes, "device": self.device}


@dataclass(frozen=True)
class TimingStats:
    """Wall-clock seconds of repeated calls (after warm-up)."""

    median: float
    min: float
    mean: float
    std: float
    repeat: int
    result: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.min, "mean": self.mean, "std": self.std,
                "repeat": self.repeat}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Saved:
    """What autograd stores instead of a saved tensor while we count: the tensor plus a receipt.

    Autograd keeps this object exactly as long as it would have kept the tensor, so its
    deletion tells the counter when the saved storage is released.
    """

    __slots__ = ("counter", "key", "tensor")

    def __init__(self, tensor: torch.Tensor, counter: _SavedTensorCounter, key: Any) -> None:
        self.tensor, self.counter, self.key = tensor, counter, key

    def __del__(self) -> None:
        if self.key is not None:
            self.counter.release(self.key)


class _SavedTensorCounter:
    """Counts the bytes of the storages that autograd saves for backward, each once while alive.

    A storage saved by several nodes (``exp`` saves its output, the following ``log`` its input)
    counts once; a storage freed and later reallocated at the same address counts again.
    """

    def __init__(self) -> None:
        self.live: dict[Any, list[int]] = {}  # key -> [references, nbytes]
        self.total = 0
        self.live_bytes = 0
        self.peak = 0

    def pack(self, tensor: torch.Tensor) -> _Saved:
        try:
            storage = tensor.untyped_storage()
            key: Any = (str(tensor.device), storage.data_ptr())
            nbytes = storage.nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. functorch)
            return _Saved(tensor, self, None)
        entry = self.live.get(key)
        if entry is None:
            self.live[key] = [1, nbytes]
            added = nbytes
        else:
            entry[0] += 1
            added = max(0, nbytes - entry[1])
            entry[1] += added
        self.total += added
        self.live_bytes += added
        self.peak = max(self.peak, self.live_bytes)
        return _Saved(tensor, self, key)

    @staticmethod
    def unpack(saved: _Saved) -> torch.Tensor:
        return saved.tensor

    def release(self, key: Any) -> None:
        entry = self.live.get(key)
        if entry is not None:
            entry[0] -= 1
            if entry[0] == 0:
                self.live_bytes -= entry[1]
                del self.live[key]


@contextlib.contextmanager
def _stderr_held(keep: Callable[[bytes], bytes]) -> Iterator[None]:
    """Hold what is written on file descriptor 2 inside the ``with`` (C++ code writes there,
    bypassing ``sys.stderr``), then write back ``keep(what was written)``."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters): nothing to hold
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            rest = keep(held.read())
            if rest:
                os.write(2, rest)


#: what the CPU profiler's allocator prints on fd 2 when a block made before profiling started is
#: freed during it: a note about the profiler's own bookkeeping, not about the user's code
_PROFILER_NOTE = re.compile(rb"^\[W[^\]]*CPUAllocator\.cpp:\d+\] Memory block of unknown size "
                            rb"was allocated before the profiling started.*$\n?", re.MULTILINE)


def _quiet_stderr() -> contextlib.AbstractContextManager[None]:
    """Nothing written on file descriptor 2 inside the ``with`` reaches the terminal (the
    profiler's backend announces its start and stop there)."""
    return _stderr_held(lambda written: b"")


def _without_profiler_notes() -> contextlib.AbstractContextManager[None]:
    """What file descriptor 2 receives while ``fn`` runs under the profiler, written back
    without the profiler's allocator notes (anything else comes through)."""
    return _stderr_held(lambda written: _PROFILER_NOTE.sub(b"", written))


def _cpu_peak_from_profiler(prof: torch.profiler.profile) -> int:
    events: list[tuple[int, int]] = []
    try:  # every allocation and free, with timestamps
        for event in prof.profiler.kineto_results.events():
            if event.name() == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU:
                events.append((event.start_ns(), event.nbytes()))
    except AttributeError:  # older profilers: the aggregated event list
        for event in prof.events():
            if event.name == "[memory]":
                events.append((int(event.time_range.start * 1000), event.cpu_memory_usage))
    live = peak = 0
    for _, nbytes in sorted(events, key=lambda e: e[0]):
        live += nbytes
        peak = max(peak, live)
    return peak


def measure_memory(fn: Callable[[], Any], *, device: torch.device | str | None = None
                   ) -> MemoryStats:
    """Run ``fn()`` once and measure its peak tensor memory and the bytes saved for backward.

    Args:
        fn: the work to measure (forward and backward, typically).
        device: where ``fn`` allocates; ``None`` or ``"auto"``: CUDA when available, else CPU.

    Returns:
        :class:`MemoryStats`; ``.result`` holds what ``fn`` returned.
    """
    dev = resolve_device(device, where="measure_memory")
    counter = _SavedTensorCounter()
    if dev.type == "cuda":
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
            result = fn()
        _sync(dev)
        peak = torch.cuda.max_memory_allocated(dev) - base
    else:
        activities = [torch.profiler.ProfilerActivity.CPU]
        prof = torch.profiler.profile(activities=activities, profile_memory=True)
        with _quiet_stderr():  # the profiler's backend announces its start and stop on fd 2
            prof.__enter__()
        try:
            with _without_profiler_notes(), \
                    torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
                result = fn()
        finally:
            with _quiet_stderr():
                prof.__exit__(None, None, None)
        peak = _cpu_peak_from_profiler(prof)
    return MemoryStats(int(peak), int(counter.total), str(dev), result, int(counter.peak))


def time_fn(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1,
            device: torch.device | str | None = None) -> TimingStats:
    """Median (and min/mean/std) wall time of ``fn()`` over ``repeat`` calls after ``warmup``.

    CUDA work is synchronized before and after each call so that the time is the work's.
    """
    check("time_fn", "repeat", repeat, [Integer(1)])
    check("time_fn", "warmup", warmup, [Integer(0)])
    dev = resolve_device(device, where="time_fn")
    result = None
    for _ in range(warmup):
        result = fn()
    times = []
    for _ in range(repeat):
        _sync(dev)
        start = time.perf_counter()
        result = fn()
        _sync(dev)
        times.append(time.perf_counter() - start)
    std = statistics.stdev(times) if len(times) > 1 else 0.0
    return TimingStats(statistics.median(times), min(times), statistics.fmean(times), std,
                       repeat, result)


class Timer:
    """Context manager measuring wall time; ``seconds`` is set on exit.

    ``on_exit(name, seconds)`` is called when the block ends (the run context uses it to add
    the time to ``costs.json``).

    >>> with Timer("sleep") as t:
    ...     pass
    >>> t.seconds >= 0
    True
    """

    def __init__(self, name: str = "", on_exit: Callable[[str, float], None] | None = None
                 ) -> None:
        self.name = name
        self.seconds: float = float("nan")
        self._on_exit = on_exit
        self._start = 0.0

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start
        if self._on_exit is not None:
            self._on_exit(self.name, self.seconds)


def median_interval(values: Sequence[float], confidence: float = 0.95
                    ) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of ``values``.

    With ``n`` independent samples sorted as ``x₍₁₎ ≤ … ≤ x₍ₙ₎``, the interval
    ``[x₍ₖ₎, x₍ₙ₊₁₋ₖ₎]`` holds the population median with probability
    ``1 − 2·P(Bin(n, ½) ≤ k − 1)``, whatever the distribution; ``k`` is the largest index whose
    coverage is still at least ``confidence``. Returns ``None`` when even ``[min, max]`` covers
    less (``n < 6`` for 95 %): too few rounds for an interval.

    References:
        Conover (1999), Practical Nonparametric Statistics, 3rd ed., §3.2 (confidence interval
        for a quantile); David & Nagaraja (2003), Order Statistics, §7.1.

    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    (1.0, 6.0)
    >>> median_interval([5, 1, 4, 2, 3]) is None
    True
    >>> median_interval(range(1, 21))
    (6, 15)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"median_interval: confidence must be in (0, 1), got {confidence}")
    xs = sorted(values)
    n = len(xs)
    best = None
    below = 0.0  # P(Bin(n, ½) ≤ k − 1)
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2.0 ** n
        if 1 - 2 * below < confidence:
            break
        best = k
    return None if best is None else (xs[best - 1], xs[n - best])


@dataclass(frozen=True)
class Ratio:
    """Per-round ratios ``a / b`` of two contenders: median, range and a 95 % interval.

    ``lo``/``hi`` bound the median of the per-round ratios with 95 % confidence
    (:func:`median_interval`, distribution-free); ``None`` with fewer than 6 rounds. A timing
    says "a is faster" only when ``hi < 1`` (:attr:`excludes_one`).
    """

    a: str
    b: str
    median: float
    min: float
    max: float
    lo: float | None = None
    hi: float | None = None
    rounds: tuple[float, ...] = ()

    @classmethod
    def of(cls, a: str, b: str, ratios: Sequence[float]) -> Ratio:
        """Summarise per-round ratios (NaN and non-positive entries are dropped)."""
        kept = [float(r) for r in ratios if r > 0 and math.isfinite(r)]
        if not kept:
            nan = float("nan")
            return cls(a, b, nan, nan, nan)
        interval = median_interval(kept)
        lo, hi = interval if interval is not None else (None, None)
        return cls(a, b, statistics.median(kept), min(kept), max(kept), lo, hi, tuple(kept))

    @property
    def excludes_one(self) -> bool:
        """The 95 % interval lies wholly above or wholly below 1 (False without an interval)."""
        return self.lo is not None and self.hi is not None and (self.hi < 1 or self.lo > 1)

    def __str__(self) -> str:
        interval = (f"95 % interval {self.lo:.3f}..{self.hi:.3f}, " if self.lo is not None
                    and self.hi is not None else "")
        return (f"{self.a} / {self.b} = {self.median:.3f}x  ({interval}"
                f"rounds {self.min:.3f}..{self.max:.3f}, n = {len(self.rounds)})")


@dataclass(frozen=True)
class Race:
    """Result of :func:`race`: seconds per call of each contender in each round.

    ``wall[name][r]`` is the wall time of ``name`` in round ``r`` (``cpu``: process CPU time,
    all threads, steadier than wall time when other programs compete for the cores).
    """

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]

    @property
    def names(self) -> list[str]:
        return list(self.wall)

    @property
    def rounds(self) -> int:
        return len(next(iter(self.wall.values()), []))

    def median(self, name: str) -> float:
        """Median wall seconds of ``name`` over the rounds."""
        return statistics.median(self.wall[name])

    def min(self, name: str) -> float:
        return min(self.wall[name])

    def ratio(self, a: str, b: str, *, clock: str = "wall") -> Ratio:
        """The ratio ``a / b`` in each round (both ran back to back): median, range, 95 % interval."""
        times = self.wall if clock == "wall" else self.cpu
        return Ratio.of(a, b, [x / y for x, y in zip(times[a], times[b]) if y > 0])

    def table(self, *, unit: str = "ms", scale: float = 1e3) -> str:
        """One line per contender: median and min over the rounds."""
        width = max(len(n) for n in self.wall)
        lines = [f"  {'contender':<{width}}  {'median ' + unit:>12}  {'min ' + unit:>10}"]
        for name in self.wall:
            lines.append(f"  {name:<{width}}  {self.median(name) * scale:>12.3f}  "
                         f"{self.min(name) * scale:>10.3f}")
        return "\n".join(lines)


def race(contenders: Mapping[str, Callable[[], Any]], *, rounds: int = 15, warmup: int = 1,
         device: torch.device | str | None = "cpu", rotate: bool = True,
         between: Callable[[], Any] | None = None) -> Race:
    """Time ``contenders`` in interleaved rounds: every round calls each of them once.

    The order rotates from round to round (``rotate``), so no contender always runs first
    (warm caches) or last. Each contender is called ``warmup`` times first. CUDA work is
    synchronized around every call. ``between()`` runs before every timed call and is not
    timed (e.g. to reset state). Compare contenders with :meth:`Race.ratio`: the median of
    per-round ratios is robust to the machine speeding up or slowing down between rounds.

    >>> r = race({"a": lambda: sum(range(1000)), "b": lambda: sum(range(2000))}, rounds=3)
    >>> r.rounds, sorted(r.names)
    (3, ['a', 'b'])
    """
    check("race", "rounds", rounds, [Integer(1)])
    check("race", "warmup", warmup, [Integer(0)])
    if not contenders:
        raise ValueError("race: contenders is empty; pass a dict name -> callable")
    dev = resolve_device(device, where="race")
    names: Sequence[str] = list(contenders)
    for name in names:
        for _ in range(warmup):
            contenders[name]()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = [names[(i + r) % len(names)] for i in range(len(names))] if rotate else names
        for name in order:
            if between is not None:
                between()
            _sync(dev)
            c0, t0 = time.process_time(), time.perf_counter()
            contenders[name]()
            _sync(dev)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return Race(wall, cpu)
