"""Benchmark: the report against its experiments, the 3-seed showcase and the default suite.

Issue 63's targets, on two quiet cores: drawing the report of one showcase seed takes at most
0.35x the time of its ten experiments, ``toolkit run configs/showcase.toml`` (three seeds,
report included) finishes in at most 20 s, and the default tests in at most 60 s. Each is
measured end to end through the command line, in a fresh output folder (no figure is reused
from an earlier round), alternated over ``--rounds`` rounds so that a change in the machine's
load reaches all alike:

- one seed: ``toolkit run configs/showcase.toml --seeds 0``; the run's ``meta.json`` records
  the experiments' seconds (``duration_s``) and the report's (``finish_s``, drawn after the
  run in the same process); what the report costs the user in all is measured too, in the
  same round: the wall time of that command against the wall time of the same command with
  ``--no-report`` (start-up included in both), and the difference over the experiments'
  seconds ("added");
- three seeds: the wall time of ``toolkit run configs/showcase.toml``, start-up included;
- suite: the wall time of ``python -m pytest -q`` (the README's test command, which leaves out
  the tests marked ``slow``) in the repository root.

Each round prints its numbers and the 1-minute load average; the medians follow. The
machine's load is printed because other work on it slows every side, and not equally.

    python benchmarks/bench_report.py               # 3 rounds
    python benchmarks/bench_report.py --rounds 1 --only one-seed
    python benchmarks/bench_report.py --only suite --before OLD  # OLD: an earlier tree

``--before OLD`` runs each measurement with an earlier checkout too (``git archive <commit> |
tar -x -C OLD``), run in its own root: its own ``toolkit``, ``experiments``, configuration and
tests. The two alternate in every round (which goes first flips from round to round),
and both medians are printed: the before numbers from the same machine and load.
"""

from __future__ import annotations

import argparse
import hashlib
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
CONFIG = Path("configs") / "showcase.toml"
KINDS = ("one-seed", "three-seeds", "suite")
#: issue 63's goals, on two quiet cores
TARGETS = {"one-seed": "<= 0.35x", "three-seeds": "<= 20 s", "suite": "<= 60 s"}


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


def _env(root: Path) -> dict[str, str]:
    """The environment that imports ``root``'s ``toolkit`` and its experiments (installed as
    ``stop_gradient_experiments``: a link to its ``experiments`` folder, first on the path)."""
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    shim = Path(tempfile.gettempdir()) / f"bench_report_path_{digest}"
    link = shim / "stop_gradient_experiments"
    if not link.exists():
        shim.mkdir(exist_ok=True)
        link.symlink_to(root / "experiments", target_is_directory=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(shim)])}


def _toolkit(args: list[str], out: Path, tree: str | None = None) -> float:
    """Run ``python -m toolkit run configs/showcase.toml ARGS --out OUT`` as a user would, in
    the repository root (its output dropped; ``tree``: an earlier checkout, run in its own root
    so that its ``toolkit`` and ``experiments`` are the ones imported); its wall seconds."""
    root = Path(tree).resolve() if tree else ROOT
    env = _env(root)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "toolkit", "run", str(root / CONFIG), *args, "--out",
                    str(out)], cwd=root, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def suite(tree: str | None) -> float:
    """Wall seconds of the default test suite, in ``tree``'s root (this checkout's by default);
    a failing suite is timed too, and says so."""
    root = Path(tree).resolve() if tree else ROOT
    env = _env(root)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        print(f"  the suite in {root} exited {done.returncode}: "
              f"{done.stdout.strip().splitlines()[-1]}", flush=True)
    return wall


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


def three_seeds(out: Path, tree: str | None = None) -> float:
    """Wall seconds of the 3-seed showcase, report included."""
    return _toolkit([], out, tree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=KINDS, default=None)
    parser.add_argument("--before", metavar="OLD", default=None,
                        help="an earlier checkout, measured alternately with this one")
    args = parser.parse_args(argv)
    print(f"CPU: {_cpu()}, {os.cpu_count()} logical cores; python {platform.python_version()}")
    sides = ["now", *(["before"] if args.before else [])]
    # (kind, side) -> one number per round: report/experiments, or wall seconds
    got: dict[tuple[str, str], list[float]] = {}
    added: list[float] = []
    kinds = [k for k in KINDS if args.only in (None, k)]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    tree = args.before if side == "before" else None
                    out, load = Path(tmp) / f"{kind}-{side}-{r}", _load()
                    if kind == "one-seed" and tree:
                        experiments, report = report_ratio(out, tree)
                        extra = ""
                    elif kind == "one-seed":
                        experiments, report, wall, bare = one_seed(out, bare_first=r % 2 == 1)
                        added.append((wall - bare) / experiments)
                        extra = (f"; command {wall:6.2f} s, with --no-report {bare:6.2f} s, "
                                 f"added/experiments {added[-1]:.3f}x")
                    if kind == "one-seed":
                        got.setdefault((kind, side), []).append(report / experiments)
                        line = (f"experiments {experiments:6.2f} s, report {report:6.2f} s, "
                                f"report/experiments {report / experiments:.3f}x{extra}")
                    else:
                        wall = three_seeds(out, tree) if kind == "three-seeds" else suite(tree)
                        got.setdefault((kind, side), []).append(wall)
                        line = f"{wall:6.2f} s wall"
                    print(f"round {r + 1} {kind:<11} {side:<6}: {line} (load {load} -> "
                          f"{_load()})", flush=True)
    for (kind, side), values in got.items():
        median = statistics.median(values)
        number = f"{median:.3f}x" if kind == "one-seed" else f"{median:.2f} s"
        print(f"{side:<6} median {kind} over {len(values)} rounds: {number} "
              f"(target {TARGETS[kind]})")
    if added:
        print(f"now    median added wall/experiments over {len(added)} rounds: "
              f"{statistics.median(added):.3f}x (what the report adds to the command)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
