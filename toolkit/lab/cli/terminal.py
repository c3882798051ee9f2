"""What ``toolkit run`` shows on the terminal: one progress bar while the runs go, then a tally.

From the moment the runs are counted, :class:`Watcher` draws one bar over every run's
top-level items (the showcase's experiments × seeds), in whichever process each runs. It says
what is under way: the phase before the runs start (planning, the pool's processes starting),
then each running run by its seed and sweep point with the item it is on
(``showcase · seed 0: em_gmm · seed 1: dice``); its clock moves every half second, so a long
first item never looks frozen. The lines runs say (``ctx.say``) and each finished run are shown
above the bar only with ``--verbose``, a failed run always (an interrupted one is in the
summary the interrupt prints). Nothing is drawn when stderr is not a terminal.

At the end, :func:`tally` prints one line per experiment (and sweep point) with its verdict
counts, every finding that did not hold beneath it, the tally over all of them and the paths of
``findings.md`` and ``report.html``. Lines are wrapped to the terminal's width (100 columns
when the output is not a terminal), never cut: the full findings are in ``findings.md`` and,
with ``--verbose``, on the terminal.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown

__all__ = ["Watcher", "point_words", "print_findings", "run_label", "tally", "verdict_counts",
           "wrapped"]

#: a verdict's name in the tally: ``True`` held as predicted, ``False`` did not, ``None`` a
#: measurement without a prediction
WORDS = {True: "as predicted", False: "not as predicted", None: "measured"}
#: columns when the output is not a terminal (a pipe, a file)
PIPED_WIDTH = 100
#: seconds between two redraws of the bar's clock
TICK_S = 0.5


def _on_terminal() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def width() -> int:
    """Columns to fill: the terminal's (``COLUMNS`` when set), else :data:`PIPED_WIDTH`."""
    return max(40, shutil.get_terminal_size((PIPED_WIDTH, 24)).columns)


def wrapped(text: str, *, indent: str = "", more: str | None = None,
            columns: int | None = None) -> str:
    """``text`` on lines of at most ``columns`` (default :func:`width`), words never broken
    (a path longer than a line stays whole), the first line after ``indent``, the next ones
    after ``more`` (default: ``indent`` and two spaces)."""
    more = indent + "  " if more is None else more
    return textwrap.fill(" ".join(text.split()), columns or width(), initial_indent=indent,
                         subsequent_indent=more, break_long_words=False,
                         break_on_hyphens=False)


def point_words(point: Mapping[str, Any]) -> str:
    """A sweep point in words: ``{"params.inner_steps": 5}`` → ``"inner_steps=5"``."""
    return " ".join(f"{k.removeprefix('params.')}={v}" for k, v in point.items())


def run_label(experiment: str, point: Mapping[str, Any], seeds: str) -> str:
    """``"em_gmm inner_steps=5 seed 1"``: a run (or a seed group: ``seeds 0-2``) by name."""
    return " ".join(p for p in (experiment, point_words(point), seeds) if p)


class _RunReporter:
    """The :class:`~toolkit.lab.execute.context.Reporter` of one run: forwards to the watcher."""

    def __init__(self, watcher: Watcher, index: int) -> None:
        self.watcher, self.index = watcher, index

    def run_started(self) -> None:
        self.watcher.run_started(self.index)

    def advance(self, label: str, done: int, total: int, current: str) -> None:
        self.watcher.advance(self.index, label, done, total, current)

    def write(self, text: str) -> None:
        self.watcher.write(text)

    def child_done(self, run_dir: str, name: str) -> None:
        self.watcher.child_done(self.index, run_dir, name)


class Watcher:
    """One bar over all the runs of a command (see the module docstring).

    Use ``watch`` as :func:`~toolkit.lab.execute.local.run_all`'s ``watch``, :meth:`phase` as
    its ``on_phase`` and the watcher itself as its ``on_done``; :meth:`close` when the runs are
    over. ``names`` (or :meth:`name_runs`, once the runs are planned) says each run's name
    (``seed 0``, ``inner_steps=5 seed 1``) and ``title`` what they share (``showcase``);
    ``on_run_started(index)`` hears each run start.
    Thread-safe: a pool's reports arrive on a thread of their own. ``on_child_done(index,
    run_dir, name)`` hears when a child of run ``index`` (a showcase's experiment) has written
    its files.
    """

    def __init__(self, total_runs: int, *, quiet: bool, verbose: bool,
                 on_child_done: Callable[[int, str, str], None] | None = None,
                 names: Sequence[str] = (), title: str = "") -> None:
        self.total_runs, self.verbose = total_runs, verbose
        self.on_child_done = on_child_done
        self.on_run_started: Callable[[int], None] | None = None
        self.names, self.title = list(names), title
        self.bar: Any = None
        self.items: dict[int, tuple[int, int]] = {}  # run index -> (done, total)
        self.itemized = False  # a run reported items (a showcase's experiments)
        self.running: dict[int, str] = {}  # run index -> the item under way ("": none named)
        self.now = "planning"  # the phase, while no run goes
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        if not quiet and _on_terminal():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_runs, unit="runs", desc=self._text(), file=sys.stderr,
                            leave=False, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "{unit} [{elapsed}<{remaining}]")
            self._show()
            threading.Thread(target=self._tick, daemon=True, name="toolkit-bar").start()

    def _tick(self) -> None:
        while not self.stopped.wait(TICK_S):
            with self.lock:
                if self.bar is not None:
                    self.bar.refresh()

    def name_runs(self, names: Sequence[str], title: str = "") -> None:
        with self.lock:
            self.names, self.title = list(names), title
            self._show()

    def phase(self, text: str) -> None:
        """What happens before the runs start (``""``: they go)."""
        with self.lock:
            self.now = text
            self._show()

    def watch(self, index: int) -> _RunReporter:
        return _RunReporter(self, index)

    def _text(self) -> str:
        if self.running:
            now = " · ".join(
                ": ".join(p for p in (self.names[i] if i < len(self.names) else f"run {i + 1}",
                                      item) if p)
                for i, item in sorted(self.running.items()))
        else:
            now = self.now or "starting"
        return f"{self.title} · {now}" if self.title else now

    def _show(self) -> None:
        if self.bar is None:
            return
        known = [t for _, t in self.items.values() if t]
        per_run = max(known) if known else 1
        total = sum(t for _, t in self.items.values()) + per_run * (
            self.total_runs - len(self.items))
        self.bar.unit = "items" if self.itemized else "runs"
        self.bar.total = total
        self.bar.n = sum(d for d, _ in self.items.values())
        self.bar.set_description_str(self._text(), refresh=False)
        self.bar.refresh()

    def run_started(self, index: int) -> None:
        with self.lock:
            self.now = ""
            self.running.setdefault(index, "")
            self._show()
        if self.on_run_started is not None:
            self.on_run_started(index)

    def advance(self, index: int, label: str, done: int, total: int, current: str) -> None:
        with self.lock:
            self.items[index] = (done, total)
            self.running[index] = current
            self.itemized = True
            self._show()

    def child_done(self, index: int, run_dir: str, name: str) -> None:
        if self.on_child_done is not None:
            self.on_child_done(index, run_dir, name)

    def write(self, text: str) -> None:
        if self.verbose:
            self._line(f"  {text}", sys.stderr)

    def say(self, text: str, stream: Any = None) -> None:
        """A line of the command's own, above the bar (on stdout unless ``stream``)."""
        self._line(text, stream or sys.stdout)

    def _line(self, text: str, stream: Any) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.write(text, file=stream)
                stream.flush()
            else:
                print(text, file=stream, flush=True)

    def __call__(self, i: int, total: int, outcome: Any) -> None:
        """``on_done``: a run ended; its items all count as done (unless it was stopped)."""
        with self.lock:
            done, n = self.items.get(i, (0, 0))
            self.items[i] = (done, n) if outcome.status == "interrupted" else (n or 1, n or 1)
            self.running.pop(i, None)
            self._show()
        if outcome.status == "failed" or (self.verbose and outcome.status == "complete"):
            line, stream = outcome_line(i, total, outcome)
            self._line(line, stream)

    def close(self) -> None:
        self.stopped.set()
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


def outcome_line(i: int, total: int, outcome: Any) -> tuple[str, Any]:
    """``[2/3] failed  <run_dir>  (1.2 s)`` with the error (on one line: it names a file),
    and the stream for it."""
    line = (f"[{i + 1}/{total}] {outcome.status:<11} {shown(outcome.run_dir)}  "
            f"({fmt(outcome.duration_s, 's')})")
    if outcome.error and outcome.status == "failed":
        line += f"\n    error: {outcome.error}"
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


def _times(folder: Path) -> dict[str, Any] | None:
    """The run's (or seed group's) recorded seconds (``wall_seconds``, ``duration_s``,
    ``finish_s``) and ``seeds`` (a group's), read as every results file is read: a damaged
    one, or one without ``wall_seconds``, gives ``None``."""
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
        times: dict[str, Any] = {k: v for k, v in info.items()
                                 if k in ("wall_seconds", "duration_s", "finish_s")
                                 and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if isinstance(info.get("seeds"), list):
            times["seeds"] = info["seeds"]
        return times if "wall_seconds" in times else None
    return None


def _wall(times: Mapping[str, Any]) -> str:
    """``wall time 38.6 s for 3 seeds (experiments 20.9 s, report 17.5 s)``."""
    over = f" for {len(times['seeds'])} seeds" if "seeds" in times else ""
    parts = []
    if "duration_s" in times:
        parts.append(f"experiments {fmt(times['duration_s'], 's')}")
    if times.get("finish_s"):
        parts.append(f"report {fmt(times['finish_s'], 's')}")
    return (f"wall time {fmt(times['wall_seconds'], 's')}{over}"
            + (f" ({', '.join(parts)})" if parts else ""))


def _identity(folder: Path) -> tuple[str, dict[str, Any]]:
    """Experiment and sweep point of a run or seed group, read as results are (a damaged file
    gives nothing)."""
    from toolkit.lab.results.view import RunResults, SeedGroup, is_group

    try:
        meta = RunResults(SeedGroup(folder).run_dirs[0] if is_group(folder) else folder).meta
    except Exception:  # a label is not worth a failure: the tally goes on
        return "", {}
    point = meta.get("sweep_point")
    return str(meta.get("experiment", "")), dict(point) if isinstance(point, dict) else {}


def tally(folders: Sequence[Path], *, out: Any = None) -> None:
    """Print each folder's verdicts per experiment (named with its sweep point), what did not
    hold beneath, the tally and the paths (see the module docstring)."""
    from toolkit.lab import read_findings

    out = out or sys.stdout
    grand: dict[bool | None, int] = {v: 0 for v in WORDS}
    read: list[tuple[Path, Mapping[str, Sequence[Any]], tuple[str, dict[str, Any]]]] = []
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
        read.append((folder, findings, _identity(folder)))
    rows = [(" ".join(p for p in (section, point_words(who[1])) if p), verdicts)
            for _, findings, who in read for section, verdicts in findings.items()]
    name_width = max((len(name) for name, _ in rows), default=0) + 2
    for name, verdicts in rows:
        head = f"  {name:<{name_width}}"
        print(wrapped(verdict_counts(verdicts), indent=head, more=" " * len(head)), file=out)
        for f in verdicts:
            grand[f.verdict] += 1
            if f.verdict is False:
                print(wrapped(f"! {f.seeds_note}: {f.text}", indent="    ", more="      "),
                      file=out)
    total = sum(grand.values())
    if total:
        words = {True: "as predicted", False: "not", None: "measured"}
        print(wrapped(f"tally: {', '.join(f'{n} {words[v]}' for v, n in grand.items())} "
                      f"({total} findings)"), file=out)
    for folder, _, (experiment, point) in read:
        times = _times(folder)
        if len(read) == 1:
            for label, name in (("findings", "findings.md"), ("report", "report.html")):
                if (folder / name).is_file():
                    print(f"{label + ':':<10}{shown(folder / name)}", file=out)
            if times:
                print(_wall(times), file=out)
            continue
        # one line a folder: its report (findings.md beside it) and its wall time
        main = folder / ("report.html" if (folder / "report.html").is_file() else "findings.md")
        wall = f" ({fmt(times['wall_seconds'], 's')})" if times else ""
        print(wrapped(f"{run_label(experiment, point, '') or folder.name}: {shown(main)}{wall}"),
              file=out)
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
