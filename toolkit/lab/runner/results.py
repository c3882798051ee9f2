"""Run directories: atomic file writes, collision-free run ids, and reading results back.

A run writes ``<output_dir>/<experiment>/<run_id>/``::

    config.toml     the resolved config (runnable again with `toolkit run`)
    meta.json       status (running|complete|failed|interrupted; read back as abandoned when a
                    run says running but its process is gone), versions, seed, argv, timings
    metrics.jsonl   one JSON object per logged step: {"step": 3, "blocked/train/loss": 0.1, ...}
    summary.json    final numbers, blocked and unblocked side by side (deterministic)
    costs.json      measured, machine-dependent numbers (seconds, bytes, speed ratios)
    artifacts/      extra arrays and JSON for figures (<name>.json or <name>.npz)
    figures/*.png   drawn by toolkit.lab.report from the files above
    report.html     self-contained report (images embedded), plus report.md

:class:`RunResults` reads these files; it is what an experiment's ``figures(run)`` receives.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import secrets
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.lab.runner import tomlio
from toolkit.lab.runner.errors import DamagedFile
from toolkit.lab.runner.liveness import abandoned_reason

__all__ = [
    "RunResults",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "find_runs",
    "new_run_dir",
    "read_toml",
    "to_jsonable",
]


# ----------------------------------------------------------------------------- writing


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace`` (all or nothing).

    An ``OSError`` (a full disk, a read-only folder) leaves ``path`` as it was, removes the
    temporary file and names ``path`` in its ``filename``.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, _FILE_MODE)  # mkstemp creates 0600; results are ordinary files
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(err, OSError) and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def to_jsonable(value: Any, where: str = "value") -> Any:
    """Convert tensors, numpy values, tuples, paths, dataclasses and models to plain JSON types."""
    import torch

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        return value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, (Path, torch.dtype, torch.device)):
        return str(value)
    if hasattr(value, "model_dump"):
        return to_jsonable(value.model_dump(mode="json"), where)
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return to_jsonable(value.to_dict(), where)
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), where)
    raise TypeError(f"{where}: cannot store {type(value).__name__} as JSON; convert it to a "
                    f"number, string, list or dict first")


def dumps_json(obj: Any) -> str:
    """Canonical JSON of results files: 2-space indent, keys in insertion order, newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=True) + "\n"


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, dumps_json(to_jsonable(obj, Path(path).name)))


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def new_run_dir(root: str | Path, experiment: str, seed: int, *, attempts: int = 20) -> Path:
    """Create ``<root>/<experiment>/<UTC time>__seed<k>__<random>`` atomically and return it.

    ``mkdir(exist_ok=False)`` either creates the directory or fails, so two runs (threads,
    processes or machines sharing a disk) never get the same directory; on a clash a new
    random suffix is drawn.
    """
    parent = Path(root) / experiment
    parent.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
        run_dir = parent / f"{stamp}__seed{seed}__{secrets.token_hex(3)}"
        try:
            run_dir.mkdir(exist_ok=False)
        except FileExistsError:
            continue
        return run_dir
    raise FileExistsError(f"new_run_dir: could not create a fresh directory in {parent} after "
                          f"{attempts} attempts")


# ----------------------------------------------------------------------------- reading


def read_json(path: Path) -> dict[str, Any]:
    """A results JSON file as a dict (``{}`` when absent); :class:`DamagedFile` when it is cut
    short, corrupt or not a JSON object."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedFile(path, f"not valid JSON ({err}); the file is cut short or corrupt") \
            from None
    if not isinstance(data, dict):
        raise DamagedFile(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_toml(path: Path) -> dict[str, Any]:
    """A results TOML file (``config.toml``) as a dict (``{}`` when absent);
    :class:`DamagedFile` when it cannot be parsed."""
    if not path.exists():
        return {}
    try:
        return tomlio.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomlio.TOMLDecodeError) as err:
        raise DamagedFile(path, f"not valid TOML ({err}); the file is cut short or corrupt") \
            from None


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut short by an interruption: keep what came before
    return rows


class RunResults:
    """Read-only view of a run directory (or of one child of a showcase run).

    Attributes are loaded lazily from the files. ``metrics`` is the list of logged rows,
    ``metric(key)`` one series, ``summary``/``costs`` the JSON files, ``config`` the resolved
    config, ``params`` its ``[params]``, ``meta`` the status file, ``artifact(name)`` an artifact.

    A child view (``run.child(name)``) sees metric keys without the ``"<name>/"`` prefix, the
    summary/costs nested under ``name`` and the artifacts in ``artifacts/<name>/``.

    ``replicates``: the runs of the same config with other seeds, this one first (a single run:
    ``[run]``). A report over seeds hands ``figures(run)`` the first seed's view with the others
    attached (:meth:`over_seeds`), so a figure can draw each seed or the spread across seeds.
    """

    def __init__(self, run_dir: str | Path, *, _child: str | None = None,
                 _replicates: tuple[Path, ...] = ()) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"RunResults: {self.run_dir} is not a run directory")
        self._child = _child
        self._replicates = tuple(Path(p) for p in _replicates)
        self._cache: dict[str, Any] = {}

    @classmethod
    def over_seeds(cls, run_dirs: Sequence[str | Path]) -> RunResults:
        """The first run's view with the other runs (other seeds, same config) as replicates."""
        if not run_dirs:
            raise ValueError("RunResults.over_seeds: run_dirs is empty; give at least one run")
        first, *others = run_dirs
        return cls(first, _replicates=tuple(Path(p) for p in others))

    @property
    def replicates(self) -> list[RunResults]:
        """This run and its replicates (other seeds), in seed order of the group."""
        return [self, *(RunResults(p, _child=self._child) for p in self._replicates)]

    @property
    def seed(self) -> int:
        return int(self.meta.get("seed", 0))

    def __repr__(self) -> str:
        child = f", child={self._child!r}" if self._child else ""
        return f"RunResults({str(self.run_dir)!r}{child})"

    @classmethod
    def load(cls, run_dir: str | Path) -> RunResults:
        return cls(run_dir)

    def _cached(self, key: str, fn: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    # -- whole run
    @property
    def meta(self) -> dict[str, Any]:
        return self._cached("meta", lambda: read_json(self.run_dir / "meta.json"))

    @property
    def status(self) -> str:
        """``complete``, ``failed``, ``interrupted``, ``running``, or ``abandoned``: a run whose
        ``meta.json`` says ``running`` but whose process is gone (see
        :mod:`toolkit.lab.runner.liveness`; decided when read, nothing is written)."""
        status = str(self.meta.get("status", "unknown"))
        if status == "running" and self.abandoned_reason is not None:
            return "abandoned"
        return status

    @property
    def abandoned_reason(self) -> str | None:
        """Why a run that says ``running`` is abandoned (``None`` when it is not)."""
        def reason() -> str | None:
            if self.meta.get("status") != "running":
                return None
            return abandoned_reason(self.meta, self.run_dir / "meta.json")
        return self._cached("abandoned_reason", reason)

    @property
    def last_step(self) -> int | None:
        """The step of the last row in ``metrics.jsonl`` (``None`` when nothing was logged)."""
        rows = self.all_metrics
        return rows[-1].get("step") if rows else None

    def status_line(self) -> str:
        """The status in words: ``abandoned (its process 123 on host is gone; last logged step
        4)``, ``failed (ValueError: ...)``, ``complete``."""
        status = self.status
        why = self.abandoned_reason if status == "abandoned" else self.meta.get("error")
        if status == "complete":
            return status
        step = self.last_step
        logged = "nothing logged" if step is None else f"last logged step {step}"
        why = " ".join(str(why or "").split())
        return f"{status} ({why}; {logged})" if why else f"{status} ({logged})"

    @property
    def children(self) -> list[str]:
        """Names of the child runs (a showcase run), in the order they ran."""
        if self._child is not None:
            return []
        return list(self.meta.get("children", {}))

    def child(self, name: str) -> RunResults:
        if name not in self.children:
            raise KeyError(f"RunResults.child: no child {name!r} in {self.run_dir}; "
                           f"children: {self.children}")
        return RunResults(self.run_dir, _child=name, _replicates=self._replicates)

    @property
    def root_config(self) -> dict[str, Any]:
        return self._cached("root_config", lambda: read_toml(self.run_dir / "config.toml"))

    # -- this view
    @property
    def config(self) -> dict[str, Any]:
        if self._child is None:
            return self.root_config
        info = self.meta.get("children", {}).get(self._child, {})
        config = {k: v for k, v in self.root_config.items() if k != "params"}
        config["experiment"] = info.get("experiment", self._child)
        for key in ("dtype", "disable_blocks"):
            if key in info:
                config[key] = info[key]
        config["params"] = info.get("params", {})
        return config

    @property
    def experiment(self) -> str:
        return str(self.config.get("experiment", ""))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.config.get("params", {}))

    @property
    def all_metrics(self) -> list[dict[str, Any]]:
        return self._cached("all_metrics", lambda: _read_metrics(self.run_dir / "metrics.jsonl"))

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Logged rows, ``{"step": k, key: value, ...}``; a child view strips its prefix."""
        if self._child is None:
            return self.all_metrics

        def strip() -> list[dict[str, Any]]:
            prefix = f"{self._child}/"
            rows = []
            for row in self.all_metrics:
                values = {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}
                if values:
                    rows.append({"step": row.get("step"), **values})
            return rows
        return self._cached("metrics", strip)

    def metric_keys(self) -> list[str]:
        """Every metric key, in order of first appearance (``step`` excluded)."""
        keys: dict[str, None] = {}
        for row in self.metrics:
            for key in row:
                if key != "step":
                    keys.setdefault(key, None)
        return list(keys)

    def metric(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one metric as numpy arrays (``None``/missing values → NaN)."""
        steps, values = [], []
        for row in self.metrics:
            if key in row:
                steps.append(row.get("step", len(steps)))
                value = row[key]
                values.append(math.nan if value is None else value)
        if not steps:
            import difflib

            close = difflib.get_close_matches(key, self.metric_keys(), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"RunResults.metric: no metric {key!r} in {self.run_dir}{hint}")
        return np.asarray(steps), np.asarray(values, dtype=float)

    def _nested(self, name: str) -> dict[str, Any]:
        data = self._cached(name, lambda: read_json(self.run_dir / f"{name}.json"))
        if self._child is None:
            return data
        value = data.get(self._child, {})
        return value if isinstance(value, dict) else {}

    @property
    def summary(self) -> dict[str, Any]:
        return self._nested("summary")

    @property
    def costs(self) -> dict[str, Any]:
        return self._nested("costs")

    @property
    def artifacts_dir(self) -> Path:
        base = self.run_dir / "artifacts"
        return base / self._child if self._child else base

    def artifact_names(self) -> list[str]:
        folder = self.artifacts_dir
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.iterdir() if p.suffix in (".json", ".npz"))

    def artifact(self, name: str) -> Any:
        """A saved artifact: the JSON value, or a dict of numpy arrays for ``.npz``."""
        folder = self.artifacts_dir
        if (folder / f"{name}.json").exists():
            return read_json(folder / f"{name}.json")
        if (folder / f"{name}.npz").exists():
            with np.load(folder / f"{name}.npz", allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        raise KeyError(f"RunResults.artifact: no artifact {name!r} in {folder}; "
                       f"available: {self.artifact_names()}")


def find_runs(root: str | Path) -> Iterator[Path]:
    """Every run directory (a folder with ``meta.json``) below ``root``, sorted."""
    root = Path(root)
    if (root / "meta.json").is_file():
        yield root
        return
    for meta in sorted(root.rglob("meta.json")):
        yield meta.parent
