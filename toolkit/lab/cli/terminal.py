"""What ``toolkit run`` shows on the terminal: one progress bar while the runs go, then a tally.

:func:`progress_bar` is one tqdm bar over the runs of a command (a run in this process also
draws its own loop's bar beneath); each finished run is shown above it with ``--verbose``, a
failed run always. Nothing is drawn when stderr is not a terminal.

At the end, :func:`tally` prints one line per experiment (and sweep point) with its verdict
counts, every finding that did not hold beneath it, the tally over all of them and the paths of
``findings.md`` and ``report.html``. Lines are wrapped to the terminal's width (100 columns
when the output is not a terminal), never cut: the full findings are in ``findings.md`` and,
with ``--verbose``, on the terminal.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown

__all__ = ["outcome_line", "point_words", "print_findings", "progress_bar", "run_label", "tally",
           "verdict_counts", "wrapped"]

#: a verdict's name in the tally: ``True`` held as predicted, ``False`` did not, ``None`` a
#: measurement without a prediction
WORDS = {True: "as predicted", False: "not as predicted", None: "measured"}
#: columns when the output is not a terminal (a pipe, a file)
PIPED_WIDTH = 100


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


def outcome_line(i: int, total: int, outcome: Any) -> str:
    """``[2/3] failed  <run_dir>  (1.2 s)`` with the error (on one line: it names a file)."""
    line = (f"[{i + 1}/{total}] {outcome.status:<11} {shown(outcome.run_dir)}  "
            f"({fmt(outcome.duration_s, 's')})")
    if outcome.error and outcome.status == "failed":
        line += f"\n    error: {shown(outcome.error)}"
    return line


def progress_bar(total: int, label: str, *, quiet: bool) -> Any:
    """One tqdm bar over the runs of a command, on stderr, when it is a terminal: ``label``
    (what runs), the count and the time; at most the terminal's width (80 columns hold it)."""
    from tqdm.auto import tqdm

    room = max(10, width() - 48)
    label = label if len(label) <= room else label[:room - 1] + "…"
    return tqdm(total=total, desc=shown(label), unit="run", file=sys.stderr, leave=False,
                disable=quiet or not _on_terminal(), ncols=min(width(), 100),
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n}/{total} runs "
                           "[{elapsed}<{remaining}]")


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
            with contextlib.suppress(TypeError, ValueError):  # the seeds' span, as the report
                times["duration_s"] = (datetime.fromisoformat(info.get("ended"))
                                       - datetime.fromisoformat(info.get("started"))).total_seconds()
        return times if "wall_seconds" in times else None
    return None


def _wall(times: Mapping[str, Any]) -> str:
    """``wall time 38.4 s (3 seeds side by side 20.9 s, report 17.5 s)``: the sum the report
    shows, of the experiments' time (a seed group's: first start to last end) and the
    report's."""
    if "duration_s" not in times:
        return f"wall time {fmt(times['wall_seconds'], 's')}"
    what = f"{len(times['seeds'])} seeds side by side" if "seeds" in times else "experiments"
    report = times.get("finish_s") or 0.0
    return (f"wall time {fmt(times['duration_s'] + report, 's')} ({what} "
            f"{fmt(times['duration_s'], 's')}" + (f", report {fmt(report, 's')})" if report
                                                   else ")"))


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
