"""The subcommands that read results: ``report``, ``compare`` and ``check``.

A damaged run (:func:`toolkit.lab.results.view.check_run`) is never fatal to a command over several runs:
it gets one warning naming its file and the others go on; an abandoned run is shown as such.
What the commands write lands inside the folder they were given (or ``--out``), never through
a link out of it. Every name read from a folder is printed escaped.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import shown
from toolkit.lab.cli.commands import EXIT_FAILED, EXIT_OK
from toolkit.lab.errors import ConfigError, DamagedFile

__all__ = ["cmd_check", "cmd_compare", "cmd_report"]


def _warn(text: str) -> None:
    print(f"toolkit: warning: {shown(text)}", file=sys.stderr, flush=True)


def _damage(folder: Path) -> list[Any]:
    """What is damaged in a run directory, or in a seed group and its member runs."""
    from toolkit.lab.results.view import SeedGroup, check_group, check_run, is_group

    if not is_group(folder):
        return check_run(folder, deep=True)
    return check_group(folder) or [p for member in SeedGroup(folder).run_dirs
                                   for p in check_run(member, deep=True)]


def cmd_report(args: argparse.Namespace) -> int:
    """Draw each run's report; a damaged run is skipped with a warning (exit status 1)."""
    from toolkit.lab.report import draw_report
    from toolkit.lab.results.files import confined

    for run_dir in args.run_dirs:
        if not any(os.path.lexists(Path(run_dir) / n) for n in ("meta.json", "group.json")):
            raise ConfigError(run_dir, "", "not a run directory (no meta.json) nor a seed "
                              "group (no group.json)", "give a folder such as "
                              "results/<experiment>/<run_id>")
    skipped = 0
    for run_dir in args.run_dirs:
        problems: list[Any] = _damage(Path(run_dir))
        try:
            if not problems:
                with confined(run_dir):  # the report's files land in its folder, or nowhere
                    print(shown(draw_report(run_dir, _experiment_of(run_dir))))
        except DamagedFile as err:  # found while drawing: this run only
            problems = [err]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            _warn(f"{problems[0]}{more}; {run_dir} skipped, its report not drawn "
                  f"(`toolkit check {run_dir}` lists what is damaged)")
            skipped += 1
    return EXIT_FAILED if skipped else EXIT_OK


def _experiment_of(folder: str) -> Any:
    """The experiment that made a run (or seed group), for its own figures; ``None`` (with a
    warning) when it cannot be loaded here: the report then shows the generic figures."""
    from toolkit.lab.plan.registry import load_experiment
    from toolkit.lab.results.files import read_json

    name = None
    for path in (Path(folder) / "meta.json", Path(folder) / "group.json"):
        if os.path.lexists(path):
            try:
                name = read_json(path, root=folder).get("experiment")
                return load_experiment(name)
            except Exception as err:  # the report still shows the run's own numbers
                _warn(f"{folder}: experiment {name!r} cannot be loaded "
                      f"({type(err).__name__}: {err}); the report shows the generic figures")
                return None
    return None


def cmd_compare(args: argparse.Namespace) -> int:
    """Aggregate the complete runs below DIR; damaged runs are skipped with one warning each,
    runs that did not complete (abandoned ones included) are listed under the table."""
    from toolkit.lab import RunResults, find_runs
    from toolkit.lab.report.compare import compare_runs, format_table, write_compare
    from toolkit.lab.results.files import confined, inside

    root = Path(args.directory)
    if not root.is_dir():
        raise ConfigError(args.directory, "", "no such directory",
                          "give a folder that holds run directories, e.g. results/<experiment>")
    skipped: set[Path] = set()

    def damaged(err: Any, n: int) -> None:
        more = f" (and {n - 1} more)" if n > 1 else ""
        _warn(f"{err}{more}; that run is left out (`toolkit check` lists what is damaged)")
        skipped.add(err.path.parent)

    out = Path(args.out) if args.out else root
    for name in ("compare.csv", "compare.html", "compare_figures"):
        inside(out, out / name)  # before anything is read: a link there is refused
    table = compare_runs(root, on_damaged=damaged, latest=args.latest)
    left_out = []
    for run_dir in find_runs(root):
        try:
            run = RunResults(run_dir)
            if run_dir not in skipped and run.status != "complete":
                left_out.append(f"not in the table, {run.status_line()}: {run_dir}")
        except DamagedFile as err:  # compare_runs left it out already
            if run_dir not in skipped:
                damaged(err, 1)
    if not table.rows:
        for line in left_out:
            print(shown(line))
        raise ConfigError(args.directory, "", "no complete runs below this folder",
                          "run some first (`toolkit run CONFIG --seeds 0,1`)")
    with confined(out):  # the table's files land in ``out``, or nowhere
        csv_path, html_path = write_compare(table, out)
    for line in [*format_table(table).splitlines(), *(["", *left_out] if left_out else []),
                 "", str(csv_path), str(html_path)]:
        print(shown(line))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """Validate every run folder and seed group below DIR against the results format; list what
    is damaged (exit status 1 when something is) and the abandoned runs."""
    from toolkit.lab import RunResults
    from toolkit.lab.results.view import check_tree

    root = Path(args.directory)
    if not root.is_dir():
        raise ConfigError(args.directory, "", "no such directory",
                          "give a results folder, e.g. results or results/<experiment>")
    counts: dict[str, int] = {}
    damaged = 0
    for folder, kind, problems in check_tree(root):
        for problem in problems:
            print(f"damaged: {shown(problem)}")
        damaged += bool(problems)
        run = None if problems or kind == "group" else RunResults(folder)
        state = "damaged" if problems else "seed group" if run is None else run.status
        if state != "damaged":
            counts[state] = counts.get(state, 0) + 1
        if state == "abandoned":
            print(f"abandoned: {shown(folder)}: {shown(run.status_line())}")
    states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{sum(counts.values()) + damaged} folder(s) below {shown(root)}: "
          f"{states or 'none readable'}; {damaged} damaged")
    return EXIT_FAILED if damaged else EXIT_OK
