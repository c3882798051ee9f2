"""Copy a showcase run's verdicts and figures into the documentation (``docs/showcase/``).

The algorithm pages show what the showcase (``toolkit run configs/showcase.toml``: every
experiment's QUICK params, with and without its blocks, three seeds) found: its findings with
their verdicts over the seeds, and its figures. They come from a real run, never typed by hand:

    python scripts/docs_showcase.py                 # runs the showcase (about 2 min), then copies
    python scripts/docs_showcase.py --from results/showcase/<time>__seeds0-2__<id>

Without ``--from`` the showcase runs from the current commit exactly: from a copy of ``HEAD``
(``git archive``), so that changes not yet committed never reach the snapshot, and the
snapshot names that commit and the machine that ran it (processor, cores, system). It writes
``docs/showcase/<experiment>.json`` (the run it came from, the story, the findings, the
figures' captions) and ``docs/showcase/figures/*.png`` for every experiment of the run, and
removes what an earlier run left there. The site's build renders them where a page says
``<!-- showcase: EXPERIMENT -->`` (``docs/_hooks/showcase.py``). Rerun it after changing an
experiment or an algorithm, and commit the result with the change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "showcase"
FINDING_KEYS = ("text", "label", "seeds_note", "basis")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def _git_commit() -> str | None:
    """The commit the working tree is at, ``+changes`` when toolkit, experiments or configs
    differ from it (for ``--from``: a run made from this tree)."""
    try:
        out = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--", "toolkit", "experiments", "configs")
    except (OSError, subprocess.CalledProcessError):
        return None
    return out + ("+changes" if dirty else "")


def this_machine() -> dict[str, object]:
    """The machine this process runs on, in words: processor, logical cores, system."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = re.search(r"model name\s*:\s*(.*)", fh.read()).group(1).strip()
    except (OSError, AttributeError):
        pass
    return {"cpu": re.sub(r"\s+", " ", cpu), "cores": os.cpu_count(),
            "system": f"{platform.system()} {platform.machine()}"}


def export_head(into: Path) -> Path:
    """A copy of the files of ``HEAD`` under ``into``, importable as the packages ``toolkit``
    and ``stop_gradient_experiments`` (see :func:`run_showcase`); returns the copy's root."""
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    packages = into / "packages"
    packages.mkdir()
    (packages / "stop_gradient_experiments").symlink_to(tree / "experiments",
                                                         target_is_directory=True)
    return tree


def run_showcase(out: Path) -> tuple[Path, str]:
    """Run the showcase of ``HEAD`` into ``out``; return its seed group's folder and the
    commit."""
    commit = _git("rev-parse", "--short=12", "HEAD")
    tree = export_head(out)
    # the copy's packages come first on the path: the installed (editable) ones are the
    # working tree's, which may hold changes not committed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tree), str(out / "packages"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, "-m", "toolkit", "run", "configs/showcase.toml",
           "--out", str(out / "results"), "--quiet"]
    print(f"running the showcase of commit {commit}:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    groups = sorted((out / "results").glob("showcase/*__seeds*"))
    if not groups:
        raise SystemExit(f"docs_showcase: the showcase wrote no seed group under {out}")
    return groups[-1], commit


def _figures(group: Path) -> dict[str, list[dict]]:
    """Each experiment's figures in the report's order, with captions and headline flags, and
    the report's summary figure under ``"summary"`` (gathered as the report gathers them; the
    PNGs are the group's own, drawn by the run)."""
    from toolkit.lab import SeedGroup, load_experiment
    from toolkit.lab.report.render import build

    seeds = SeedGroup(group)
    content = build(seeds.results(), load_experiment("showcase"), group=seeds)
    found: dict[str, list[dict]] = {}
    items = [(s.experiment, f) for s in content.sections for f in s.figures]
    if content.summary is not None:
        items.append(("summary", content.summary))
    for experiment, fig in items:
        if fig.table is None and (group / "figures" / f"{fig.name}.png").exists():
            found.setdefault(experiment, []).append(
                {"file": f"{fig.name}.png", "caption": fig.caption,
                 "headline": fig.headline or experiment == "summary"})
    return found


def snapshot(group: Path, commit: str | None, machine: dict[str, object] | None
             ) -> list[str]:
    """Write ``docs/showcase/`` from the seed group ``group``, made from ``commit`` on
    ``machine`` (``None``: not known); return the experiments."""
    findings = json.loads((group / "findings.json").read_text())
    meta_group = json.loads((group / "group.json").read_text())
    first_run = (group / meta_group["runs"][0]).resolve()
    meta = json.loads((first_run / "meta.json").read_text())
    figures = _figures(group)
    run = {"group": group.name, "config": "configs/showcase.toml", "seeds": findings["seeds"],
           "created": meta_group["created"][:19] + "Z", "commit": commit,
           "machine": machine or {"system": meta.get("platform")},
           "versions": meta["versions"], "device": meta["device"], "dtype": meta["dtype"],
           "wall_seconds": round(float(meta_group["wall_seconds"]), 1)}
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "figures").mkdir(parents=True)
    written = []
    sections = {**findings["findings"], **({"summary": []} if "summary" in figures else {})}
    for experiment, items in sections.items():
        about = meta["about"].get(experiment) or {}
        record = {"experiment": experiment, "run": run,
                  "description": about.get("description"), "story": about.get("story"),
                  "findings": [{k: f.get(k) for k in FINDING_KEYS} for f in items],
                  "figures": figures.get(experiment, [])}
        for fig in record["figures"]:
            shutil.copy(group / "figures" / fig["file"], OUT / "figures" / fig["file"])
        (OUT / f"{experiment}.json").write_text(
            json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(experiment)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="group", type=Path,
                        help="a showcase seed group (results/showcase/<time>__seeds0-2__<id>); "
                             "without it the showcase is run first")
    args = parser.parse_args(argv)
    if args.group is not None:
        group = args.group
        if not (group / "findings.json").exists() or not (group / "group.json").exists():
            parser.error(f"--from {group}: not a showcase seed group (no findings.json and "
                         f"group.json there)")
        return _report(snapshot(group, _git_commit(), None))
    with tempfile.TemporaryDirectory(prefix="showcase-") as tmp:
        group, commit = run_showcase(Path(tmp))
        return _report(snapshot(group, commit, this_machine()))


def _report(experiments: list[str]) -> int:
    print(f"docs/showcase: {len(experiments)} experiments ({', '.join(experiments)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
