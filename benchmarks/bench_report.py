"""Benchmark: the report's time against the experiments' time, and the 3-seed showcase's wall.

Issue 46's targets: drawing the report of one showcase seed takes at most 0.35x the time of
its ten experiments, and ``toolkit run configs/showcase.toml`` (three seeds, report included)
finishes in at most 30 s on two cores. Both are measured end to end through the command line,
each in a fresh output folder (no figure is reused from an earlier round), and alternated
over ``--rounds`` rounds so that a change in the machine's load reaches both alike:

- one seed: ``toolkit run configs/showcase.toml --seeds 0``; the run's ``meta.json`` records
  the experiments' seconds (``duration_s``) and the report's (``finish_s``, drawn after the
  run in the same process); what the report costs the user in all is measured too, in the same round: the wall time of that command against the wall time of
  the same command with ``--no-report`` (start-up included in both), and the difference
  over the experiments' seconds ("added");
- three seeds: the wall time of ``toolkit run configs/showcase.toml``, start-up included.

Each round prints its numbers and the 1-minute load average; the medians follow. The
machine's load is printed because other work on it slows both sides, and not equally.

    python benchmarks/bench_report.py               # 3 rounds
    python benchmarks/bench_report.py --rounds 1 --only one-seed
    python benchmarks/bench_report.py --only one-seed --before OLD  # OLD: an earlier tree

``--before OLD`` also runs the one-seed command with an earlier checkout's ``toolkit`` first on
``PYTHONPATH`` (``git archive <commit> toolkit | tar -x -C OLD``), alternated with the current
one in every round, and prints both ratios: the before numbers from the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "showcase.toml"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return "?"


def _toolkit(args: list[str], out: Path, tree: str | None = None) -> float:
    """Run ``python -m toolkit run CONFIG ARGS --out OUT`` as a user would (its output
    dropped; ``tree``: a checkout whose ``toolkit`` goes first on the path); its wall
    seconds."""
    env = {**os.environ, **({"PYTHONPATH": tree} if tree else {})}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "toolkit", "run", str(CONFIG), *args, "--out",
                    str(out)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def report_ratio(out: Path, tree: str | None) -> tuple[float, float]:
    """``(experiments seconds, report seconds)`` of one showcase seed, report included."""
    _toolkit(["--seeds", "0"], out, tree)
    (meta_path,) = out.glob("showcase/*/meta.json")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    return float(meta["duration_s"]), float(meta["finish_s"])


def one_seed(out: Path, bare_first: bool) -> tuple[float, float, float, float]:
    """``(experiments seconds, report seconds, wall, wall without the report)`` of one
    showcase seed; ``bare_first``: the command without the report goes first (alternated
    from round to round)."""
    if bare_first:
        bare = _toolkit(["--seeds", "0", "--no-report"], out / "bare")
    wall = _toolkit(["--seeds", "0"], out / "report")
    if not bare_first:
        bare = _toolkit(["--seeds", "0", "--no-report"], out / "bare")
    (meta_path,) = (out / "report").glob("showcase/*/meta.json")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    return float(meta["duration_s"]), float(meta["finish_s"]), wall, bare


def three_seeds(out: Path) -> float:
    """Wall seconds of the 3-seed showcase, report included."""
    return _toolkit([], out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("one-seed", "three-seeds"), default=None)
    parser.add_argument("--before", metavar="OLD", default=None,
                        help="an earlier checkout: its one-seed report ratio in every round too")
    args = parser.parse_args(argv)
    print(f"CPU: {_cpu()}, {os.cpu_count()} logical cores; python {platform.python_version()}")
    ratios: list[float] = []
    added: list[float] = []
    walls: list[float] = []
    before: list[float] = []
    kinds = [k for k in ("one-seed", "three-seeds") if args.only in (None, k)]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                out = Path(tmp) / f"{kind}-{r}"
                load = _load()
                if kind == "one-seed" and args.before:
                    experiments, report = report_ratio(out / "before", args.before)
                    before.append(report / experiments)
                    print(f"round {r + 1} before:      experiments {experiments:6.2f} s, report "
                          f"{report:6.2f} s, report/experiments {before[-1]:.3f}x (load "
                          f"{load} -> {_load()})", flush=True)
                    load = _load()
                if kind == "one-seed":
                    experiments, report, wall, bare = one_seed(out, bare_first=r % 2 == 1)
                    ratios.append(report / experiments)
                    added.append((wall - bare) / experiments)
                    print(f"round {r + 1} one seed:    experiments {experiments:6.2f} s, report "
                          f"{report:6.2f} s, report/experiments {ratios[-1]:.3f}x; command "
                          f"{wall:6.2f} s, with --no-report {bare:6.2f} s, added/experiments "
                          f"{added[-1]:.3f}x (load {load} -> {_load()})", flush=True)
                else:
                    walls.append(three_seeds(out))
                    print(f"round {r + 1} three seeds: {walls[-1]:6.2f} s wall, report "
                          f"included (load {load} -> {_load()})", flush=True)
    if before:
        print(f"before: median report/experiments over {len(before)} rounds: "
              f"{statistics.median(before):.3f}x")
    if ratios:
        print(f"median report/experiments over {len(ratios)} rounds: "
              f"{statistics.median(ratios):.3f}x (target <= 0.35x)")
        print(f"median added wall/experiments over {len(added)} rounds: "
              f"{statistics.median(added):.3f}x (what the report adds to the command)")
    if walls:
        print(f"median 3-seed showcase over {len(walls)} rounds: {statistics.median(walls):.2f} s "
              f"(target <= 30 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
