"""Run folders checked against the results format of ``results/README.md`` (``toolkit check``).

A file is *damaged* when it is there but cannot be read as the format says: JSON or TOML cut short
or corrupt, an object of the wrong shape, a status the format does not know. A run killed in the
middle of a write may leave ``metrics.jsonl`` with its last line cut short: that is allowed (the
reader stops before it) unless the run says it completed.

:func:`check_run` and :func:`check_group` list what is damaged in one folder;
:func:`readable_runs` is :func:`~toolkit.lab.runner.results.find_runs` without the damaged runs, each
handed to a callback once (``toolkit compare`` warns and goes on); :func:`check_tree` walks a
results folder for ``toolkit check``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolkit.lab.runner.errors import DamagedFile
from toolkit.lab.runner.results import find_runs, read_json, read_toml

__all__ = ["STATUSES", "check_group", "check_run", "check_tree", "readable_runs"]

#: The statuses meta.json may hold (``abandoned`` is decided when a run is read, never written).
STATUSES = ("running", "complete", "failed", "interrupted")


def _json(path: Path, problems: list[DamagedFile], *, required: bool = False
          ) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            problems.append(DamagedFile(path, "missing"))
        return None
    try:
        return read_json(path)
    except DamagedFile as err:
        problems.append(err)
    except OSError as err:
        problems.append(DamagedFile(path, f"cannot be read ({err.strerror or err})"))
    return None


def _expect(path: Path, data: dict[str, Any], key: str, kind: type,
            problems: list[DamagedFile]) -> None:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        problems.append(DamagedFile(path, f"{key!r} must be a {kind.__name__}, got {value!r}"))


def _metrics(path: Path, status: Any, problems: list[DamagedFile]) -> None:
    if not path.is_file():
        return
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        problems.append(DamagedFile(path, f"cannot be read as UTF-8 text ({err})"))
        return
    lines = text.split("\n")
    cut_short = lines[-1] != ""  # the last write did not finish its line
    if cut_short and status == "complete":
        problems.append(DamagedFile(path, "its last line is cut short (no newline), yet the run "
                                          "says it completed"))
        return
    for number, line in enumerate(lines, 1):
        if not line.strip() or (number == len(lines) and cut_short and status != "complete"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(DamagedFile(path, f"line {number} is not valid JSON ({err})"))
            return
        if not isinstance(row, dict) or isinstance(row.get("step"), bool) \
                or not isinstance(row.get("step"), int):
            problems.append(DamagedFile(path, f"line {number} is not a row with an integer "
                                              f"'step'"))
            return


def _artifacts(folder: Path, problems: list[DamagedFile]) -> None:
    import numpy as np

    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.suffix == ".json":
            _any_json(path, problems)
        elif path.suffix == ".npz":
            try:
                with np.load(path, allow_pickle=False) as data:
                    for key in data.files:
                        data[key]
            except Exception as err:
                problems.append(DamagedFile(path, f"not a readable .npz ({type(err).__name__}: "
                                                  f"{err})"))


def _any_json(path: Path, problems: list[DamagedFile]) -> None:
    """An artifact may hold any JSON value (a list, a number), not only an object."""
    try:
        json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        problems.append(DamagedFile(path, f"not valid JSON ({err})"))


def check_run(run_dir: str | Path, *, deep: bool = False) -> list[DamagedFile]:
    """What is damaged in one run directory (empty: it reads as the format says).

    ``deep`` also reads every artifact (``artifacts/*.json``, ``*.npz``).
    """
    run_dir = Path(run_dir)
    problems: list[DamagedFile] = []
    meta = _json(run_dir / "meta.json", problems, required=True)
    status = None
    if meta is not None:
        status = meta.get("status")
        if status not in STATUSES:
            problems.append(DamagedFile(run_dir / "meta.json", f"'status' must be one of "
                                        f"{', '.join(STATUSES)}, got {status!r}"))
        _expect(run_dir / "meta.json", meta, "experiment", str, problems)
        _expect(run_dir / "meta.json", meta, "seed", int, problems)
    config_path = run_dir / "config.toml"
    if not config_path.is_file():
        problems.append(DamagedFile(config_path, "missing"))
    else:
        try:
            config = read_toml(config_path)
        except DamagedFile as err:
            problems.append(err)
        else:
            _expect(config_path, config, "experiment", str, problems)
            _expect(config_path, config, "seed", int, problems)
            _expect(config_path, config, "params", dict, problems)  # written, empty or not
            if meta is not None and config.get("experiment") != meta.get("experiment"):
                problems.append(DamagedFile(config_path, f"experiment "
                                            f"{config.get('experiment')!r} differs from "
                                            f"meta.json's {meta.get('experiment')!r}"))
    for name in ("summary.json", "costs.json", "findings.json"):
        _json(run_dir / name, problems, required=status == "complete" and name != "findings.json")
    _metrics(run_dir / "metrics.jsonl", status, problems)
    if deep:
        _artifacts(run_dir / "artifacts", problems)
    return problems


def check_group(folder: str | Path) -> list[DamagedFile]:
    """What is damaged in a seed group's folder (``group.json``, its config and findings, and
    whether its member runs are there)."""
    folder = Path(folder)
    problems: list[DamagedFile] = []
    info = _json(folder / "group.json", problems, required=True)
    if info is not None:
        _expect(folder / "group.json", info, "runs", list, problems)
        runs = info.get("runs") if isinstance(info.get("runs"), list) else []
        for rel in runs:
            if not (folder / str(rel)).is_dir():
                problems.append(DamagedFile(folder / "group.json",
                                            f"member run {rel} is missing"))
    try:
        read_toml(folder / "config.toml")
    except DamagedFile as err:
        problems.append(err)
    _json(folder / "findings.json", problems)
    return problems


def readable_runs(root: str | Path, on_damaged: Callable[[DamagedFile, int], Any] | None = None
                  ) -> Iterator[Path]:
    """The run directories below ``root`` (:func:`~toolkit.lab.runner.results.find_runs`) that are
    not damaged. For each damaged one, ``on_damaged(first problem, number of problems)`` is
    called once and the run is left out; without ``on_damaged`` the first problem is raised."""
    for run_dir in find_runs(root):
        problems = check_run(run_dir)
        if not problems:
            yield run_dir
        elif on_damaged is None:
            raise problems[0]
        else:
            on_damaged(problems[0], len(problems))


def check_tree(root: str | Path, *, deep: bool = True
               ) -> Iterator[tuple[Path, str, list[DamagedFile]]]:
    """Every run directory and seed group below ``root`` (a folder holding ``meta.json``,
    ``group.json`` or ``config.toml``; hidden folders are skipped), with what is damaged in it:
    ``(folder, "run" | "group", problems)``, sorted by path."""
    root = Path(root)
    folders = {p.parent for name in ("meta.json", "group.json", "config.toml")
               for p in root.rglob(name)}
    for folder in sorted(folders):
        if any(part.startswith(".") for part in folder.relative_to(root).parts):
            continue
        if (folder / "group.json").is_file():
            yield folder, "group", check_group(folder)
        else:
            yield folder, "run", check_run(folder, deep=deep)
