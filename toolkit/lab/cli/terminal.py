"""What ``toolkit run`` shows on the terminal: one tqdm bar over the runs while they go (on
stderr, when it is a terminal; each finished run above it with ``--verbose``, a failed run
always), then :func:`tally`: one line per experiment (and sweep point) with its verdict counts,
every finding that did not hold beneath it, the tally and the paths of ``findings.md`` and
``report.html``. Lines are wrapped to the terminal's width (100 columns when piped), never cut.
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

__all__ = ["kept", "outcome_line", "print_findings", "progress_bar", "tally", "wrapped"]

#: a verdict's name in the tally: ``True`` held as predicted, ``False`` did not, ``None`` a
#: measurement without a prediction
WORDS = {True: "as predicted", False: "not as predicted", None: "measured"}


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


def progress_bar(total: int, label: str, *, quiet: bool) -> Any:
    """One tqdm bar over the runs of a command, on stderr when it is a terminal: ``label``
    (what runs), the count and the time, within the terminal's width (80 columns hold it)."""
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


def _times(folder: Path) -> dict[str, Any] | None:
    """The run's (or seed group's) recorded seconds and a group's ``seeds``, read as every
    results file is read (``None``: damaged, or no ``wall_seconds``)."""
    from toolkit.lab.errors import DamagedFile
    from toolkit.lab.results.files import read_json
    from toolkit.lab.results.schema import GroupFile, RunMeta
    from toolkit.lab.results.view import GROUP_FILE

    for name, model in ((GROUP_FILE, GroupFile), ("meta.json", RunMeta)):
        if not (folder / name).is_file():
            continue
        try:
            info = read_json(folder / name, root=folder, model=model)
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
    shows, of the experiments' time and the report's."""
    if "duration_s" not in times:
        return f"wall time {fmt(times['wall_seconds'], 's')}"
    what = f"{len(times['seeds'])} seeds side by side" if "seeds" in times else "experiments"
    report = times.get("finish_s") or 0.0
    return (f"wall time {fmt(times['duration_s'] + report, 's')} ({what} "
            f"{fmt(times['duration_s'], 's')}" + (f", report {fmt(report, 's')})" if report
                                                   else ")"))


def _label(folder: Path) -> str:
    """``"em_gmm inner_steps=5"``: the experiment and sweep point of a run or seed group
    (nothing, when its files cannot be read)."""
    from toolkit.lab.results.view import RunResults, SeedGroup, is_group

    try:
        meta = RunResults(SeedGroup(folder).run_dirs[0] if is_group(folder) else folder).meta
    except Exception:  # a label is not worth a failure: the tally goes on
        return ""
    point = meta.get("sweep_point")
    return _named(str(meta.get("experiment", "")), point if isinstance(point, dict) else {})


def _named(name: str, point: Mapping[str, Any]) -> str:
    return " ".join([name, *(f"{k.removeprefix('params.')}={v}" for k, v in point.items())]
                    ).strip()


def tally(folders: Sequence[Path], *, out: Any = None) -> None:
    """Print each folder's verdicts per experiment (named with its sweep point), what did not
    hold beneath, the tally and the paths (see the module docstring)."""
    from toolkit.lab import read_findings
    from toolkit.lab.results.files import read_json

    out = out or sys.stdout
    read = []
    for folder in folders:
        try:
            findings = read_findings(folder)
            problems = read_json(folder / "findings.json", root=folder).get("problems", [])
        except Exception as err:  # a damaged findings.json: said, the others go on
            print(f"toolkit: warning: {shown(folder)}: findings not readable ({err})",
                  file=sys.stderr)
            continue
        for problem in problems if isinstance(problems, list) else ():
            print(f"toolkit: warning: {problem}", file=sys.stderr)
        read.append((folder, findings, _label(folder)))
    rows = [(" ".join(p for p in (section, label.partition(" ")[2]) if p), verdicts)
            for _, findings, label in read for section, verdicts in findings.items()]
    name_width = max((len(name) for name, _ in rows), default=0) + 2
    grand: dict[bool | None, int] = dict.fromkeys(WORDS, 0)
    for name, verdicts in rows:
        counts = {v: sum(1 for f in verdicts if f.verdict is v) for v in WORDS}
        head = f"  {name:<{name_width}}"
        print(wrapped(", ".join(f"{n} {WORDS[v]}" for v, n in counts.items() if n)
                      or "no findings", indent=head, more=" " * len(head)), file=out)
        for f in verdicts:
            grand[f.verdict] += 1
            if f.verdict is False:
                print(wrapped(f"! {f.seeds_note}: {f.text}", indent="    ", more="      "),
                      file=out)
    if sum(grand.values()):
        words = {True: "as predicted", False: "not", None: "measured"}
        print(wrapped(f"tally: {', '.join(f'{n} {words[v]}' for v, n in grand.items())} "
                      f"({sum(grand.values())} findings)"), file=out)
    for folder, _, label in read:
        times = _times(folder)
        if len(read) == 1:
            for what, name in (("findings", "findings.md"), ("report", "report.html")):
                if (folder / name).is_file():
                    print(f"{what + ':':<10}{shown(folder / name)}", file=out)
            if times:
                print(_wall(times), file=out)
            continue
        # one line a folder: its report (findings.md beside it) and its wall time
        main = folder / ("report.html" if (folder / "report.html").is_file() else "findings.md")
        wall = f" ({fmt(times['wall_seconds'], 's')})" if times else ""
        print(wrapped(f"{label or folder.name}: {shown(main)}{wall}"), file=out)
    out.flush()


def print_findings(run_dir: Path) -> None:
    """Every finding of a run (each child of a showcase) in full, with its verdict."""
    from toolkit.lab import read_findings

    for section, items in read_findings(run_dir).items():
        print(f"{section}:")
        for f in items:
            print(f"  {({True: '+', False: '!', None: '·'}[f.verdict])} {f}")
