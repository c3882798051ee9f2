"""Seed groups: the runs of one config over several seeds, and their findings put together.

``toolkit run CONFIG --seeds 0-4`` (or ``seeds = [0, 1, 2]`` in the file) makes one run
directory per seed, as before, and then one *seed group* next to them::

    results/<experiment>/<UTC time>__seeds0-4__<random>/
        group.json      the member runs (relative paths), their seeds, the wall time
        config.toml     the config with its seeds: `toolkit run` runs the group again
        findings.json   every finding over the seeds (toolkit.lab.runner.verdicts), with each
                        seed's own finding kept
        findings.md     the same, readable
        report.html, report.md, figures/   drawn by toolkit.lab.report (figures show each seed)

Runs belong to one group when their ``config.toml`` agree on everything but the seed.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown
from toolkit.lab.runner import tomlio
from toolkit.lab.runner.results import (
    RunResults,
    atomic_write_json,
    atomic_write_text,
    inside,
    read_json,
    read_toml,
    utc_now,
)
from toolkit.lab.schema import GROUP_FILE, GroupFile

__all__ = ["SeedGroup", "finish_groups", "format_seeds", "group_runs", "is_group",
           "makes_groups", "write_group"]


def format_seeds(seeds: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"`` (runs of consecutive seeds as ranges).

    >>> format_seeds([0, 1, 2, 5]), format_seeds([3])
    ('0-2,5', '3')
    """
    parts: list[str] = []
    ordered = sorted(seeds)
    start = prev = ordered[0]
    for s in [*ordered[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ",".join(parts)


def _config_key(run_dir: Path) -> str | None:
    config = read_toml(run_dir / "config.toml", root=run_dir)
    if not config:
        return None
    config.pop("seed", None)
    return json.dumps(config, sort_keys=True)


def group_runs(run_dirs: Sequence[str | Path]) -> list[list[Path]]:
    """The complete runs that differ only in their seed, grouped, each group in seed order;
    only groups of two or more runs."""
    groups: dict[str, list[Path]] = {}
    for run_dir in map(Path, run_dirs):
        if RunResults(run_dir).status != "complete":
            continue
        key = _config_key(run_dir)
        if key is not None:
            groups.setdefault(key, []).append(run_dir)
    return [sorted(dirs, key=lambda d: RunResults(d).seed) for dirs in groups.values()
            if len(dirs) > 1]


def is_group(path: str | Path) -> bool:
    """Whether ``path`` holds a ``group.json`` (of any kind: a damaged one makes a damaged
    group, never a run)."""
    return os.path.lexists(Path(path) / GROUP_FILE)


def write_group(run_dirs: Sequence[str | Path], *, problems: Sequence[str] = ()) -> Path:
    """Make the seed group of ``run_dirs`` (one config, several seeds) next to them: the group
    directory with ``group.json``, ``config.toml``, and the findings over the seeds.

    ``problems``: what to report with the findings (e.g. seeds whose run failed).
    """
    from toolkit.lab.runner.verdicts import read_seed_findings, write_seed_findings

    runs = [RunResults(d) for d in run_dirs]
    if not runs:
        raise ValueError("write_group: run_dirs is empty; give the runs of at least one seed")
    seeds = [r.seed for r in runs]
    parent = runs[0].run_dir.parent
    for attempt in range(20):
        stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
        folder = parent / f"{stamp}__seeds{format_seeds(seeds)}__{secrets.token_hex(3)}"
        try:
            folder.mkdir(exist_ok=False)
            break
        except FileExistsError:
            if attempt == 19:
                raise
    config = dict(runs[0].root_config)
    config.pop("seed", None)
    config = {"experiment": config.pop("experiment", runs[0].experiment), "seeds": seeds,
              **config}
    atomic_write_text(folder / "config.toml",
                      tomlio.dumps(config, header=f"resolved config of a {config['experiment']} "
                                                  f"seed group ({len(seeds)} seeds)"), root=folder)
    starts = [r.meta.get("started") for r in runs if r.meta.get("started")]
    ends = [r.meta.get("ended") for r in runs if r.meta.get("ended")]
    info: dict[str, Any] = {
        "kind": "seed group", "experiment": config["experiment"], "seeds": seeds,
        "runs": [f"../{r.run_dir.name}" if r.run_dir.resolve().parent == parent.resolve()
                 else str(r.run_dir) for r in runs],
        "created": utc_now().isoformat(),
        "started": min(starts) if starts else None, "ended": max(ends) if ends else None,
        "run_seconds": [r.meta.get("duration_s") for r in runs],
        "wall_seconds": None,
    }
    GroupFile.model_validate(info)  # the shape its readers take, checked as it is written
    atomic_write_json(folder / GROUP_FILE, info, root=folder)
    per_seed, all_problems = {}, list(problems)
    for run in runs:
        seed, found, found_problems = read_seed_findings(run.run_dir)
        per_seed[seed] = found
        all_problems += [f"seed {seed}: {p}" for p in found_problems]
    write_seed_findings(folder, per_seed, all_problems)
    return folder


class SeedGroup:
    """A seed group read back: its member runs and what ``group.json`` says
    (:class:`~toolkit.lab.runner.errors.DamagedFile` when it does not read as
    :class:`~toolkit.lab.schema.GroupFile`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        file = self.path / GROUP_FILE
        if not os.path.lexists(file):
            raise FileNotFoundError(f"SeedGroup: {self.path} has no {GROUP_FILE}; is it a seed "
                                    f"group directory?")
        self.info: dict[str, Any] = read_json(file, root=self.path, model=GroupFile)

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in self.info.get("seeds", [])]

    @property
    def run_dirs(self) -> list[Path]:
        """The member runs, resolved. A group's members are written beside it (``../<run>``):
        one that leads out of the folder holding the group is
        :class:`~toolkit.lab.runner.results.OutsideFolder`, naming ``group.json``."""
        from toolkit.lab.runner.results import OutsideFolder

        found = []
        for rel in self.info.get("runs", []):
            path = self.path / rel
            try:
                found.append(inside(self.path.parent, path))
            except OutsideFolder:
                raise OutsideFolder(self.path / GROUP_FILE, f"member run {shown(rel)} lies "
                                    f"outside {shown(self.path.parent)}, where a group's runs "
                                    f"are; the lab reads only inside its folder") from None
        return found

    def results(self) -> RunResults:
        """The first seed's run with the other seeds as its replicates."""
        missing = [str(p) for p in self.run_dirs if not p.is_dir()]
        if missing:
            raise FileNotFoundError(f"SeedGroup: member runs of {self.path} are missing: "
                                    f"{', '.join(missing)}")
        return RunResults.over_seeds(self.run_dirs)

    def record(self, **values: Any) -> None:
        """Merge ``values`` into ``group.json`` (e.g. ``wall_seconds``)."""
        self.info.update(values)
        atomic_write_json(self.path / GROUP_FILE, self.info, root=self.path)


def makes_groups(configs: Sequence[Any]) -> bool:
    """Whether some of the configs (:class:`~toolkit.lab.runner.config.RunConfig`) differ only in
    their seed, so that their runs will make a seed group."""
    keys = [json.dumps({**c.to_dict(), "seed": None}, sort_keys=True) for c in configs]
    return len(set(keys)) < len(keys)


def finish_groups(outcomes: Sequence[Any], *, finish: Callable[[Path, Any], Any] | None = None,
                  experiments: Mapping[str, Any] | None = None, t0: float | None = None,
                  say: Callable[[str], None] | None = None,
                  earlier: Sequence[Path] = ()) -> list[Path]:
    """After the runs of :func:`~toolkit.lab.runner.sweep.run_configs`: write the seed group of
    the complete runs that differ only in their seed, call ``finish(folder, experiment)`` (the
    command line draws the report; ``experiment`` from ``experiments`` by name, ``None`` when
    absent) on each group and on each complete run outside a group, and record the
    wall time since ``t0`` in ``group.json``. Returns the folders: groups, then single runs.
    ``earlier``: complete runs of the same configs from before (``--resume``) that join their
    groups (nothing is called on them alone).

    A failing ``finish`` is reported on stderr; the numbers stay valid without a report.
    """
    done = [o.run_dir for o in outcomes if o.status == "complete"]
    groups = group_runs([*done, *earlier])
    members = {d for g in groups for d in g}
    failed = [o for o in outcomes if o.status != "complete"]
    shown: list[Path] = []

    def call(folder: Path, name: str) -> None:
        if finish is None:
            return
        try:
            finish(folder, (experiments or {}).get(name))
        except Exception as err:
            print(f"toolkit: warning: {folder}: {type(err).__name__}: {err}", file=sys.stderr)

    for runs in groups:
        problems = [f"a run with another seed ended {o.status}: {o.run_dir}"
                    + (f" ({o.error})" if o.error else "") for o in failed]
        folder = write_group(runs, problems=problems)
        t1 = time.perf_counter()
        call(folder, RunResults(runs[0]).experiment)
        if say is not None and finish is not None:
            say(f"  report over {len(runs)} seeds: {fmt(time.perf_counter() - t1, 's')}")
        if t0 is not None:
            SeedGroup(folder).record(wall_seconds=round(time.perf_counter() - t0, 3))
        if say is not None:
            say(f"seed group: {folder}")
        shown.append(folder)
    for run_dir in done:
        if run_dir not in members:
            call(run_dir, RunResults(run_dir).experiment)
            shown.append(run_dir)
    return shown
