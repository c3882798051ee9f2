"""Runs read back (:class:`RunResults`, what ``figures(run)`` receives), seed groups, and
``toolkit check``. A run runs exactly while its process holds ``<run_dir>/.lock`` (an ``flock``
the kernel drops however the process ends): a run saying ``running`` whose lock can be taken is
*abandoned*. A file is *damaged* when it does not read as its model says or disagrees with the
run's record."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import filelock
import numpy as np

from toolkit._utils.formatting import shown
from toolkit.lab.errors import DamagedFile, OutsideFolder
from toolkit.lab.results.files import (
    inside,
    read_json,
    read_json_value,
    read_metrics,
    read_npz,
    read_record,
    walk,
)
from toolkit.lab.results.schema import (
    ConfigFile,
    FindingsFile,
    GroupFile,
    RunConfig,
    RunMeta,
    SummaryFile,
    summary_problem,
)

LOCK = ".lock"
GROUP_FILE = "group.json"


def lock_of(run_dir: str | Path, timeout: float = 0) -> filelock.FileLock:
    """The lock a run's process holds while it runs; the file stays when it is released."""
    return filelock.FileLock(Path(run_dir) / LOCK, timeout=timeout, thread_local=False,
                             preserve_lock_file=True)


def _nobody_holds(run_dir: Path) -> str | None:
    """Why nothing runs in ``run_dir``, or ``None`` when its process holds the lock."""
    if not os.path.lexists(run_dir / LOCK):
        return "it holds no lock: its process is gone, or the folder was copied"
    lock = lock_of(run_dir)
    try:
        lock.acquire()
    except filelock.Timeout:
        return None
    except OSError as err:
        return f"its lock cannot be taken ({err.strerror or err})"
    lock.release()
    return "nothing holds its lock: its process is gone"


class RunResults:
    """Read-only view of a run directory, each file checked on first use; a child view
    (``run.child(name)``, a part of a showcase run) sees its own keys, summary and artifacts.
    ``replicates``: this run and the runs of its config with other seeds."""

    def __init__(self, run_dir: str | Path, *, _child: str | None = None,
                 _replicates: Sequence[str | Path] = ()) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"RunResults: {shown(self.run_dir)} is not a run directory")
        self._child = _child
        self._replicates = tuple(Path(p) for p in _replicates)

    @property
    def replicates(self) -> list[RunResults]:
        return [self, *(RunResults(p, _child=self._child) for p in self._replicates)]

    @cached_property
    def meta(self) -> dict[str, Any]:
        return read_json(self.run_dir / "meta.json", root=self.run_dir, model=RunMeta)

    @property
    def seed(self) -> int:
        return int(self.meta.get("seed", 0))

    @property
    def status(self) -> str:
        """``complete``, ``failed``, ``interrupted``, ``running``, or ``abandoned``."""
        status = str(self.meta.get("status", "unknown"))
        return "abandoned" if status == "running" and self.abandoned_reason else status

    @cached_property
    def abandoned_reason(self) -> str | None:
        """Why a run that says ``running`` is abandoned (``None`` when it is not)."""
        if self.meta.get("status") != "running" or (why := _nobody_holds(self.run_dir)) is None:
            return None
        del self.meta  # it may have ended meanwhile: its last write came first
        if self.meta.get("status") != "running":
            return None
        pid, host = self.meta.get("pid"), self.meta.get("host")
        return why.replace("its process", f"its process {pid} on {host}" if pid and host
                           else "its process", 1)

    @property
    def last_step(self) -> int | None:
        return self.all_metrics[-1].get("step") if self.all_metrics else None

    def status_line(self) -> str:
        """``complete``, ``failed (ValueError: ...; nothing logged)``, ``abandoned (...)``."""
        if (status := self.status) == "complete":
            return status
        why = self.abandoned_reason if status == "abandoned" else self.meta.get("error")
        why = " ".join(str(why or "").split())
        step = self.last_step
        logged = "nothing logged" if step is None else f"last logged step {step}"
        return f"{status} ({why + '; ' if why else ''}{logged})"

    @property
    def children(self) -> list[str]:
        """Names of the child runs (a showcase run), in the order they ran."""
        return [] if self._child is not None else list(self.meta.get("children", {}))

    def child(self, name: str) -> RunResults:
        if name not in self.children:
            raise KeyError(f"RunResults.child: no child {name!r} in {self.run_dir}; "
                           f"children: {self.children}")
        return RunResults(self.run_dir, _child=name, _replicates=self._replicates)

    @cached_property
    def root_config(self) -> dict[str, Any]:
        return read_json(self.run_dir / "config.toml", root=self.run_dir, model=RunConfig)

    @property
    def config(self) -> dict[str, Any]:
        if self._child is None:
            return self.root_config
        info = self.meta.get("children", {}).get(self._child, {})
        return {**{k: v for k, v in self.root_config.items() if k != "params"},
                **{k: info[k] for k in ("experiment", "dtype", "disable_blocks")
                   if info.get(k) is not None}, "params": info.get("params", {})}

    @property
    def experiment(self) -> str:
        return str(self.config.get("experiment", ""))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.config.get("params", {}))

    @cached_property
    def all_metrics(self) -> list[dict[str, Any]]:
        return read_metrics(self.run_dir / "metrics.jsonl", root=self.run_dir)

    @cached_property
    def metrics(self) -> list[dict[str, Any]]:
        """Logged rows, ``{"step": k, key: value, ...}``; a child view strips its prefix."""
        if self._child is None:
            return self.all_metrics
        prefix = f"{self._child}/"
        rows = ({k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}
                | {"step": row.get("step")} for row in self.all_metrics)
        return [row for row in rows if len(row) > 1]

    def metric_keys(self) -> list[str]:
        """Every metric key, in order of first appearance (``step`` left out)."""
        return list(dict.fromkeys(k for row in self.metrics for k in row if k != "step"))

    def metric(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one metric as numpy arrays (``None`` values: NaN)."""
        rows = [row for row in self.metrics if key in row]
        if not rows:
            close = difflib.get_close_matches(key, self.metric_keys(), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"RunResults.metric: no metric {key!r} in {self.run_dir}{hint}")
        return (np.asarray([row["step"] for row in rows]),
                np.asarray([math.nan if row[key] is None else row[key] for row in rows],
                           dtype=float))

    def _table(self, name: str) -> dict[str, Any]:
        """``<name>.json``, or a child view's own table in it (a summary: of a run's shape)."""
        path, model = self.run_dir / f"{name}.json", SummaryFile if name == "summary" else None
        value = read_json(path, root=self.run_dir, model=model)
        if self._child is None:
            return value
        value = value.get(self._child)
        value = value if isinstance(value, dict) else {}
        if model and (problem := summary_problem(value)):
            raise DamagedFile(path, f"{self._child}: {problem}")
        return value

    summary = cached_property(lambda self: self._table("summary"))
    costs = cached_property(lambda self: self._table("costs"))

    @property
    def artifacts_dir(self) -> Path:
        base = self.run_dir / "artifacts"
        return base / self._child if self._child else base

    def artifact_names(self) -> list[str]:
        folder = inside(self.run_dir, self.artifacts_dir)
        return sorted(p.stem for p in folder.glob("*") if p.suffix in (".json", ".npz"))

    def artifact(self, name: str) -> Any:
        """A saved artifact: the JSON value, or a dict of numpy arrays for ``.npz``."""
        for suffix, read in ((".json", read_json_value), (".npz", read_npz)):
            path = self.artifacts_dir / f"{name}{suffix}"
            if os.path.lexists(path):
                return read(path, root=self.run_dir)
        raise KeyError(f"RunResults.artifact: no artifact {name!r} in {self.artifacts_dir}; "
                       f"available: {self.artifact_names()}")


def is_group(path: str | Path) -> bool:
    """Whether ``path`` holds a ``group.json`` (a damaged one makes a damaged group)."""
    return os.path.lexists(Path(path) / GROUP_FILE)


class SeedGroup:
    """A seed group read back: its member runs beside it, in seed order."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not is_group(self.path):
            raise FileNotFoundError(f"SeedGroup: {shown(self.path)} has no {GROUP_FILE}")
        self.info: dict[str, Any] = read_json(self.path / GROUP_FILE, root=self.path,
                                              model=GroupFile)

    @property
    def seeds(self) -> list[int]:
        return list(self.info["seeds"])

    @property
    def run_dirs(self) -> list[Path]:
        """The member runs, resolved (one outside the group's parent: ``OutsideFolder``)."""
        try:
            return [inside(self.path.parent, self.path / rel) for rel in self.info["runs"]]
        except OutsideFolder:
            raise OutsideFolder(self.path / GROUP_FILE, f"a member run lies outside "
                                f"{shown(self.path.parent)}, where a group's runs are; the lab "
                                f"reads only inside its folder") from None

    def results(self) -> RunResults:
        """The first seed's run with the other seeds as its replicates."""
        if missing := [shown(p) for p in self.run_dirs if not p.is_dir()]:
            raise DamagedFile(self.path / GROUP_FILE, f"member runs are missing: "
                                                      f"{', '.join(missing)}")
        return RunResults(self.run_dirs[0], _replicates=self.run_dirs[1:])


def find_runs(root: str | Path) -> Iterator[Path]:
    """Every run directory (a folder with ``meta.json``) below ``root``, hidden ones left out."""
    for folder, dirs, files in walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if "meta.json" in files or "meta.json" in dirs:  # a folder in its place: damaged
            dirs[:] = []  # a run holds no runs
            yield folder


def _read(problems: list[DamagedFile], read: Callable[..., Any], path: Path, *,
          required: bool = False, **kwargs: Any) -> Any:
    """``read(path, **kwargs)``, or ``None`` with the damage appended to ``problems``."""
    try:
        if required and not os.path.lexists(path):
            raise DamagedFile(path, "missing")
        return read(path, **kwargs)
    except DamagedFile as err:
        problems.append(err)
    except OSError as err:  # the folder itself vanished or cannot be listed
        problems.append(DamagedFile(path, f"cannot be read ({err.strerror or err})"))
    return None


def links_out(folder: str | Path) -> list[OutsideFolder]:
    """Every symbolic link below ``folder`` (not entered) that leads outside it."""
    found = []
    for top, dirs, files in walk(folder):
        for link in (top / name for name in [*dirs, *files] if (top / name).is_symlink()):
            try:
                inside(folder, link)
            except OutsideFolder as err:
                found.append(err)
    return found


def check_run(run_dir: str | Path, *, deep: bool = False) -> list[DamagedFile]:
    """What is damaged in one run directory, each file once; ``deep`` reads the artifacts too.
    A complete run holds its summary, findings and as many metrics rows as it logged."""
    run_dir = Path(run_dir)
    problems: list[DamagedFile] = list(links_out(run_dir))

    def read(name: str, reader: Callable[..., Any] = read_record, **kwargs: Any) -> Any:
        return _read(problems, reader, run_dir / name, root=run_dir, **kwargs)

    meta = read("meta.json", model=RunMeta, required=True)
    complete = meta is not None and meta.status == "complete"
    config = read("config.toml", model=RunConfig, required=True)
    if meta and config and config.experiment != meta.experiment:
        problems.append(DamagedFile(run_dir / "config.toml", f"experiment {config.experiment!r} "
                                    f"differs from meta.json's {meta.experiment!r}"))
    read("summary.json", read_json, model=SummaryFile, required=complete)
    read("costs.json", read_json, required=complete)
    found = read("findings.json", model=FindingsFile, required=complete)
    if meta and found and found.seeds != [meta.seed]:
        problems.append(DamagedFile(run_dir / "findings.json", f"its seeds {found.seeds} are not "
                                    f"the run's seed {meta.seed}"))
    rows = read("metrics.jsonl", read_metrics, complete=complete)
    if complete and rows is not None and len(rows) != meta.n_logged:
        problems.append(DamagedFile(run_dir / "metrics.jsonl", f"holds {len(rows)} rows where "
                                    f"meta.json records {meta.n_logged} logged"))
    lock = run_dir / LOCK
    if os.path.lexists(lock) and not lock.is_file() and not lock.is_symlink():
        problems.append(DamagedFile(lock, "is not a file: a run's lock is an empty file"))
    for top, dirs, files in walk(run_dir / "artifacts") if deep else ():
        for name in [*files, *dirs]:  # any JSON value; a folder in its place is damage
            reader = {".json": read_json_value, ".npz": read_npz}.get(Path(name).suffix)
            if reader is not None:
                _read(problems, reader, top / name, root=run_dir)
    return _unique(problems)


def _unique(problems: list[DamagedFile]) -> list[DamagedFile]:
    """Each damaged file once, with its first problem."""
    first: dict[Path, DamagedFile] = {}
    return [first.setdefault(p.path, p) for p in problems if p.path not in first]


def check_group(folder: str | Path) -> list[DamagedFile]:
    """What is damaged in a seed group's folder, and whether its member runs are beside it."""
    folder = Path(folder)
    problems: list[DamagedFile] = list(links_out(folder))
    _read(problems, read_json, folder / GROUP_FILE, model=GroupFile, root=folder)
    if not problems:  # and its member runs, beside it
        _read(problems, lambda _: SeedGroup(folder).results(), folder / GROUP_FILE)
    for name, model in (("config.toml", ConfigFile), ("findings.json", FindingsFile)):
        _read(problems, read_record, folder / name, model=model, required=True, root=folder)
    return _unique(problems)


def readable_runs(root: str | Path, on_damaged: Callable[[DamagedFile, int], Any] | None = None
                  ) -> Iterator[Path]:
    """The undamaged runs below ``root``; ``on_damaged(first, count)`` or raise."""
    for run_dir in find_runs(root):
        if not (problems := check_run(run_dir)):
            yield run_dir
        elif on_damaged is None:
            raise problems[0]
        else:
            on_damaged(problems[0], len(problems))


def check_tree(root: str | Path) -> Iterator[tuple[Path, str, list[DamagedFile]]]:
    """``(folder, "run" | "group", problems)`` for every run and seed group below ``root``."""
    for folder, dirs, files in walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        names = {*dirs, *files}  # a folder in a file's place: damaged
        if GROUP_FILE in names:
            yield folder, "group", check_group(folder)
        elif "meta.json" in names or "config.toml" in names:
            yield folder, "run", check_run(folder, deep=True)
        else:
            continue
        dirs[:] = []  # a run or a group holds no others
