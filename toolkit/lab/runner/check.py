"""Run folders checked against the results format of ``results/README.md`` (``toolkit check``).

A file is *damaged* when it is there but cannot be read as the format says: JSON or TOML cut short
or corrupt, not of the shape of its model in :mod:`toolkit.lab.schema`, nested too deep, a folder
or a FIFO in its place, too large, or a symbolic link leading out of the folder. A run killed in
the middle of a write may leave ``metrics.jsonl`` with its last line cut short: that is allowed
(the reader stops before it) unless the run says it completed.

:func:`check_run` and :func:`check_group` list what is damaged in one folder;
:func:`readable_runs` is :func:`~toolkit.lab.runner.results.find_runs` without the damaged runs, each
handed to a callback once (``toolkit compare`` warns and goes on); :func:`check_tree` walks a
results folder for ``toolkit check``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import shown
from toolkit.lab.runner.errors import DamagedFile
from toolkit.lab.runner.results import (
    OutsideFolder,
    find_runs,
    inside,
    read_json,
    read_json_value,
    read_metrics,
    read_npz,
    read_toml,
)
from toolkit.lab.schema import STATUSES, RunConfigFile, RunMeta, SummaryFile

__all__ = ["STATUSES", "check_group", "check_run", "check_tree", "links_out", "readable_runs"]


def _read(problems: list[DamagedFile], reader: Callable[..., Any], path: Path, *,
          required: bool = False, **kwargs: Any) -> Any:
    """``reader(path, **kwargs)``, or ``None`` with the damage appended to ``problems``."""
    if required and not os.path.lexists(path):
        problems.append(DamagedFile(path, "missing"))
        return None
    try:
        return reader(path, **kwargs)
    except DamagedFile as err:
        problems.append(err)
    except OSError as err:  # the folder itself vanished or cannot be listed
        problems.append(DamagedFile(path, f"cannot be read ({err.strerror or err})"))
    return None


def links_out(folder: str | Path) -> list[OutsideFolder]:
    """Every symbolic link below ``folder`` (links to folders are not entered) that leads
    outside it: the lab would read or write through it into someone else's files."""
    folder = Path(folder)
    found = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted([*dirs, *files]):
            path = Path(top) / name
            if path.is_symlink():
                try:
                    inside(folder, path)
                except OutsideFolder as err:
                    found.append(err)
    return found


def _artifacts(run_dir: Path, problems: list[DamagedFile]) -> None:
    folder = run_dir / "artifacts"
    for top, dirs, files in sorted(os.walk(folder, followlinks=False)):
        dirs.sort()
        for name in sorted([*files, *dirs]):  # a folder named like an artifact is damage
            path = Path(top) / name
            if path.suffix == ".json":  # an artifact may hold any JSON value
                _read(problems, read_json_value, path, root=run_dir)
            elif path.suffix == ".npz":
                _read(problems, read_npz, path, root=run_dir)


def check_run(run_dir: str | Path, *, deep: bool = False) -> list[DamagedFile]:
    """What is damaged in one run directory (empty: it reads as the format says): each file
    read as the readers read it (:mod:`toolkit.lab.runner.results`) and checked against its
    model in :mod:`toolkit.lab.schema`, and every link leading out of the folder.

    ``deep`` also reads every artifact (``artifacts/*.json``, ``*.npz``).
    """
    from toolkit.lab.runner.verdicts import read_findings

    run_dir = Path(run_dir)
    problems: list[DamagedFile] = list(links_out(run_dir))
    meta = _read(problems, read_json, run_dir / "meta.json", required=True, root=run_dir,
                 model=RunMeta)
    status = meta.get("status") if meta else None
    config_path = run_dir / "config.toml"
    config = _read(problems, read_toml, config_path, required=True, root=run_dir,
                   model=RunConfigFile)
    if meta and config and config.get("experiment") != meta.get("experiment"):
        problems.append(DamagedFile(config_path, f"experiment {config.get('experiment')!r} "
                                    f"differs from meta.json's {meta.get('experiment')!r}"))
    for name, model in (("summary.json", SummaryFile), ("costs.json", None)):
        _read(problems, read_json, run_dir / name, required=status == "complete",
              root=run_dir, model=model)
    if meta:  # the findings of an older run are read with its seed from meta.json
        _read(problems, lambda _path: read_findings(run_dir), run_dir / "findings.json")
    _read(problems, read_metrics, run_dir / "metrics.jsonl", root=run_dir,
          complete=status == "complete")
    if deep:
        _artifacts(run_dir, problems)
    return _unique(problems)


def _unique(problems: list[DamagedFile]) -> list[DamagedFile]:
    """Each damaged file once, with its first problem (a link found by the walk and again by
    the reader is one problem)."""
    seen: dict[Path, DamagedFile] = {}
    for problem in problems:
        seen.setdefault(problem.path, problem)
    return list(seen.values())


def check_group(folder: str | Path) -> list[DamagedFile]:
    """What is damaged in a seed group's folder (``group.json``, its config and findings,
    links leading out of it, and whether its member runs are there, beside it)."""
    from toolkit.lab.runner.seeds import SeedGroup
    from toolkit.lab.runner.verdicts import read_findings

    folder = Path(folder)
    problems: list[DamagedFile] = list(links_out(folder))
    group = _read(problems, SeedGroup, folder)
    if group is not None:
        try:
            members = group.run_dirs
        except DamagedFile as err:
            problems.append(err)
        else:
            problems += [DamagedFile(folder / "group.json", f"member run {shown(path)} is "
                                     f"missing") for path in members if not path.is_dir()]
    _read(problems, read_toml, folder / "config.toml", root=folder)
    _read(problems, lambda _path: read_findings(folder), folder / "findings.json")
    return _unique(problems)


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
        if os.path.lexists(folder / "group.json"):
            yield folder, "group", check_group(folder)
        else:
            yield folder, "run", check_run(folder, deep=deep)
