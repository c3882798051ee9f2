"""What ``toolkit run`` shows on the terminal: one progress bar while the runs go, then a tally.

While the runs go, :class:`Watcher` draws one bar over every run's top-level items (the
showcase's experiments × seeds), advanced as each item ends, in whichever process it runs; the
lines runs say (``ctx.say``) and each finished run are shown above the bar only with
``--verbose``, a failed or interrupted run always. Nothing is drawn when stderr is not a
terminal.

At the end, :func:`tally` prints one line per experiment with its verdict counts, every finding
that did not hold (one line each), the tally over all of them and the paths of
``findings.md`` and ``report.html``: the whole story of a showcase in under 40 lines. The full
findings are in ``findings.md`` and, with ``--verbose``, on the terminal.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown

__all__ = ["Watcher", "print_findings", "tally", "verdict_counts"]

#: a verdict's name in the tally: ``True`` held as predicted, ``False`` did not, ``None`` a
#: measurement without a prediction
WORDS = {True: "as predicted", False: "not as predicted", None: "measured"}


def _on_terminal() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


class _RunReporter:
    """The :class:`~toolkit.lab.execute.context.Reporter` of one run: forwards to the watcher."""

    def __init__(self, watcher: Watcher, index: int) -> None:
        self.watcher, self.index = watcher, index

    def advance(self, label: str, done: int, total: int, current: str) -> None:
        self.watcher.advance(self.index, label, done, total, current)

    def write(self, text: str) -> None:
        self.watcher.write(text)

    def child_done(self, run_dir: str, name: str) -> None:
        self.watcher.child_done(self.index, run_dir, name)


class Watcher:
    """One bar over all the runs of a command (see the module docstring).

    Use ``watch`` as :func:`~toolkit.lab.execute.local.run_all`'s ``watch`` and the watcher
    itself as its ``on_done``; :meth:`close` when the runs are over. Thread-safe: a pool's
    reports arrive on a thread of their own. ``on_child_done(index, run_dir, name)`` hears
    when a child of run ``index`` (a showcase's experiment) has written its files.
    """

    def __init__(self, total_runs: int, *, quiet: bool, verbose: bool,
                 on_child_done: Callable[[int, str, str], None] | None = None) -> None:
        self.total_runs, self.verbose = total_runs, verbose
        self.on_child_done = on_child_done
        self.bar: Any = None
        self.items: dict[int, tuple[int, int]] = {}  # run index -> (done, total)
        self.lock = threading.Lock()
        if not quiet and _on_terminal():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_runs, unit="run", desc="runs", file=sys.stderr,
                            leave=False, dynamic_ncols=True)

    def watch(self, index: int) -> _RunReporter:
        return _RunReporter(self, index)

    def _show(self, label: str, current: str) -> None:
        if self.bar is None:
            return
        known = [t for _, t in self.items.values() if t]
        per_run = max(known) if known else 1
        total = sum(t for _, t in self.items.values()) + per_run * (
            self.total_runs - len(self.items))
        self.bar.unit = "item" if known else "run"
        self.bar.total = total
        self.bar.n = sum(d for d, _ in self.items.values())
        if label:
            self.bar.set_description_str(label, refresh=False)
        self.bar.set_postfix_str(current, refresh=False)
        self.bar.refresh()

    def advance(self, index: int, label: str, done: int, total: int, current: str) -> None:
        with self.lock:
            self.items[index] = (done, total)
            self._show(label, current)

    def child_done(self, index: int, run_dir: str, name: str) -> None:
        if self.on_child_done is not None:
            self.on_child_done(index, run_dir, name)

    def write(self, text: str) -> None:
        if self.verbose:
            self._line(f"  {text}", sys.stderr)

    def _line(self, text: str, stream: Any) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.write(text, file=stream)
            else:
                print(text, file=stream, flush=True)

    def __call__(self, i: int, total: int, outcome: Any) -> None:
        """``on_done``: a run ended; its items all count as done."""
        with self.lock:
            _, n = self.items.get(i, (0, 0))
            self.items[i] = (n or 1, n or 1)
            self._show("", "")
        if outcome.status != "complete" or self.verbose:
            line, stream = outcome_line(i, total, outcome)
            self._line(line, stream)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def outcome_line(i: int, total: int, outcome: Any) -> tuple[str, Any]:
    """``[2/3] failed  <run_dir>  (1.2 s)`` with the error or what an interrupted run kept."""
    line = (f"[{i + 1}/{total}] {outcome.status:<11} {shown(outcome.run_dir)}  "
            f"({fmt(outcome.duration_s, 's')})")
    if outcome.error and outcome.status == "failed":
        line += f"\n    error: {outcome.error}"
    if outcome.status == "interrupted":
        step = last_step(outcome.run_dir)
        line += ("\n    nothing was logged, only config.toml and meta.json are kept"
                 if step is None else f"\n    kept what was logged (up to step {step}); "
                 f"draw it with: toolkit report {shown(outcome.run_dir)}")
    return line, (sys.stdout if outcome.status == "complete" else sys.stderr)


def last_step(run_dir: Path) -> int | None:
    """The last logged step of a run (``None``: nothing logged or unreadable)."""
    from toolkit.lab import RunResults
    from toolkit.lab.errors import DamagedFile

    try:
        return RunResults(run_dir).last_step
    except (DamagedFile, OSError):
        return None


# ----------------------------------------------------------------------------- the tally


def verdict_counts(verdicts: Sequence[Any]) -> str:
    """``"4 as predicted, 1 measured"``: the verdicts of one experiment in words."""
    counts = {v: sum(1 for f in verdicts if f.verdict is v) for v in WORDS}
    return ", ".join(f"{n} {WORDS[v]}" for v, n in counts.items() if n) or "no findings"


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _wall(folder: Path) -> str | None:
    """The run's (or seed group's) wall time in words, when recorded (read as every results
    file is read: a damaged one gives no line)."""
    from toolkit.lab.errors import DamagedFile
    from toolkit.lab.results.files import read_json
    from toolkit.lab.results.schema import GroupFile, RunMeta
    from toolkit.lab.results.view import GROUP_FILE

    for name, model in ((GROUP_FILE, GroupFile), ("meta.json", RunMeta)):
        path = folder / name
        if not path.is_file():
            continue
        try:
            info = read_json(path, root=folder, model=model)
        except DamagedFile:
            return None
        seconds = {k: v for k, v in info.items()
                   if k in ("wall_seconds", "duration_s", "finish_s")
                   and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if "wall_seconds" not in seconds:
            return None
        seeds = info.get("seeds")
        over = f" for {len(seeds)} seeds" if isinstance(seeds, list) else ""
        parts = []
        if "duration_s" in seconds:
            parts.append(f"experiments {fmt(seconds['duration_s'], 's')}")
        if seconds.get("finish_s"):
            parts.append(f"report {fmt(seconds['finish_s'], 's')}")
        return (f"wall time {fmt(seconds['wall_seconds'], 's')}{over}"
                + (f" ({', '.join(parts)})" if parts else ""))
    return None


def tally(folders: Sequence[Path], *, out: Any = None) -> None:
    """Print each folder's verdicts per experiment, what did not hold, the tally and the
    paths (see the module docstring)."""
    from toolkit.lab import read_findings

    out = out or sys.stdout
    width = max(60, min(120, shutil.get_terminal_size((100, 20)).columns)) - 6
    grand: dict[bool | None, int] = {v: 0 for v in WORDS}
    paths: list[str] = []
    for folder in folders:
        try:
            findings: Mapping[str, Sequence[Any]] = read_findings(folder)
            problems = _problems(folder)
        except Exception as err:  # a damaged findings.json: said, the others go on
            print(f"toolkit: warning: {shown(folder)}: findings not readable ({err})",
                  file=sys.stderr)
            continue
        for problem in problems:
            print(f"toolkit: warning: {problem}", file=sys.stderr)
        if findings:
            name_width = max(len(s) for s in findings) + 2
            for section, verdicts in findings.items():
                print(f"  {section:<{name_width}}{verdict_counts(verdicts)}", file=out)
                for f in verdicts:
                    grand[f.verdict] += 1
            missed = [(s, f) for s, vs in findings.items() for f in vs if f.verdict is False]
            if missed:
                print("not as predicted:", file=out)
                for section, f in missed:
                    print(f"  ! {_short(f'{section} ({f.seeds_note}): {f.text}', width)}",
                          file=out)
        for label, name in (("findings", "findings.md"), ("report", "report.html")):
            if (folder / name).is_file():
                paths.append(f"{label + ':':<10}{shown(folder / name)}")
        wall = _wall(folder)
        if wall:
            paths.append(wall)
    total = sum(grand.values())
    if total:
        words = {True: "as predicted", False: "not", None: "measured"}
        print(f"tally: {', '.join(f'{n} {words[v]}' for v, n in grand.items())} "
              f"({total} findings)", file=out)
    for line in paths:
        print(line, file=out)
    out.flush()


def _problems(folder: Path) -> list[str]:
    """What findings.json says went wrong while the findings were made."""
    from toolkit.lab.results.files import read_json

    problems = read_json(folder / "findings.json", root=folder).get("problems", [])
    return [str(p) for p in problems] if isinstance(problems, list) else []


def print_findings(run_dir: Path) -> None:
    """Every finding of a run (each child of a showcase) in full, with its verdict
    (``--verbose``)."""
    from toolkit.lab import read_findings

    for section, items in read_findings(run_dir).items():
        print(f"{section}:")
        for f in items:
            mark = {True: "+", False: "!", None: "·"}[f.verdict]
            print(f"  {mark} {f}")
