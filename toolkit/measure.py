"""Measurement probes: wall time and memory of a callable, on CPU or CUDA.

``measure_memory`` reports two numbers:

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
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["MemoryStats", "TimingStats", "measure_memory", "time_fn"]


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


def _resolve_device(device: torch.device | str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null (C++ code writes there, bypassing ``sys.stderr``)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


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
        device: where ``fn`` allocates; ``None`` means CUDA when available, else CPU.

    Returns:
        :class:`MemoryStats`; ``.result`` holds what ``fn`` returned.
    """
    dev = _resolve_device(device)
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
            with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
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
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"time_fn: repeat must be an int >= 1, got {repeat!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"time_fn: warmup must be an int >= 0, got {warmup!r}")
    dev = _resolve_device(device)
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
