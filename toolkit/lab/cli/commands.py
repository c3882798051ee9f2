"""What the subcommands do (:mod:`toolkit.lab.cli.app` parses): ``run``/``sweep`` read their
arguments into a :class:`~toolkit.lab.cli.run_command.RunCommand`; ``report``, ``compare`` and
``check`` read results, a damaged run named in one warning while the others go on, every name
printed escaped. :func:`run_module` runs an experiment module as a script."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown
from toolkit.lab.cli import terminal
from toolkit.lab.errors import ConfigError, DamagedFile

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"toolkit: error: {message} (see `{self.prog} --help`)\n")


def _warn(text: str) -> None:
    print(f"toolkit: warning: {shown(text)}", file=sys.stderr, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    """``toolkit run`` / ``sweep``: the arguments read into one
    :class:`~toolkit.lab.cli.run_command.RunCommand`, which runs them."""
    from toolkit.lab.cli.run_command import RunCommand

    return RunCommand(
        configs=args.configs, max_runs=args.max_runs, overrides=args.overrides,
        seeds=args.seeds, out=args.out, tensorboard=args.tensorboard,
        executor={"kind": args.executor, **{key: getattr(args, key) for key in (
            "workers", "address", "tls_ca_file", "tls_cert", "tls_key", "dashboard")}},
        quiet=args.quiet, verbose=args.verbose, report=not args.no_report,
        dry_run=args.dry_run, resume=args.resume, argv=args.argv)()


def cmd_list(args: argparse.Namespace) -> int:
    """The experiments, read from their sources (no torch import; ``--check`` imports each),
    and the configs."""
    from toolkit.lab.plan.registry import config_files, describe, discover, load_all

    # a composite (the showcase) runs the others: it needs no QUICK of its own
    rows = {name: (info.description, info.has_quick or info.composite, info.problem)
            for name, info in ((n, describe(p)) for n, p in discover().items())}
    if args.check:
        loaded, broken = load_all()
        rows.update({name: (exp.description, exp.quick is not None or callable(getattr(
            exp.module, "parts", None)), None) for name, exp in loaded.items()})
        rows.update({name: (*rows[name][:2], problem) for name, problem in broken.items()})
    print("experiments:")
    width = max([len(n) for n in rows] + [4])
    for name, (description, quick, problem) in sorted(rows.items()):
        print(f"  {name:<{width}}  " + (f"BROKEN: {problem}" if problem else description + (
            "" if quick else "  (no QUICK: not in the showcase)")))
    print("configs:")
    for path in config_files():
        with contextlib.suppress(ValueError):
            path = path.resolve().relative_to(Path.cwd().resolve())
        print(f"  {path}")
    bad = sorted(n for n, row in rows.items() if row[2])
    if bad:
        print(f"toolkit: warning: {terminal.count(len(bad), 'experiment module')} cannot be "
              f"loaded: {', '.join(bad)}", file=sys.stderr)
    if not args.check:
        print("(read from the sources; `toolkit list --check` also imports each experiment)")
        return EXIT_OK
    print(f"check: {len(bad)} of {len(rows)} experiments cannot be loaded" if bad
          else f"check: all {len(rows)} experiments load and follow the contract")
    return EXIT_FAILED if bad else EXIT_OK


def run_module(module: Any, argv: Sequence[str] | None = None) -> int:
    """Run an experiment module with its ``QUICK`` params and draw its report; a module ends
    with ``if __name__ == "__main__": raise SystemExit(run_module(__name__))``."""
    from toolkit.lab.execute.run import check_output_dir, execute
    from toolkit.lab.plan.config import plan_one
    from toolkit.lab.plan.registry import Experiment
    from toolkit.lab.report import write_report

    if isinstance(module, str):  # run_module(__name__) from the module itself
        module = sys.modules[module]
    experiment = Experiment.from_module(module)
    parser = Parser(prog=f"python -m {module.__spec__.name if module.__spec__ else module}",
                    description=f"{experiment.name}: {experiment.description}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument("--out", default="results", help="output root (default results)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    parser.add_argument("--no-report", action="store_true", help="skip figures and report")
    args = parser.parse_args(argv)
    try:
        spec = plan_one(experiment, experiment.quick or {}, seed=args.seed,
                        device=args.device, dtype=experiment.dtype or "float32",
                        output_dir=args.out, source=f"{experiment.name}.QUICK")
        check_output_dir(spec.config.output_dir, experiment.name, source=spec.source)
    except ConfigError as err:
        print(f"toolkit: error: {err.line()}", file=sys.stderr)
        return EXIT_USAGE
    print(f"running {experiment.name} (seed {spec.seed}, {spec.config.dtype}, QUICK params)",
          file=sys.stderr, flush=True)
    outcome = execute(spec, finish=None if args.no_report else write_report)
    print(f"{outcome.status}  {shown(outcome.run_dir)}  ({fmt(outcome.duration_s, 's')})")
    if outcome.status == "complete":
        terminal.tally([outcome.run_dir])
    return outcome.exit_code


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
    """The experiment that made a sound run (or seed group), for its own figures; ``None``
    (with a warning) when it cannot be loaded here: the report shows the generic figures."""
    from toolkit.lab.plan.registry import load_experiment
    from toolkit.lab.results.files import read_json

    name = None
    path = Path(folder) / "meta.json"
    try:
        name = read_json(path if os.path.lexists(path) else path.with_name("group.json"),
                         root=folder).get("experiment")
        return load_experiment(name)
    except Exception as err:  # the report still shows the run's own numbers
        _warn(f"{folder}: experiment {name!r} cannot be loaded ({type(err).__name__}: {err}); "
              "the report shows the generic figures")
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
                 "", _near(csv_path), _near(html_path)]:
        print(shown(line))
    return EXIT_OK


def _near(path: Path) -> str:
    """``path`` relative to the working folder when it lies below it (a line that fits a
    terminal's width), else as it is."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith(os.pardir) else rel


def cmd_check(args: argparse.Namespace) -> int:
    """Validate every run folder and seed group below DIR against the results format; list what
    is damaged (exit status 1 when something is) and the abandoned runs."""
    from toolkit.lab import RunResults
    from toolkit.lab.results.view import check_tree

    root = Path(args.directory)
    if not root.is_dir():
        raise ConfigError(args.directory, "", "no such directory",
                          "give a results folder, e.g. results or results/<experiment>")
    counts: Counter[str] = Counter()
    for folder, kind, problems in check_tree(root):
        for problem in problems:
            print(f"damaged: {shown(problem)}")
        run = None if problems or kind == "group" else RunResults(folder)
        counts["damaged" if problems else "seed group" if run is None else run.status] += 1
        if run is not None and run.status == "abandoned":
            print(f"abandoned: {shown(folder)}: {shown(run.status_line())}")
    damaged = counts.pop("damaged", 0)
    states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{terminal.count(sum(counts.values()) + damaged, 'folder')} below {shown(root)}: "
          f"{states or 'none readable'}; {damaged} damaged")
    return EXIT_FAILED if damaged else EXIT_OK
