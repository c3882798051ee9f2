"""Copy a showcase run's verdicts and figures into the documentation (``docs/showcase/``).

The algorithm pages show what the showcase (``toolkit run configs/showcase.toml``: every
experiment's QUICK params, with and without its blocks, three seeds) found: its findings with
their verdicts over the seeds, and its figures. They come from a real run, never typed by hand:

    python scripts/docs_showcase.py                 # runs the showcase (about 2 min), then copies
    python scripts/docs_showcase.py --from results/showcase/<time>__seeds0-2__<id>

writes ``docs/showcase/<experiment>.json`` (the run it came from, the story, the findings, the
figures' captions) and ``docs/showcase/figures/*.png`` for every experiment of the run, and
removes what an earlier run left there. The site's build renders them where a page says
``<!-- showcase: EXPERIMENT -->`` (``docs/_hooks/showcase.py``). Rerun it after changing an
experiment or an algorithm, and commit the result with the change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "showcase"
FINDING_KEYS = ("text", "label", "seeds_note", "basis")


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "toolkit", "experiments",
                                "configs"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out + ("+changes" if dirty else "")


def run_showcase(out: Path) -> Path:
    """Run the showcase into ``out`` and return its seed group's folder."""
    cmd = [sys.executable, "-m", "toolkit", "run", str(ROOT / "configs" / "showcase.toml"),
           "--out", str(out), "--quiet"]
    print("running:", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    groups = sorted(out.glob("showcase/*__seeds*"))
    if not groups:
        raise SystemExit(f"docs_showcase: the showcase wrote no seed group under {out}")
    return groups[-1]


def _figures(group: Path) -> dict[str, list[dict]]:
    """Each experiment's figures, in the report's order, with captions and headline flags."""
    cache = json.loads((group / "figures" / "cache.json").read_text())
    found: dict[str, list[dict]] = {}
    for section, entry in cache["sections"].items():
        experiment = section.split("__")[0]
        for fig in entry["figures"]:
            if (group / "figures" / f"{fig['name']}.png").exists() and experiment:
                found.setdefault(experiment, []).append(
                    {"file": f"{fig['name']}.png", "caption": fig["caption"],
                     "headline": bool(fig["headline"])})
    return found


def snapshot(group: Path) -> list[str]:
    """Write ``docs/showcase/`` from the seed group ``group``; return the experiments."""
    findings = json.loads((group / "findings.json").read_text())
    meta_group = json.loads((group / "group.json").read_text())
    first_run = (group / meta_group["runs"][0]).resolve()
    meta = json.loads((first_run / "meta.json").read_text())
    figures = _figures(group)
    run = {"group": group.name, "config": "configs/showcase.toml", "seeds": findings["seeds"],
           "created": meta_group["created"][:19] + "Z", "commit": _git_commit(),
           "versions": meta["versions"], "device": meta["device"], "dtype": meta["dtype"],
           "wall_seconds": round(float(meta_group["wall_seconds"]), 1)}
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "figures").mkdir(parents=True)
    written = []
    for experiment, items in findings["findings"].items():
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
        return _report(snapshot(group))
    with tempfile.TemporaryDirectory(prefix="showcase-") as tmp:
        return _report(snapshot(run_showcase(Path(tmp))))


def _report(experiments: list[str]) -> int:
    print(f"docs/showcase: {len(experiments)} experiments ({', '.join(experiments)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
