"""``toolkit check``: a file is *damaged* when it cannot be read as its model of the results
format says (cut short, corrupt, too deep or large, not a file, a link leading out), or when
it disagrees with the run's record (a complete run holds its summary, its findings and as many
metrics rows as it logged; only a run that did not complete may end with a line cut short).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
)
from toolkit.lab.results.view import GROUP_FILE, LOCK, SeedGroup, find_runs

__all__ = ["check_group", "check_run", "check_tree", "links_out", "readable_runs"]


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
    """What is damaged in one run directory, each file once (empty: it reads as the format and
    its record say); ``deep`` also reads every artifact."""
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
    for problem in problems:
        first.setdefault(problem.path, problem)
    return list(first.values())


def check_group(folder: str | Path) -> list[DamagedFile]:
    """What is damaged in a seed group's folder: ``group.json``, its config and findings, links
    leading out of it, and whether its member runs are there, beside it."""
    folder = Path(folder)
    problems: list[DamagedFile] = list(links_out(folder))
    _read(problems, read_json, folder / GROUP_FILE, model=GroupFile, root=folder)
    if not problems:
        try:
            problems += [DamagedFile(folder / GROUP_FILE, f"member run {shown(path)} is "
                                     f"missing") for path in SeedGroup(folder).run_dirs
                         if not path.is_dir()]
        except DamagedFile as err:
            problems.append(err)
    for name, model in (("config.toml", ConfigFile), ("findings.json", FindingsFile)):
        _read(problems, read_record, folder / name, model=model, required=True, root=folder)
    return _unique(problems)


def readable_runs(root: str | Path, on_damaged: Callable[[DamagedFile, int], Any] | None = None
                  ) -> Iterator[Path]:
    """The run directories below ``root`` that are not damaged; for each damaged one,
    ``on_damaged(first problem, number of problems)`` (without it, the first is raised)."""
    for run_dir in find_runs(root):
        problems = check_run(run_dir)
        if not problems:
            yield run_dir
        elif on_damaged is None:
            raise problems[0]
        else:
            on_damaged(problems[0], len(problems))


def check_tree(root: str | Path) -> Iterator[tuple[Path, str, list[DamagedFile]]]:
    """Every run directory and seed group below ``root`` (hidden folders skipped), sorted by
    path, with what is damaged in it: ``(folder, "run" | "group", problems)``."""
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
