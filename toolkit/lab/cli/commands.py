"""What the subcommands do (:mod:`toolkit.lab.cli.app` parses): ``run``/``sweep`` hand the
validated plans to :func:`~toolkit.lab.execute.local.run_all`; ``report``, ``compare`` and
``check`` read results, a damaged run named in one warning while the others go on, every name
printed escaped. :func:`run_module` runs an experiment module as a script."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
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


def _report_quietly(run_dir: Path, experiment: Any = None) -> Path:
    """The report, its notes kept off the terminal (module-level: a pool's workers call it)."""
    from toolkit.lab.report import write_report
    from toolkit.lab.report.render import held_notes

    with held_notes():
        return write_report(run_dir, experiment)


def cmd_run(args: argparse.Namespace) -> int:
    """``toolkit run`` / ``sweep``. SIGINT or SIGTERM at any moment ends it with one summary of
    what is complete and the command that finishes the rest, exit status 128 + the signal."""
    ended: list[Any] = []  # the outcomes so far
    planned, undrawn = [0], []  # runs planned; complete runs and groups whose report is due
    try:
        return _cmd_run(args, ended, planned, undrawn)
    except KeyboardInterrupt as err:  # RunInterrupted too
        signum = getattr(err, "signum", signal.SIGINT)
        print("\n".join(_summary(signum, ended, planned[0], undrawn, args.argv)), file=sys.stderr)
        return 128 + signum


def _cmd_run(args: argparse.Namespace, ended: list[Any], planned: list[int],
             undrawn: list[Path]) -> int:
    from toolkit.lab.errors import RunInterrupted
    from toolkit.lab.execute.resume import claimed, done_as_requested, plan_resume
    from toolkit.lab.plan.config import Plan, executor_for, parse_seeds
    from toolkit.lab.results.records import group_key

    if args.max_runs < 1:
        raise ConfigError("--max-runs", "", f"must be >= 1, got {args.max_runs}",
                          "give the most runs this command may make, e.g. --max-runs 20000")
    seeds = parse_seeds(args.seeds, limit=args.max_runs) if args.seeds is not None else None
    plans = [Plan.read(path, args.overrides, seeds=seeds, output_dir=args.out,
                       tensorboard=args.tensorboard, max_runs=args.max_runs)
             for path in args.configs]
    boards = [p for p in plans if p.file.tensorboard is not None]
    if boards:  # a missing extra is an input error, before anything runs
        from toolkit.lab.execute.live_curves import check_tensorboard

        check_tensorboard("--tensorboard" if args.tensorboard else boards[0].source)
    planned[0] = total = sum(len(p) for p in plans)
    if total > args.max_runs:
        raise ConfigError(" ".join(args.configs), "", f"give {total:,} runs together, above "
                          f"the limit of {args.max_runs:,}", "run fewer configs at once, or "
                          "raise the limit with --max-runs N")
    executor = executor_for(plans, kind=args.executor, **{key: getattr(args, key) for key in (
        "workers", "address", "tls_ca_file", "tls_cert", "tls_key", "dashboard")})
    done = done_as_requested(plans) if args.resume and not args.dry_run else None
    if done is not None:  # known without importing torch or an experiment
        _skipped(done, quiet=args.quiet, nothing_left=True)
        return EXIT_OK
    from toolkit.lab.execute.dask import check_executor, import_distributed

    check_executor(executor)
    if executor.kind == "dask":
        import_distributed()  # a missing extra is an input error, before anything runs
    runs = [spec for p in plans for spec in p.specs()]
    _no_twice(runs)
    grouped = len({group_key(r.config) for r in runs}) < len(runs)
    earlier: list[Path] = []
    if args.resume:
        resume = plan_resume(runs)
        for err in resume.damaged:
            _warn(f"{err}; not counted as complete")
        for running in resume.running:
            print(f"skipped (running now, not started twice): {shown(running)}", file=sys.stderr)
        runs, earlier = resume.todo, resume.done
        _skipped(earlier, quiet=args.quiet, nothing_left=not runs)
        if not runs:
            return EXIT_OK
    planned[0] = len(runs)
    from toolkit.lab.execute.local import run_all
    from toolkit.lab.execute.run import check_output_dir

    for root, name in dict.fromkeys((r.config.output_dir, r.experiment.name) for r in runs):
        check_output_dir(root, name, source=runs[0].source, create=not args.dry_run)
    if args.dry_run:
        for r in runs:
            print(" ".join([f"{r.config.experiment} seed={r.seed}",
                            *(f"{k}={v}" for k, v in r.sweep_point.items())]))
        print(f"{len(runs)} run(s); executor {executor.kind}")
        return EXIT_OK
    names = ", ".join(dict.fromkeys(r.experiment.name for r in runs))
    n = min(executor.workers, len(runs))
    where = {"local": f" in {n} processes" if n > 1 else "",
             "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
    # a seed group gets one report over its seeds once all have ended (none of their own)
    finish = None if args.no_report or grouped else _report_quietly
    t0 = time.perf_counter()
    label = f"{names}: {len(runs)} runs{where[executor.kind]}"
    claim = claimed(runs) if args.resume else contextlib.nullcontext(runs)
    with _notes(args.verbose), claim as runs, terminal.Follow(
            runs, label, quiet=args.quiet, verbose=args.verbose) as follow:

        def on_done(i: int, total: int, outcome: Any) -> None:
            ended.append(outcome)
            if finish is not None and outcome.status == "complete":
                undrawn.append(Path(outcome.run_dir))
            follow.ended(i, total, outcome)

        # what a run says (ctx.say, its own bars) is shown with --verbose only
        _, status = run_all(runs, executor=executor, quiet=not args.verbose or n > 1,
                            finish=finish, on_done=on_done, on_progress=follow.heard)
    if status >= 128:
        raise RunInterrupted(status - 128)  # the summary says what is complete
    folders = [o.run_dir for o in ended if o.status == "complete"]
    if grouped:
        with _notes(args.verbose):
            folders = _finish_groups(ended, runs, report=not args.no_report, t0=t0,
                                     earlier=earlier, undrawn=undrawn)
        for folder in folders if args.verbose else ():  # where each seed group's report went
            if (folder / "group.json").is_file():
                print(f"seed group: {shown(folder)}", file=sys.stderr)
    if not args.quiet and len(folders) > 3:
        c = runs[0].config
        print(f"{len(folders)} complete run folders; `toolkit compare "
              f"{shown(Path(c.output_dir) / c.experiment)}` tabulates them")
    elif not args.quiet:
        for folder in folders if args.verbose else ():
            if (folder / "findings.json").is_file():
                terminal.print_findings(folder)
        terminal.tally(folders)
    return status


def _no_twice(runs: Sequence[Any]) -> None:
    """The same run planned twice (a config given twice, two files saying the same): refused
    as repeated seeds are, before anything runs."""
    seen: dict[str, Any] = {}
    for run in runs:
        first = seen.setdefault(run.config.identity(), run)
        if first is not run:
            same = first.source == run.source
            what = "is given twice" if same else f"gives the same run as {shown(first.source)}"
            raise ConfigError(run.source, "", f"{what} (seed {run.seed})",
                              "give each config once" if same else "give one of them")


def _summary(signum: int, ended: Sequence[Any], planned: int, undrawn: Sequence[Path],
             argv: Sequence[str]) -> list[str]:
    """What an interrupted ``toolkit run`` says: each run that ended (an interrupted one with
    what it kept), the runs not started, and the commands that finish the rest."""
    head = f"toolkit: interrupted by {signal.Signals(signum).name} (exit status {128 + signum})"
    lines = [f"{head}; of {planned} run{'s' * (planned != 1)}:" if ended
             else head + ("; no run had started" if planned else "")]
    for o in ended:
        note = (f"; {terminal.kept(Path(o.run_dir))}" if o.status == "interrupted"
                else f"; {shown(o.error)}" if o.status == "failed" and o.error else "")
        lines.append(terminal.wrapped(f"{shown(o.run_dir)} ({fmt(o.duration_s, 's')}{note})",
                                      indent=f"  {o.status:<12} ", more=" " * 17))
    if ended and planned > len(ended):
        left = planned - len(ended)
        lines.append(f"  {'not started':<12} {left} run{'s' * (left != 1)}")
    commands = []
    if planned > len(ended) or any(o.status != "complete" for o in ended):
        commands.append(shlex.join(["toolkit", *argv, *(["--resume"] if ended and "--resume"
                                                        not in argv else [])]))
    drawn = [str(f) for f in undrawn if not (Path(f) / "report.html").is_file()]
    if drawn:
        commands.append(shlex.join(["toolkit", "report", *drawn]))
    if not commands:
        return [*lines, "nothing is left to do: every run is complete"]
    return [*lines, f"to finish: {shown(commands[0])}",
            *(f"           {shown(c)}" for c in commands[1:])]


def _skipped(done: Sequence[Path], *, quiet: bool, nothing_left: bool) -> None:
    """``--resume``: each complete run skipped, and whether anything is left to do."""
    for folder in done if not quiet else ():
        print(f"skipped (complete): {shown(folder)}")
    if nothing_left:
        print("nothing to do: every run is complete or running")


def _finish_groups(outcomes: Sequence[Any], runs: Sequence[Any], *, report: bool, t0: float,
                   earlier: Sequence[Path], undrawn: list[Path]) -> list[Path]:
    """The seed groups of the complete runs (and ``earlier`` ones) and the reports of the groups
    and of the runs outside one (a failing report is a warning); the folders, groups first."""
    from toolkit.lab.report import write_report
    from toolkit.lab.results.records import group_runs, record_group, write_group
    from toolkit.lab.results.view import RunResults

    experiments = {r.experiment.name: r.experiment for r in runs}
    done = [o.run_dir for o in outcomes if o.status == "complete"]
    groups = group_runs([*done, *earlier])
    failed = [f"a run with another seed ended {o.status}: {o.run_dir}"
              + (f" ({o.error})" if o.error else "") for o in outcomes if o.status != "complete"]
    # (folder, the run it reads): each group, then each complete run outside a group
    pairs = [(write_group(g, problems=failed), g[0]) for g in groups]
    pairs += [(d, d) for d in done if all(d not in g for g in groups)]
    undrawn += [folder for folder, _ in pairs] if report else []
    for i, (folder, run_dir) in enumerate(pairs):
        try:
            if report:
                write_report(folder, experiments.get(RunResults(run_dir).experiment))
        except Exception as err:
            _warn(f"{folder}: {type(err).__name__}: {err}")
        if i < len(groups):
            record_group(folder, wall_seconds=round(time.perf_counter() - t0, 3))
    return [folder for folder, _ in pairs]


@contextlib.contextmanager
def _notes(verbose: bool) -> Iterator[None]:
    """Notes the report logs (graphs laid out without graphviz: the report says so itself)
    reach the terminal only with ``--verbose``."""
    from toolkit.lab.report.render import held_notes

    with held_notes() as notes:
        yield
    for note in notes if verbose else ():
        print(f"  note: {note}", file=sys.stderr, flush=True)


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
        print(f"toolkit: warning: {len(bad)} experiment module(s) cannot be loaded: "
              f"{', '.join(bad)}", file=sys.stderr)
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
    print(f"{sum(counts.values()) + damaged} folder(s) below {shown(root)}: "
          f"{states or 'none readable'}; {damaged} damaged")
    return EXIT_FAILED if damaged else EXIT_OK
