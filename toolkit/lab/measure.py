"""Measurement for experiments and benchmarks: memory (:func:`measure_memory`), time
(:class:`Timer`, :func:`race`: interleaved rounds) and graph size (:func:`count_graph_nodes`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit._utils.array_validation import resolve_device
from toolkit._utils.param_validation import Integer, check
from toolkit.lab.results.findings import TimeRatio
from toolkit.lens.gradients import count_graph_nodes

__all__ = ["MemoryStats", "Race", "Timer", "count_graph_nodes", "measure_memory", "race"]


@dataclass(frozen=True)
class MemoryStats:
    """Memory used by one call: peak live tensors, and bytes saved for backward (total, peak)."""

    peak_bytes: int
    saved_tensor_bytes: int
    saved_tensor_peak_bytes: int
    device: str
    result: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "result"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Saved:
    """What autograd keeps for a saved tensor: its deletion releases the storage's bytes."""

    __slots__ = ("counter", "key", "tensor")

    def __init__(self, tensor: torch.Tensor, counter: _SavedBytes, key: Any) -> None:
        self.tensor, self.counter, self.key = tensor, counter, key

    def __del__(self) -> None:
        live = self.counter.live
        if self.key in live:
            live[self.key][0] -= 1
            if live[self.key][0] == 0:
                self.counter.now -= live.pop(self.key)[1]


class _SavedBytes:
    """Bytes of the storages autograd saves, each once while alive: total, peak."""

    def __init__(self) -> None:
        self.live: dict[Any, list[int]] = {}  # (device, address) -> [references, bytes]
        self.total = self.now = self.peak = 0

    def pack(self, tensor: torch.Tensor) -> _Saved:
        try:
            storage = tensor.untyped_storage()
            key, nbytes = (str(tensor.device), storage.data_ptr()), storage.nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without storage (functorch)
            return _Saved(tensor, self, None)
        entry = self.live.setdefault(key, [0, 0])
        added = max(0, nbytes - entry[1])
        entry[0] += 1
        entry[1] += added
        self.total += added
        self.now += added
        self.peak = max(self.peak, self.now)
        return _Saved(tensor, self, key)


#: what the profiler writes on file descriptor 2 (C++, bypassing ``sys.stderr``): its start and
#: stop, and a note on freeing a block made before it started; the user's own lines stay
_PROFILER_NOTES = re.compile(rb"^(USDT:.*profiler_st(art|op)|\[W[^\]]*CPUAllocator\.cpp:\d+\] "
                             rb"Memory block of unknown size).*$\n?", re.MULTILINE)


@contextlib.contextmanager
def _without_profiler_notes() -> Iterator[None]:
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
            os.write(2, _PROFILER_NOTES.sub(b"", held.read()))


def measure_memory(fn: Callable[[], Any], *, device: torch.device | str | None = None
                   ) -> MemoryStats:
    """Run ``fn()`` once on ``device`` (``None``: CUDA when available) and measure its memory:
    peak live tensor bytes (CUDA's allocator statistics, on CPU the profiler's events) and the
    bytes autograd saves (each storage once while alive)."""
    dev = resolve_device(device, where="measure_memory")
    saved = _SavedBytes()
    hooks = torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda s: s.tensor)
    if dev.type == "cuda":
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        with hooks:
            result = fn()
        _sync(dev)
        peak = torch.cuda.max_memory_allocated(dev) - base
    else:
        with _without_profiler_notes(), torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            with hooks:
                result = fn()
        events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                        if e.name() == "[memory]"
                        and e.device_type() == torch.autograd.DeviceType.CPU)
        peak = max([0, *itertools.accumulate(nbytes for _, nbytes in events)])  # live bytes
    return MemoryStats(int(peak), saved.total, saved.peak, str(dev), result)


class Timer:
    """Wall time of a ``with`` block: ``seconds``, and ``on_exit(name, seconds)`` called."""

    def __init__(self, name: str = "", on_exit: Callable[[str, float], None] | None = None
                 ) -> None:
        self.name, self.seconds, self._on_exit, self._start = name, float("nan"), on_exit, 0.0

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start
        if self._on_exit is not None:
            self._on_exit(self.name, self.seconds)


@dataclass(frozen=True)
class Race:
    """``wall[name][r]``: wall seconds of ``name`` in round ``r``; ``cpu``: process CPU time."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]

    @property
    def names(self) -> list[str]:
        return list(self.wall)

    @property
    def rounds(self) -> int:
        return len(next(iter(self.wall.values()), []))

    def median(self, name: str) -> float:
        return statistics.median(self.wall[name])

    def min(self, name: str) -> float:
        return min(self.wall[name])

    def ratio(self, a: str, b: str, *, clock: str = "wall") -> TimeRatio:
        """``a / b`` in each round (both ran back to back): median and 95 % interval."""
        times = self.wall if clock == "wall" else self.cpu
        return TimeRatio(tuple(x / y for x, y in zip(times[a], times[b]) if y > 0))

    def table(self, *, unit: str = "ms", scale: float = 1e3) -> str:
        width = max(len(n) for n in self.wall)
        return "\n".join([f"  {'contender':<{width}}  {'median ' + unit:>12}  {'min ' + unit:>10}"]
                         + [f"  {n:<{width}}  {self.median(n) * scale:>12.3f}  "
                            f"{self.min(n) * scale:>10.3f}" for n in self.wall])


def race(contenders: Mapping[str, Callable[[], Any]], *, rounds: int = 15, warmup: int = 1,
         device: torch.device | str | None = "cpu", rotate: bool = True) -> Race:
    """Call each contender ``warmup`` times, then once per round, the order rotating from round
    to round (``rotate``); CUDA is synchronized around each call."""
    check("race", "rounds", rounds, [Integer(1)])
    check("race", "warmup", warmup, [Integer(0)])
    if not contenders:
        raise ValueError("race: contenders is empty; pass a dict name -> callable")
    dev = resolve_device(device, where="race")
    names = list(contenders)
    for name in names:
        for _ in range(warmup):
            contenders[name]()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in (names[r % len(names):] + names[:r % len(names)]) if rotate else names:
            _sync(dev)
            c0, t0 = time.process_time(), time.perf_counter()
            contenders[name]()
            _sync(dev)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return Race(wall, cpu)
