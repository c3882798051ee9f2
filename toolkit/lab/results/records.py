"""The records a run and a seed group write, each the dump of its model: ``meta.json`` (saved
however a full disk allows), the findings, and a seed group (the runs of one config with several
seeds, :func:`group_key`): a folder beside its runs with ``group.json``, ``config.toml`` and the
findings over the seeds."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.lab.errors import DamagedFile
from toolkit.lab.results.files import atomic_write_json, atomic_write_text, read_record, utc_now
from toolkit.lab.results.findings import (
    Finding,
    Verdict,
    aggregate,
    findings_markdown,
    unmatched_patterns,
)
from toolkit.lab.results.schema import (
    ConfigFile,
    FindingsFile,
    GroupFile,
    RunConfig,
    RunMeta,
    toml_text,
)
from toolkit.lab.results.view import GROUP_FILE, RunResults

#: What meta.json keeps when a full disk leaves room for nothing more than its own blocks.
ESSENTIAL = ("status", "experiment", "run_id", "seed", "started", "ended", "duration_s",
             "error")


def save_meta(path: Path, meta: RunMeta) -> bool:
    """Write ``meta`` atomically, else (a full disk) over the blocks the file has, compact, then
    only its essential keys with the error cut to fit; whether it was written."""
    with contextlib.suppress(OSError):
        return atomic_write_json(path, meta) is None
    try:
        size = path.stat().st_size
        data = meta.model_dump(mode="json", exclude={"traceback", "about", "children", "argv",
                                                     "warnings"})
        text = json.dumps(data, separators=(",", ":")).encode()
        if len(text) > size:
            data = {k: data.get(k) for k in ESSENTIAL}
            text = json.dumps(data, separators=(",", ":")).encode()
            cut = max(0, len(str(data["error"])) - (len(text) - size) - 8)
            data["error"] = str(data["error"])[:cut] + "..."
            text = json.dumps(data, separators=(",", ":")).encode()
        with path.open("r+b") as fh:  # over the existing blocks: needs no new space
            fh.write(text)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
        return True
    except OSError:
        return False


def compute_findings(run_dir: Path, experiment: Any) -> tuple[dict[str, list[Finding]],
                                                              list[str]]:
    """One run's findings by section, and the problems of ``findings(run)``."""
    run = RunResults(run_dir)
    parts = experiment.parts
    views = [(name, run.child(name)) for name in run.children] or [(run.experiment, run)]
    out: dict[str, list[Finding]] = {}
    problems: list[str] = []
    for section, view in views:
        part = parts.get(view.experiment)
        if part is None or part.findings is None:
            continue
        try:
            items = list(part.findings(view))
            if bad := [f for f in items if not isinstance(f, Finding)]:
                raise TypeError(f"findings() must return Finding objects, got "
                                f"{type(bad[0]).__name__}")
            out[section] = items
        except Exception as err:
            problems.append(f"{section}: findings() failed: {type(err).__name__}: {err}")
    seen = run.meta.get("blocks_seen", [])
    for pattern in unmatched_patterns(run.config.get("disable_blocks", []), seen):
        out.setdefault(run.experiment, []).append(Finding(
            "The disable pattern {pattern} matched no block that ran (blocks seen: {seen}), so "
            "blocked and unblocked computed the same thing.",
            values={"pattern": repr(pattern), "seen": ", ".join(seen) or "none"},
            seed_independent=True))
    return out, problems


def write_findings(folder: Path, per_seed: Mapping[int, Mapping[str, Sequence[Finding]]],
                   problems: Sequence[str] = ()) -> FindingsFile:
    """Aggregate findings by seed and write ``findings.json`` and ``findings.md``."""
    verdicts, more = aggregate(per_seed)
    record = FindingsFile(seeds=list(per_seed), findings=verdicts,
                          problems=[*problems, *more])
    atomic_write_text(folder / "findings.json", record.model_dump_json(indent=2) + "\n",
                      root=folder)
    atomic_write_text(folder / "findings.md", findings_markdown(
        record.findings, record.problems, record.seeds), root=folder)
    return record


def read_findings(folder: str | Path) -> dict[str, list[Verdict]]:
    """The verdicts a run or a seed group wrote, by section (empty when it wrote none)."""
    found = read_record(Path(folder) / "findings.json", FindingsFile, root=folder)
    return {} if found is None else found.findings


def seed_findings(run_dir: Path) -> tuple[dict[str, list[Finding]], list[str]]:
    """One run's own findings (each verdict's one seed) and its problems."""
    found = read_record(run_dir / "findings.json", FindingsFile, root=run_dir)
    if found is None:
        return {}, [f"{run_dir.name}: no findings.json (a run that did not complete)"]
    return ({section: [v.per_seed[0] for v in items if v.per_seed]
             for section, items in found.findings.items()}, list(found.problems))


def format_seeds(seeds: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"``."""
    ordered = sorted(seeds)  # a span: seeds whose difference to their position is the same
    spans = [[s for _, s in g] for _, g in itertools.groupby(enumerate(ordered),
                                                             lambda p: p[1] - p[0])]
    return ",".join(str(s[0]) if len(s) == 1 else f"{s[0]}-{s[-1]}" for s in spans)


def group_key(config: RunConfig) -> str:
    """What runs of one seed group share: their config's identity with the seed left out."""
    return config.model_copy(update={"seed": 0}).identity()


def group_runs(run_dirs: Sequence[Path]) -> list[list[Path]]:
    """The complete runs among ``run_dirs`` that differ only in their seed (2 or more)."""
    groups: dict[str, list[RunResults]] = {}
    for run in (RunResults(d) for d in run_dirs):
        if run.status == "complete":
            groups.setdefault(group_key(RunConfig.model_validate(run.root_config)), []).append(run)
    return [[r.run_dir for r in sorted(runs, key=lambda r: r.seed)]
            for runs in groups.values() if len(runs) > 1]


def write_group(run_dirs: Sequence[Path], *, problems: Sequence[str] = ()) -> Path:
    """Make the seed group of ``run_dirs`` (one config, several seeds, complete) beside them;
    ``problems``: what to report with the findings (e.g. seeds whose run failed)."""
    runs = [RunResults(d) for d in run_dirs]
    if not runs:
        raise ValueError("write_group: run_dirs is empty; give the runs of at least one seed")
    parent, seeds = runs[0].run_dir.parent, [r.seed for r in runs]
    outside = [r.run_dir for r in runs if r.run_dir.resolve().parent != parent.resolve()]
    if outside:
        raise ValueError(f"write_group: a group's runs lie in one folder; {outside[0]} is not "
                         f"in {parent}")
    folder = parent / f"{utc_now():%Y%m%dT%H%M%SZ}__seeds{format_seeds(seeds)}__" \
                      f"{secrets.token_hex(3)}"
    folder.mkdir()
    config = RunConfig.model_validate(runs[0].root_config)
    atomic_write_text(folder / "config.toml", toml_text(
        ConfigFile(**{**config.model_dump(), "seed": None}, seeds=seeds),
        f"resolved config of a {config.experiment} seed group ({len(seeds)} seeds)"),
        root=folder)
    metas = [RunMeta.model_validate(r.meta) for r in runs]
    info = GroupFile(experiment=config.experiment, seeds=seeds,
                     runs=[f"../{r.run_dir.name}" for r in runs], created=utc_now().isoformat(),
                     started=min((m.started for m in metas if m.started), default=None),
                     ended=max((m.ended for m in metas if m.ended), default=None),
                     run_seconds=[m.duration_s for m in metas])
    atomic_write_json(folder / GROUP_FILE, info, root=folder)
    found = {run.seed: seed_findings(run.run_dir) for run in runs}
    write_findings(folder, {seed: f for seed, (f, _) in found.items()},
                   [*problems, *(f"seed {s}: {p}" for s, (_, ps) in found.items() for p in ps)])
    return folder


def record_group(folder: Path, **values: Any) -> None:
    """Merge ``values`` into a seed group's ``group.json`` (e.g. ``wall_seconds``)."""
    path = folder / GROUP_FILE
    info = read_record(path, GroupFile, root=folder)
    if info is None:
        raise DamagedFile(path, "missing")
    atomic_write_json(path, GroupFile.model_validate({**info.model_dump(), **values}),
                      root=folder)
