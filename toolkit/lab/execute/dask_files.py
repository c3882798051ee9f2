"""What a Dask worker sends back is data: checked, then written inside the run's folder only.

A worker returns a run as a plain map (status, exit code, error, duration, worker address, run
id) with every file of the run as ``{relative path: bytes}``; the client decodes it as msgpack
only (never a pickle). Before anything is written the client checks it (:func:`checked`):

- the map has its keys, each of its type, a status the results format knows, a run id that is
  one folder name;
- every path is relative, in POSIX form, with no ``..``, ``.`` or empty part, no backslash and
  no NUL, so that no file can land outside the run's folder;

then writes the files into a hidden staging folder beside the run's final place and reads them
back as ``toolkit check`` would (:func:`~toolkit.lab.results.check.check_run`, artifacts included:
JSON and TOML parsed, ``.npz`` loaded with ``allow_pickle=False``) before renaming it into place.
A map that fails either check is refused: nothing of it is kept, and the run is written as
``failed`` with the reason (:class:`Refused`).

On the worker, :func:`files_of` collects a run's files and refuses a symbolic link among them
(whose target would lie outside the run's folder).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from toolkit.lab.results.check import check_run
from toolkit.lab.results.files import (
    atomic_write_json,
    atomic_write_text,
    inside,
    new_run_dir,
    read_json,
    utc_now,
)
from toolkit.lab.results.schema import STATUSES, RunConfig, RunMeta

__all__ = ["Refused", "checked", "files_of", "write_marked", "write_run"]

_RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,), "status": (str,), "exit_code": (int,), "error": (str, type(None)),
    "duration_s": (int, float, type(None)), "files": (dict,), "worker": (str,)}


class Refused(ValueError):
    """What a worker sent cannot be taken as a run's files; the message says why."""


def files_of(run_dir: Path) -> dict[str, bytes]:
    """Every file under ``run_dir``, by its path relative to it, in sorted order; a symbolic
    link among them is :class:`Refused`."""
    files = {}
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink():
            raise Refused(f"{path.relative_to(run_dir).as_posix()} is a symbolic link (to "
                          f"{os.readlink(path)}): a run keeps its files inside its folder")
        if path.is_file():
            files[path.relative_to(run_dir).as_posix()] = path.read_bytes()
    return files


def _path_problem(rel: Any) -> str | None:
    if not isinstance(rel, str):
        return f"a file name that is not text ({type(rel).__name__})"
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or re.match(r"^[A-Za-z]:",
                                                                                  rel):
        return f"the path {rel!r} is not relative to the run's folder"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return f"the path {rel!r} leads outside the run's folder (or has an empty part)"
    return None


def checked(info: Any, *, keys: tuple[str, ...] = tuple(_TYPES)) -> dict[str, Any]:
    """``info`` as a worker's run, or :class:`Refused` naming the first thing wrong with it
    (``keys``: those it must hold; an interrupted run's partial files carry only ``run_id`` and
    ``files``)."""
    if not isinstance(info, dict):
        raise Refused(f"it sent a {type(info).__name__}, not a map of the run")
    for key in keys:
        value = info.get(key)
        if not isinstance(value, _TYPES[key]) or (key == "exit_code" and isinstance(value, bool)):
            raise Refused(f"its {key!r} is {type(value).__name__}, expected "
                          f"{' or '.join(t.__name__ for t in _TYPES[key])}")
    if "status" in keys and info["status"] not in STATUSES[1:]:
        raise Refused(f"its status {str(info['status'])[:40]!r} is not one of "
                      f"{', '.join(STATUSES[1:])}")
    if not _RUN_ID.match(info["run_id"]) or ".." in info["run_id"]:
        raise Refused(f"its run id {info['run_id']!r} is not one folder name")
    for rel, data in info["files"].items():
        problem = _path_problem(rel)
        if problem:
            raise Refused(problem)
        if not isinstance(data, bytes):
            raise Refused(f"the contents of {rel} are {type(data).__name__}, not bytes")
    for name in ("config.toml", "meta.json"):
        if name not in info["files"]:
            raise Refused(f"it sent no {name}")
    return info


def write_run(config: RunConfig, run_id: str, files: dict[str, bytes]) -> Path:
    """Write a run's files (checked with :func:`checked`) as
    ``<output_dir>/<experiment>/<run_id>/``, all at once; :class:`Refused` when they do not read
    as the results format says, with nothing left behind."""
    parent = Path(config.output_dir) / config.experiment
    inside(config.output_dir, parent)  # a link in the output folder is refused, not followed
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_id}.", suffix=".partial", dir=parent))
    try:
        for rel, data in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:  # a path given twice, or a file in a folder's way
                out.write(data)
        problems = check_run(staging, deep=True)
        if problems:
            raise Refused(f"{problems[0].path.relative_to(staging).as_posix()}: "
                          f"{problems[0].problem}")
        final = parent / run_id
        if final.exists():  # the same id from another machine: keep both, under a new suffix
            final = parent / f"{run_id.rsplit('__', 1)[0]}__{secrets.token_hex(3)}"
            meta = read_json(staging / "meta.json", root=staging)
            meta["run_id"] = final.name
            atomic_write_json(staging / "meta.json", meta, root=staging)
        os.rename(staging, final)
    except BaseException as err:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(err, (FileExistsError, NotADirectoryError, IsADirectoryError)) \
                and staging in Path(err.filename or "/").parents:
            raise Refused(f"its files do not form one folder ({err.strerror}: "
                          f"{Path(err.filename).relative_to(staging).as_posix()})") from None
        raise
    return final


def write_marked(config: RunConfig, status: str, error: str, worker: str | None) -> Path:
    """A run directory for a run whose files never came back: config and meta only."""
    run_dir = new_run_dir(config.output_dir, config.experiment, config.seed)
    atomic_write_text(run_dir / "config.toml", config.to_toml(), root=run_dir)
    atomic_write_json(run_dir / "meta.json", RunMeta(
        status=status, experiment=config.experiment, run_id=run_dir.name, seed=config.seed,
        executor={"kind": "dask", "worker": worker}, ended=utc_now().isoformat(), error=error),
        root=run_dir)
    return run_dir
