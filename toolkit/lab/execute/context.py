"""The run context handed to an experiment's ``run(params, ctx)``."""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import random
import re
import shutil
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from toolkit._utils.rng import get_rng_state, set_rng_state
from toolkit.core import disable_blocks, record_blocks
from toolkit.lab.execute.live_curves import TensorBoardMirror
from toolkit.lab.measure import Timer
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_json, to_jsonable
from toolkit.lab.results.records import save_meta
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, ChildMeta, RunMeta, summary_problem

__all__ = ["Progress", "RunContext", "RunFiles"]

T = TypeVar("T")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def _numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):  # numpy has no bfloat16
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy(force=True)
    return value


def _deep_merge(target: dict[str, Any], values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = value


@dataclass(frozen=True)
class Progress:
    """What a run tells the command that follows it, as it happens: the experiment ``name``
    (a child of a showcase) started (``seconds`` is ``None``) or ended after ``seconds``, or
    went ``part`` of its way (0 to 1: the steps of its first progress bar)."""

    name: str
    seconds: float | None = None
    part: float | None = None


class _ToldBar(tqdm):
    """A tqdm bar that also tells ``told(part)`` how far through its steps it is, at most
    twice a second and at its last step, whether it is drawn or not."""

    def __init__(self, *args: Any, told: Callable[[float], Any], **kwargs: Any) -> None:
        self._told, self._steps, self._last = told, 0.0, 0.0
        super().__init__(*args, **kwargs)

    def __iter__(self) -> Any:
        for item in super().__iter__():
            yield item
            self._stepped(1)

    def update(self, n: float | None = 1) -> bool | None:
        self._stepped(n or 0)
        return super().update(n)

    def _stepped(self, n: float) -> None:
        self._steps += n
        now = time.monotonic()
        if self.total and (now - self._last >= 0.5 or self._steps >= self.total):
            self._last = now
            self._told(min(1.0, self._steps / self.total))


class RunFiles:
    """The files of one run folder, shared by a context and its children; ``listener`` hears
    each :class:`Progress` of the run (the command's progress bar)."""

    def __init__(self, run_dir: Path, *, meta: RunMeta | None = None,
                 tensorboard: Path | None = None,
                 listener: Callable[[Progress], Any] | None = None) -> None:
        self.run_dir, self.meta, self.listener = run_dir, meta, listener
        self.started: dict[str, float] = {}  # each child's start (perf_counter)
        self.telling: set[str] = set()  # the experiments whose progress bar tells its steps
        self.summary: dict[str, Any] = {}
        self.costs: dict[str, Any] = {}
        self.children: dict[str, dict[str, Any]] = {}
        self.blocks_seen: dict[str, None] = {}
        self.warnings: list[str] = []
        self.carried: list[str] = []  # children finished by the run this one resumes
        self.n_logged, self._lock = 0, threading.Lock()
        self._mirror = None if tensorboard is None else TensorBoardMirror(tensorboard)
        self._metrics = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")

    def log(self, row: dict[str, Any], prefix: str = "") -> None:
        line = json.dumps(row, ensure_ascii=False, allow_nan=True) + "\n"
        with self._lock:
            try:
                self._metrics.write(line)
                self._metrics.flush()
            except OSError as err:  # e.g. a full disk: say which file
                raise OSError(err.errno, err.strerror, self._metrics.name) from err
            self.n_logged += 1
            if self._mirror is not None:
                self._mirror.log(row["step"], row, prefix)

    def write(self, *names: str) -> None:
        """Write ``summary.json`` and/or ``costs.json`` as they stand."""
        for name in names:
            atomic_write_json(self.run_dir / f"{name}.json", getattr(self, name))

    def write_children(self) -> None:
        """The children so far into ``meta.json``: a report reads them while the run goes on."""
        if self.meta is not None:  # else a context made outside the runner: no meta.json
            save_meta(self.run_dir / "meta.json", self.meta.model_copy(update={
                "children": {k: ChildMeta(**v) for k, v in self.children.items()}}))

    def tell(self, name: str, *, ended: bool = False, part: float | None = None) -> None:
        """Tell the listener that ``name`` started, went ``part`` of its way, or ended (with
        its seconds since it started); a listener that is gone (its command ended) is not the
        run's failure."""
        now = time.perf_counter()
        seconds = round(now - self.started.pop(name, now), 3) if ended else None
        if ended:
            self.telling.discard(name)
        elif part is None:
            self.started[name] = now
        if self.listener is not None:
            with contextlib.suppress(OSError, ValueError, EOFError):
                self.listener(Progress(name, seconds, part))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def close(self) -> None:
        """Close TensorBoard's writers and ``metrics.jsonl`` (both, whatever the first does)."""
        try:
            if self._mirror is not None:
                self._mirror.close()
        finally:
            try:
                self._metrics.close()
            except OSError as err:
                raise OSError(err.errno, err.strerror, self._metrics.name) from err


class RunContext:
    """What an experiment gets from the runner: ``seed`` (``random``, ``numpy`` and ``torch``
    seeded with it), ``generator`` (a CPU generator seeded with it), ``device``, ``dtype``,
    ``run_dir``, ``disable_patterns`` (what :meth:`compare` switches off) and ``params``."""

    def __init__(self, *, run_dir: Path, seed: int, device: torch.device, dtype: torch.dtype,
                 disable_patterns: tuple[str, ...], quiet: bool = False,
                 params: Any = None, _files: RunFiles | None = None, _prefix: str = "",
                 _path: tuple[str, ...] = ()) -> None:
        self.run_dir, self.seed, self.device = Path(run_dir), int(seed), torch.device(device)
        self.dtype, self.disable_patterns = dtype, tuple(disable_patterns)
        self.quiet, self.params = quiet, params
        self._files = _files if _files is not None else RunFiles(self.run_dir)
        self._prefix, self._path = _prefix, _path
        random.seed(self.seed)  # random, numpy and torch (CPU and CUDA) seeded with it
        np.random.seed(self.seed % 2**32)
        torch.manual_seed(self.seed)
        self.generator = torch.Generator().manual_seed(self.seed)

    def __repr__(self) -> str:
        return (f"RunContext({'/'.join(self._path) or str(self.run_dir)!r}, seed={self.seed}, "
                f"device={self.device}, dtype={self.dtype}, "
                f"disable_patterns={self.disable_patterns})")

    def log(self, step: int, **metrics: Any) -> None:
        """Append ``{"step": step, **metrics}`` to ``metrics.jsonl`` (and TensorBoard): keys
        ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``), values numbers or ``None``."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"ctx.log: step must be an int, got {type(step).__name__} {step!r}")
        row: dict[str, Any] = {"step": int(step)}
        for key, value in metrics.items():
            value = to_jsonable(value, f"ctx.log: metric {key!r}")
            if isinstance(value, (list, dict, str)):
                raise TypeError(f"ctx.log: metric {key!r} must be a number, got {value!r}; "
                                f"log one number per key")
            row[self._prefix + key] = value
        self._files.log(row, self._prefix)

    def _at_path(self, name: str) -> dict[str, Any]:
        table = getattr(self._files, name)
        for part in self._path:
            table = table.setdefault(part, {})
        return table

    def summary(self, **values: Any) -> None:
        """Merge ``values`` into ``summary.json`` (nested dicts key by key): a function of
        config and seed only (no timings), ``{"blocked": {...}, "unblocked": {...}, ...}``."""
        values = to_jsonable(values, "ctx.summary")
        problem = summary_problem(values)
        if problem is not None:  # what every reader will refuse is refused here first
            raise TypeError(f"ctx.summary: {problem}")
        _deep_merge(self._at_path("summary"), values)
        self._files.write("summary")

    def costs(self, **values: Any) -> None:
        """Merge measured, machine-dependent numbers (seconds, bytes, ratios) into ``costs.json``."""
        _deep_merge(self._at_path("costs"), to_jsonable(values, "ctx.costs"))
        self._files.write("costs")

    def timer(self, name: str) -> Timer:
        """``with ctx.timer("fit") as t: ...``; ``t.seconds``, also summed into ``costs.json``
        under ``timers.<name>``."""
        def record(timer_name: str, seconds: float) -> None:
            timers = self._at_path("costs").setdefault("timers", {})
            timers[timer_name] = timers.get(timer_name, 0.0) + seconds
            self._files.write("costs")
        return Timer(name, record)

    def say(self, text: str) -> None:
        """One line of progress on stderr (nothing with --quiet)."""
        if not self.quiet:
            where = f"{'/'.join(self._path)}: " if self._path else ""
            tqdm.write(textwrap.fill(f"{where}{text}", shutil.get_terminal_size().columns,
                                     initial_indent="  ", subsequent_indent="    "),
                       file=sys.stderr)

    def progress(self, iterable: Iterable[T] | None = None, *, total: int | None = None,
                 desc: str | None = None) -> Any:
        """A tqdm bar on stderr; silent when stderr is not a terminal or with --quiet. The
        first bar of an experiment also tells the command that follows the run how far the
        experiment is (the bar of a showcase over its children does not)."""
        label = desc if not self._path else f"{'/'.join(self._path)}: {desc or ''}".rstrip(": ")
        disable = self.quiet or not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
        options = dict(total=total, desc=label, file=sys.stderr, disable=disable, leave=False,
                       dynamic_ncols=True)
        key, files = "/".join(self._path), self._files
        if files.listener is None or key in files.telling:
            return tqdm(iterable, **options)
        files.telling.add(key)

        def told(part: float) -> None:
            if self._path or not files.children:  # a showcase's own bar counts its children
                files.tell(key, part=part)

        return _ToldBar(iterable, told=told, **options)

    def compare(self, fn: Callable[[], T], *, disable: Iterable[str] | None = None,
                on_result: Callable[[str, T], Any] | None = None) -> dict[str, T]:
        """``{"blocked": fn(), "unblocked": fn() inside disable_blocks(*disable)}``, both from
        the random state ``compare`` was called in (global and ``ctx.generator``). ``disable``:
        fnmatch patterns, default ``ctx.disable_patterns``, empty: every block.
        ``on_result(variant, result)`` hears each variant as it ends. Warns when no matching
        block ran."""
        patterns = self.disable_patterns if disable is None else tuple(disable)
        if isinstance(disable, str):
            raise TypeError(f"ctx.compare: disable must be a sequence of patterns such as "
                            f"('em.*',), got the string {disable!r}")
        state, generator, results, seen = get_rng_state(), self.generator.get_state(), {}, {}
        for variant, off in ((BLOCKED, None), (UNBLOCKED, patterns)):
            set_rng_state(state)
            self.generator.set_state(generator)
            with record_blocks() as blocks, (
                    contextlib.nullcontext() if off is None else disable_blocks(*off)):
                results[variant] = fn()
            seen.update(dict.fromkeys(blocks))
            if on_result is not None:
                on_result(variant, results[variant])
        self._files.blocks_seen.update(seen)
        if patterns and not any(fnmatch.fnmatchcase(n, p) for n in seen for p in patterns):
            self._files.warn(f"ctx.compare: no named block matching {list(patterns)} ran "
                             f"(blocks seen: {list(seen) or 'none'}); blocked and unblocked "
                             f"compute the same thing")
        return results

    def save_artifact(self, name: str, obj: Any) -> Path:
        """Save data for figures: a dict of arrays/tensors → ``artifacts/<name>.npz``, anything
        JSON-able → ``artifacts/<name>.json``. Returns the path written."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"ctx.save_artifact: name must be letters, digits, '_', '-' or '.', "
                             f"got {name!r}")
        folder = self.run_dir.joinpath("artifacts", *self._path)
        values = list(obj.values()) if isinstance(obj, Mapping) else []
        if any(isinstance(v, (torch.Tensor, np.ndarray)) for v in values) and all(
                isinstance(v, (torch.Tensor, np.ndarray, np.generic, int, float, bool))
                for v in values):
            buffer = io.BytesIO()
            np.savez(buffer, **{str(k): np.asarray(_numpy(v)) for k, v in obj.items()})
            atomic_write_bytes(path := folder / f"{name}.npz", buffer.getvalue())
        else:
            atomic_write_json(path := folder / f"{name}.json",
                              to_jsonable(obj, f"ctx.save_artifact({name!r})"))
        return path

    def child(self, name: str, *, experiment: str | None = None, params: Any = None,
              dtype: torch.dtype | None = None,
              disable_patterns: Iterable[str] | None = None) -> RunContext:
        """A context writing into this run under ``name`` (metric keys ``"<name>/..."``,
        summary, costs and artifacts nested under ``name``), re-seeded with the run's seed.
        ``experiment`` and ``params`` go to meta.json; ``dtype``/``disable_patterns`` replace
        the parent's."""
        if not isinstance(name, str) or not _NAME_RE.match(name) or "." in name:
            raise ValueError(f"ctx.child: name must be letters, digits, '_' or '-', got {name!r}")
        key = "/".join([*self._path, name])
        if key in self._files.children:
            raise ValueError(f"ctx.child: a child named {name!r} exists already")
        dtype = self.dtype if dtype is None else dtype
        patterns = self.disable_patterns if disable_patterns is None else tuple(disable_patterns)
        self._files.children[key] = {
            "experiment": experiment or name, "disable_blocks": list(patterns),
            "params": to_jsonable(params, "ctx.child params") if params is not None else {},
            "dtype": str(dtype).removeprefix("torch.")}
        self._files.write_children()
        self._files.tell(key)
        return RunContext(run_dir=self.run_dir, seed=self.seed, device=self.device, dtype=dtype,
                          disable_patterns=patterns, quiet=self.quiet, params=params,
                          _files=self._files, _prefix=f"{self._prefix}{name}/",
                          _path=(*self._path, name))

    def child_done(self, name: str) -> None:
        """Say that child ``name`` has written everything it will (what --resume carries over)."""
        key = "/".join([*self._path, name])
        if key not in self._files.children:
            raise ValueError(f"ctx.child_done: no child named {name!r}; children: "
                             f"{list(self._files.children)}")
        self._files.children[key]["done"] = True
        self._files.write_children()
        self._files.tell(key, ended=True)

    def carried(self, name: str) -> bool:
        """Whether child ``name`` finished in the interrupted run this one resumes (skip it)."""
        return "/".join([*self._path, name]) in self._files.carried

