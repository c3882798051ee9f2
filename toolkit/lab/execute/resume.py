"""``--resume``: which planned runs exist already (matched by the hash of ``config.toml``),
and a claim so two resumes never run one twice.

What a run's last command left decides: a run whose newest folder is interrupted is resumed
from it, whatever complete runs of the same request an earlier command left beside it; the
resumed folder is removed once its finished parts are carried into the new run, so that no
folder stays ``interrupted``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import filelock

from toolkit.lab.errors import DamagedFile
from toolkit.lab.plan.config import Plan, RunSpec
from toolkit.lab.results.files import atomic_write_bytes, inside, read_json
from toolkit.lab.results.schema import RunConfig
from toolkit.lab.results.view import RunResults, check_run, lock_of

__all__ = ["LOCKS", "ResumePlan", "carry_over", "claimed", "done_as_requested", "plan_resume",
           "replace_interrupted"]

#: ``<output_dir>/<experiment>/.locks/<identity>.lock``: held while a resumed run is started
LOCKS = ".locks"

if TYPE_CHECKING:  # the context imports torch; "is everything done?" answers without it
    from toolkit.lab.execute.context import RunFiles


@dataclass
class ResumePlan:
    """``todo``: the runs to start (each resuming its latest interrupted run), and the folders
    ``done`` (complete, checked), ``running`` (locked) and ``damaged`` (unreadable)."""

    todo: list[RunSpec] = field(default_factory=list)
    done: list[Path] = field(default_factory=list)
    running: list[Path] = field(default_factory=list)
    damaged: list[DamagedFile] = field(default_factory=list)


def _run_dirs(places: Iterable[tuple[str | Path, str]]) -> Iterator[Path]:
    """The run folders of each ``<root>/<experiment>`` (a link out of ``root`` is refused)."""
    for root, experiment in dict.fromkeys(places):
        parent = Path(root) / experiment
        inside(root, parent)  # a link to someone else's runs is refused, not resumed
        for run_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
            if not run_dir.name.startswith(".") and os.path.lexists(run_dir / "meta.json"):
                yield run_dir


def _newest(runs: dict[Path, RunResults]) -> Path | None:
    """The run folder made last (by the start its ``meta.json`` records, then its name)."""
    return max(runs, key=lambda d: (str(runs[d].meta.get("started") or ""), d.name),
               default=None)


def plan_resume(specs: Sequence[RunSpec]) -> ResumePlan:
    """Match each planned run with the runs under its output folder: the newest, when it was
    interrupted, is resumed; else a complete one is done, a running one left alone."""
    plan, index = ResumePlan(), dict[str, list[Path]]()
    for run_dir in _run_dirs((s.config.output_dir, s.config.experiment) for s in specs):
        try:
            raw = read_json(run_dir / "config.toml", root=run_dir)
            index.setdefault(RunConfig.model_validate(raw).identity(), []).append(run_dir)
        except DamagedFile as err:
            plan.damaged.append(err)
        except ValueError as err:  # a config.toml of the wrong shape
            plan.damaged.append(DamagedFile(run_dir / "config.toml", str(err).splitlines()[0]))
    for spec in specs:
        found = index.get(spec.config.identity(), [])
        status, read = dict[Path, str](), dict[Path, RunResults]()
        for run_dir in found:
            try:
                read[run_dir] = RunResults(run_dir)
                status[run_dir] = read[run_dir].status
            except DamagedFile as err:
                plan.damaged.append(err)
        newest = _newest(read)
        if newest is not None and status[newest] == "interrupted":  # what the last command left
            plan.todo.append(spec if spec.resumes else dataclasses.replace(spec,
                                                                           resumes=str(newest)))
            continue
        checked = {d: check_run(d) for d in found if status.get(d) == "complete"}
        readable = [d for d, problems in checked.items() if not problems]
        running = [d for d in found if status.get(d) == "running"]
        if readable:
            plan.done.append(readable[-1])
        elif running:
            plan.running.append(running[-1])
        else:
            plan.damaged += [problems[0] for problems in checked.values()]
            stopped = [d for d in found if status.get(d) == "interrupted"]
            plan.todo.append(spec if not stopped or spec.resumes else
                             dataclasses.replace(spec, resumes=str(stopped[-1])))
    return plan


def done_as_requested(plans: Sequence[Plan]) -> list[Path] | None:
    """The complete, checked run of every run the ``plans`` give, matched by its recorded
    request without importing an experiment; ``None`` when one is missing or when the newest
    run of a request was interrupted (the command that made it is resumed)."""
    wanted: dict[str, None] = {}
    for plan in plans:
        keys = plan.requests()
        if not keys:
            return None
        wanted.update(dict.fromkeys(keys))
    found: dict[str, Path] = {}
    runs: dict[str, dict[Path, RunResults]] = {}
    for run_dir in _run_dirs((p.file.output_dir, p.file.experiment) for p in plans):
        with contextlib.suppress(DamagedFile):
            run = RunResults(run_dir)
            key = run.meta.get("request")
            if key in wanted:
                runs.setdefault(key, {})[run_dir] = run
                if run.meta.get("status") == "complete" and not check_run(run_dir):
                    found[key] = run_dir
    if len(found) < len(wanted) or any(
            runs[key][newest].meta.get("status") == "interrupted"
            for key in runs if (newest := _newest(runs[key])) is not None):
        return None
    return [found[key] for key in wanted]


@contextlib.contextmanager
def claimed(todo: Sequence[RunSpec]) -> Iterator[list[RunSpec]]:
    """The runs of ``todo`` this process may start, each one's claim (``.locks/<identity>.lock``,
    never waited for) held until the ``with`` ends; the others are named on stderr."""
    with contextlib.ExitStack() as stack:
        mine = []
        for spec in todo:
            folder = Path(spec.config.output_dir) / spec.config.experiment / LOCKS
            inside(spec.config.output_dir, folder)
            try:  # the lock makes its folder
                stack.enter_context(filelock.FileLock(
                    folder / f"{spec.config.identity()}.lock", timeout=0, thread_local=False,
                    preserve_lock_file=True))
                mine.append(spec)
            except filelock.Timeout:
                _skipped(spec, "running now in another process")
        again = {id(s) for s in plan_resume(mine).todo} if mine else set()
        for spec in mine:
            if id(spec) not in again:
                _skipped(spec, "complete or running since it was planned")
        yield [s for s in mine if id(s) in again]


def carry_over(old: Path, files: RunFiles) -> bool:
    """Copy into a new run the files of the children that finished (``ctx.child_done``) in
    the interrupted run ``old``; whether ``old`` was read (a damaged file carries nothing
    over)."""
    try:
        run = RunResults(old)
        children = {k: v for k, v in run.meta.get("children", {}).items()
                    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_\-]*", k)}  # one plain name
        done = [k for k, v in children.items() if isinstance(v, dict) and v.get("done") is True]
        summary, costs, rows = run.summary, run.costs, run.all_metrics
    except DamagedFile as err:
        print(f"toolkit: warning: {err}; {old.name} is not resumed", file=sys.stderr)
        return False
    if not done:
        return True
    left = [k for k in children if k not in done]
    files.blocks_seen.update(dict.fromkeys(run.meta.get("blocks_seen", [])))
    for row in rows:
        if len(row) > 1 and all(k == "step" or k.split("/", 1)[0] in done for k in row):
            files.log(row, next(k for k in row if k != "step").split("/", 1)[0] + "/")
    files.summary.update({k: summary[k] for k in done if k in summary})
    files.costs.update({k: ({n: t for n, t in v.items() if n not in left}
                            if isinstance(v, dict) and k not in done else v)
                        for k, v in costs.items() if k not in left})
    for name in done:
        files.children[name] = children[name]
        top = old / "artifacts" / name
        links = top.parent.is_symlink() or top.is_symlink()
        for folder, _, names in [] if links else os.walk(top):  # links not followed
            for file in names:
                path = Path(folder, file)
                if path.is_file() and not path.is_symlink():
                    atomic_write_bytes(files.run_dir / path.relative_to(old), path.read_bytes())
    files.carried = done
    files.write("summary", "costs")
    files.write_children()
    return True


def replace_interrupted(old: Path, new: Path) -> None:
    """Remove the interrupted run ``old`` once ``new`` carries what it kept: a folder beside
    ``new``, never a link, only while nothing runs in it (its lock taken); a warning when it
    cannot be removed."""
    if old.is_symlink() or old.resolve().parent != new.resolve().parent:
        return
    try:
        with lock_of(old):
            if RunResults(old).meta.get("status") != "interrupted":
                return
            shutil.rmtree(old)
    except (filelock.Timeout, DamagedFile, OSError) as err:
        print(f"toolkit: warning: {old}: not removed ({err}); {new.name} replaces it",
              file=sys.stderr)


def _skipped(spec: RunSpec, why: str) -> None:
    print(f"toolkit: warning: {spec.config.experiment} seed {spec.config.seed}: {why}; not "
          f"started twice", file=sys.stderr, flush=True)
