"""What ``toolkit run`` shows on the terminal: one tqdm bar over the experiments of its runs, a
line as each ends (on stderr: above the bar when it is a terminal, alone when piped), then
:func:`tally`. Lines are wrapped to the terminal's width (100 columns when
piped), never cut."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown

__all__ = ["Follow", "count", "kept", "outcome_line", "print_findings", "progress_bar", "tally",
           "wrapped"]

#: a verdict's name in the tally (``None``: a measurement without a prediction)
WORDS = {True: "as predicted", False: "not as predicted", None: "measured"}


def count(n: int, noun: str) -> str:
    """``"1 run"``, ``"3 runs"``: a count and its noun, plural unless it is one."""
    return f"{n:,} {noun}{'s' * (n != 1)}"


def _on_terminal() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def width() -> int:
    """Columns to fill: the terminal's (``COLUMNS`` when set), else 100."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def wrapped(text: str, *, indent: str = "", more: str | None = None) -> str:
    """``text`` on lines of at most :func:`width`, words never broken, the first line after
    ``indent``, the next ones after ``more`` (default: ``indent`` and two spaces)."""
    return textwrap.fill(" ".join(text.split()), width(), initial_indent=indent,
                         subsequent_indent=indent + "  " if more is None else more,
                         break_long_words=False, break_on_hyphens=False)


def outcome_line(i: int, total: int, outcome: Any) -> str:
    """``[2/3] failed  <run_dir>  (1.2 s)`` with the error (on one line: it names a file)."""
    line = (f"[{i + 1}/{total}] {outcome.status:<11} {shown(outcome.run_dir)}  "
            f"({fmt(outcome.duration_s, 's')})")
    if outcome.error and outcome.status == "failed":
        line += f"\n    error: {shown(outcome.error)}"
    return line


def progress_bar(total: int, label: str, *, quiet: bool, unit: str = "runs",
                 file: Any = None) -> Any:
    """One tqdm bar over the runs of a command (or the experiments of its runs: ``unit``), on
    stderr (or ``file``) when stderr is a terminal: ``label`` (what runs), the count and the
    time, within the terminal's width (80 columns hold it)."""
    from tqdm.auto import tqdm

    class Bar(tqdm):  # tqdm's way to add a field: the whole units done, while the bar and
        @property     # the percentage also move with the parts of those under way
        def format_dict(self) -> dict[str, Any]:
            found = super().format_dict
            return {**found, "done": int(found["n"] + 1e-9)}

    unit = unit.removesuffix("s") if total == 1 else unit  # "0/1 run", "0/3 runs"
    columns = min(width(), 100)  # the count and the time take 38 columns at most, an hour on
    label = textwrap.shorten(label, max(10, columns - 38 - len(unit)), placeholder="…")
    return Bar(total=total, desc=shown(label), unit=unit, file=file or sys.stderr, leave=False,
               disable=quiet or not _on_terminal(), ncols=columns,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {done}/{total} " + unit +
                          " [{elapsed}<{remaining}]")


def _own_stderr() -> Any:
    """A stream of its own on the terminal of stderr (a duplicate of its file descriptor): a run
    that redirects descriptor 2 for a while (to hold back the profiler's notes) then holds
    none of the bar's redraws. ``None`` where stderr has no descriptor."""
    try:
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is a ValueError
        return None


def _units(spec: Any) -> int:
    """How many experiments a run runs: a composite's (the showcase's params name its
    children), else one."""
    children = getattr(spec.params, "children", None)
    try:
        return max(1, len(children())) if callable(children) else 1
    except Exception:  # a count is not worth a failure: the run says what is wrong
        return 1


class Follow:
    """What ``toolkit run`` shows while its runs run: one bar over the experiments of every
    run (on stderr when it is a terminal, its clock redrawn twice a second), and a line as
    each experiment of each run ends (above the bar; piped, the lines alone). ``heard`` takes
    what a run tells (``on_progress``), ``ended`` each run's outcome (``on_done``)."""

    def __init__(self, runs: Sequence[Any], label: str, *, quiet: bool,
                 verbose: bool = False) -> None:
        self.units = [_units(spec) for spec in runs]
        self.told = [0] * len(runs)  # experiments of each run that ended
        self.part = [0.0] * len(runs)  # how far the experiment under way in each run is
        self.who = [" ".join([*(f"{k.removeprefix('params.')}={v}"
                                for k, v in spec.sweep_point.items()), f"seed {spec.seed}"])
                     for spec in runs]
        self.names = [spec.experiment.name for spec in runs]
        self.who_width = max(map(len, self.who), default=0)
        self.quiet, self.verbose, self.n_ended = quiet, verbose, 0
        plain = sum(self.units) == len(runs)
        self._screen = None if quiet or not _on_terminal() else _own_stderr()
        self.bar = progress_bar(sum(self.units), label, quiet=quiet, file=self._screen,
                                unit="runs" if plain else "experiments")
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress clock", daemon=True)
        if not self.bar.disable:
            self._ticker.start()

    def _tick(self) -> None:
        """Redraw the bar (its elapsed time) while nothing else does."""
        while not self._stop.wait(0.5):
            self.bar.refresh()

    def say(self, line: str, *, file: Any = None) -> None:
        """One line above the bar (on stderr unless ``file``), or alone when piped."""
        if self.bar.disable:
            print(line, file=file or sys.stderr, flush=True)
            return
        with self.bar.external_write_mode(file=self.bar.fp):  # the bar cleared, then redrawn
            print(line, file=file or self.bar.fp, flush=True)

    def _line(self, index: int, name: str, what: str) -> str:
        """``  seed 1  em_gmm             9.7 s``: columns kept while they fit the width."""
        line = f"  {self.who[index]:<{self.who_width}}  {name:<22} {what:>8}"
        return line if len(line) <= width() else wrapped(line, indent="  ", more="      ")

    def _to(self, index: int, part: float) -> None:
        """Move the bar by what run ``index``'s experiment under way went since last heard."""
        self.bar.update(max(0.0, part - self.part[index]))
        self.part[index] = part

    def heard(self, index: int, progress: Any) -> None:
        """Run ``index`` told that an experiment started, went part of its way (the bar moves
        with it) or ended: an ended one is counted and named."""
        if progress.seconds is None:
            if progress.part is not None:
                self._to(index, progress.part)
            return
        self._to(index, 1.0)
        self.told[index] += 1
        self.part[index] = 0.0
        if not self.quiet:
            self.say(self._line(index, shown(progress.name), fmt(progress.seconds, "s")))

    def ended(self, index: int, total: int, outcome: Any) -> None:
        """Run ``index`` ended: the bar counts all its experiments, a plain run is named, a
        failed one (every one with ``verbose``) gets its outcome line."""
        self.bar.update(max(0.0, self.units[index] - self.told[index] - self.part[index]))
        self.part[index] = 0.0
        if (self.units[index] == 1 and not self.told[index] and outcome.status == "complete"
                and not self.quiet):
            self.say(self._line(index, shown(self.names[index]),
                                fmt(outcome.duration_s, "s")))
        self.told[index] = self.units[index]
        self.n_ended += 1
        if outcome.status == "failed" or self.verbose:
            self.say(outcome_line(self.n_ended - 1, total, outcome),
                     file=sys.stdout if outcome.status == "complete" else sys.stderr)

    def close(self) -> None:
        """Stop the clock and take the bar away."""
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join()
        self.bar.close()
        if self._screen is not None:
            self._screen.close()

    def __enter__(self) -> Follow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kept(run_dir: Path) -> str:
    """What an interrupted run keeps: its finished parts (a showcase's experiments, which
    ``--resume`` carries over), else its last logged step."""
    from toolkit.lab import RunResults
    from toolkit.lab.errors import DamagedFile

    try:
        run = RunResults(run_dir)
        done = [k for k, v in run.meta.get("children", {}).items()
                if isinstance(v, dict) and v.get("done") is True]
        step = run.last_step
    except (DamagedFile, OSError):
        return "nothing logged"
    if done:
        return f"kept {', '.join(shown(k) for k in done)}"
    return "nothing logged" if step is None else f"kept steps up to {step}"


def _wall(folder: Path) -> tuple[float, str] | None:
    """A run's (or seed group's) ``wall_seconds`` and the wall time its report shows (``wall
    time 38.4 s (3 seeds side by side 20.9 s, report 17.5 s)``); ``None``: not readable."""
    from toolkit.lab.errors import DamagedFile
    from toolkit.lab.results.view import RunResults, SeedGroup, is_group

    try:
        info = SeedGroup(folder).info if is_group(folder) else RunResults(folder).meta
    except (DamagedFile, OSError):
        return None
    times = {k: v for k, v in info.items() if k in ("wall_seconds", "duration_s", "finish_s")
             and isinstance(v, (int, float)) and not isinstance(v, bool)}
    seeds = info.get("seeds")
    if isinstance(seeds, list):  # a seed group: its seeds' span, as its report shows it
        with contextlib.suppress(TypeError, ValueError):
            times["duration_s"] = (datetime.fromisoformat(info.get("ended"))
                                   - datetime.fromisoformat(info.get("started"))).total_seconds()
    if "wall_seconds" not in times:
        return None
    wall, run_s, report = times["wall_seconds"], times.get("duration_s"), times.get("finish_s")
    what = f"{len(seeds)} seeds side by side" if isinstance(seeds, list) else "experiments"
    return wall, (f"wall time {fmt(wall, 's')}" if run_s is None else
                  f"wall time {fmt(run_s + (report or 0.0), 's')} ({what} {fmt(run_s, 's')}"
                  + (f", report {fmt(report, 's')})" if report else ")"))


def _label(folder: Path) -> str:
    """``"em_gmm inner_steps=5"``: the experiment and sweep point of a run or seed group
    (nothing, when its files cannot be read)."""
    from toolkit.lab.results.view import RunResults, SeedGroup, is_group

    try:
        meta = RunResults(SeedGroup(folder).run_dirs[0] if is_group(folder) else folder).meta
    except Exception:  # a label is not worth a failure: the tally goes on
        return ""
    point = [f"{k.removeprefix('params.')}={v}" for k, v in meta.get("sweep_point", {}).items()]
    return " ".join([meta["experiment"], *point]).strip()


def tally(folders: Sequence[Path], *, out: Any = None) -> None:
    """Print each folder's verdict counts per experiment (named with its sweep point), the
    findings that did not hold beneath, the tally, and the paths of its files."""
    from toolkit.lab.results.files import read_record
    from toolkit.lab.results.schema import FindingsFile

    out = out or sys.stdout
    read = []
    for folder in folders:
        try:
            found = read_record(folder / "findings.json", FindingsFile, root=folder)
        except Exception as err:  # a damaged findings.json: said, the others go on
            print(f"toolkit: warning: {shown(folder)}: findings not readable ({err})",
                  file=sys.stderr)
            continue
        for problem in found.problems if found else ():
            print(f"toolkit: warning: {problem}", file=sys.stderr)
        read.append((folder, found.findings if found else {}, _label(folder)))
    rows = [(" ".join(p for p in (section, label.partition(" ")[2]) if p), verdicts)
            for _, findings, label in read for section, verdicts in findings.items()]
    name_width = max((len(name) for name, _ in rows), default=0) + 2
    grand: Counter[bool | None] = Counter()
    for name, verdicts in rows:
        counts = Counter(f.verdict for f in verdicts)
        grand.update(counts)
        head = f"  {name:<{name_width}}"
        print(wrapped(", ".join(f"{counts[v]} {WORDS[v]}" for v in WORDS if counts[v])
                      or "no findings", indent=head, more=" " * len(head)), file=out)
        for f in (f for f in verdicts if f.verdict is False):
            print(wrapped(f"! {f.seeds_note}: {f.text}", indent="    ", more="      "), file=out)
    if grand.total():
        words = {**WORDS, False: "not"}
        print(wrapped(f"tally: {', '.join(f'{grand[v]} {words[v]}' for v in WORDS)} "
                      f"({grand.total()} findings)"), file=out)
    for folder, _, label in read:
        wall = _wall(folder)
        if len(read) == 1:
            for what, name in (("findings", "findings.md"), ("report", "report.html")):
                if (folder / name).is_file():
                    print(f"{what + ':':<10}{shown(folder / name)}", file=out)
            if wall:
                print(wall[1], file=out)
            continue
        # one line a folder: its report (findings.md beside it) and its wall time
        main = folder / ("report.html" if (folder / "report.html").is_file() else "findings.md")
        time = f" ({fmt(wall[0], 's')})" if wall else ""
        print(wrapped(f"{label or folder.name}: {shown(main)}{time}"), file=out)
    out.flush()


def print_findings(run_dir: Path) -> None:
    """Every finding of a run (each child of a showcase) in full, with its verdict."""
    from toolkit.lab import read_findings

    for section, items in read_findings(run_dir).items():
        print(f"{section}:")
        for f in items:
            print(f"  {({True: '+', False: '!', None: '·'}[f.verdict])} {f}")
