"""What the command line's subcommands do: the CLI composes (configs, experiments found through
the registry, the report as the runner's ``finish``) and hands the pieces to the runner.

:mod:`toolkit.lab.cli.app` parses the arguments and calls these; :func:`run_module` runs an experiment
module as a script.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt
from toolkit.lab.cli.terminal import Watcher, print_findings, run_label, tally

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"toolkit: error: {message} (see `{self.prog} --help`)\n")



def _report_quietly(run_dir: Path, experiment: Any = None) -> Path:
    """The report, its notes (graphs laid out without graphviz) kept in the report and off
    the terminal: module-level, so that a pool's workers call it too."""
    from toolkit.lab.report import write_report
    from toolkit.lab.report.render import held_notes

    with held_notes():
        return write_report(run_dir, experiment)


def cmd_run(args: argparse.Namespace) -> int:
    """``toolkit run`` / ``sweep``: read each config once (no torch yet), start the pool's
    fork server while the experiments load, plan, then hand the runs to the executor.

    SIGINT or SIGTERM at any moment (planning, the pool starting, the runs, the reports) ends
    the command with one summary of what is complete and the command that finishes the rest
    (:mod:`toolkit.lab.cli.interrupt`), exit status 128 + the signal (130 for Ctrl-C).
    """
    from toolkit.lab.cli.interrupt import Ledger
    from toolkit.lab.errors import RunInterrupted
    from toolkit.lab.execute.server import stop_pool_server
    from toolkit.lab.execute.signals import INSIST_S, signals_deferred, signals_raise

    argv = getattr(args, "argv", None)
    ledger = Ledger(sys.argv[1:] if argv is None else argv, report=not args.no_report)
    try:
        with signals_raise(insist=INSIST_S):
            return _cmd_run(args, ledger)
    except KeyboardInterrupt as err:  # RunInterrupted too
        signum = err.signum if isinstance(err, RunInterrupted) else int(signal.SIGINT)
        with signals_deferred():  # a second Ctrl-C does not cut the summary short
            stop_pool_server()  # still importing for a pool that will not be
            for line in ledger.summary(signum):
                print(line, file=sys.stderr)
            sys.stderr.flush()
        return 128 + signum


def _cmd_run(args: argparse.Namespace, ledger: Any) -> int:
    from toolkit.lab.errors import ConfigError
    from toolkit.lab.execute.server import start_pool_server
    from toolkit.lab.plan.config import Plan, executor_for, parse_seeds
    from toolkit.lab.results.records import group_key

    if args.max_runs < 1:
        raise ConfigError("--max-runs", "", f"must be >= 1, got {args.max_runs}",
                          "give the most runs this command may make, e.g. --max-runs 20000")
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    plans = [Plan.read(path, args.overrides, seeds=seeds, output_dir=args.out,
                       tensorboard=args.tensorboard, max_runs=args.max_runs)
             for path in args.configs]
    boards = [p for p in plans if p.file.tensorboard is not None]
    if boards:  # a missing extra is an input error, before anything runs
        from toolkit.lab.execute.live_curves import check_tensorboard

        check_tensorboard("--tensorboard" if args.tensorboard else boards[0].source)
    total = sum(len(p) for p in plans)
    if total > args.max_runs:
        raise ConfigError(" ".join(args.configs), "", f"give {total:,} runs together, above "
                          f"the limit of {args.max_runs:,}", "run fewer configs at once, or "
                          "raise the limit with --max-runs N")
    ledger.planned = total
    executor = executor_for(plans, kind=args.executor, workers=args.workers,
                            address=args.address, tls_ca_file=args.tls_ca_file,
                            tls_cert=args.tls_cert, tls_key=args.tls_key,
                            dashboard=args.dashboard)
    if args.resume and not args.dry_run and _nothing_left(plans, quiet=args.quiet):
        return EXIT_OK  # known without importing torch or an experiment, nor starting a pool
    names = list(dict.fromkeys(p.file.experiment for p in plans))
    # the bar, from here on: torch and the experiments take seconds to import
    watcher = Watcher(total, quiet=args.quiet or args.dry_run, verbose=args.verbose,
                      title=names[0] if len(names) == 1 else "")
    try:
        from toolkit.lab.execute.dask import check_executor
        from toolkit.lab.execute.run import check_output_dir

        check_executor(executor)
        if executor.kind == "dask":
            from toolkit.lab.execute.dask import import_distributed

            import_distributed()  # a missing extra is an input error, before anything runs
        if (executor.kind == "local" and not args.dry_run
                and min(executor.workers, total) > 1):
            start_pool_server()  # its imports overlap this process's planning
        runs = [spec for p in plans for spec in p.specs()]
        ledger.grouped = len({group_key(r.config) for r in runs}) < len(runs)
        earlier: list[Path] = []
        if args.resume:
            runs, earlier = _resume(runs, quiet=args.quiet)
            if not runs:
                print("nothing to do: every run is complete or running")
                return EXIT_OK
        ledger.planned = len(runs)
        watcher.total_runs = len(runs)
        watcher.name_runs([run_label("" if len(names) == 1 else r.experiment.name,
                                     r.sweep_point, f"seed {r.seed}") for r in runs],
                          watcher.title)
        for root, name in dict.fromkeys((r.config.output_dir, r.experiment.name) for r in runs):
            check_output_dir(root, name, source=runs[0].source, create=not args.dry_run)
        if args.dry_run:
            for r in runs:
                point = " ".join(f"{k}={v}" for k, v in r.sweep_point.items())
                print(f"{r.config.experiment} seed={r.seed} {point}".rstrip())
            print(f"{len(runs)} run(s); executor {executor.kind}")
            return EXIT_OK
        if args.resume:
            from toolkit.lab.execute.resume import claimed

            with claimed(runs) as mine:
                ledger.planned = len(mine)
                return _run(args, mine, executor, earlier, watcher, ledger)
        return _run(args, runs, executor, earlier, watcher, ledger)
    finally:
        watcher.close()


def _nothing_left(plans: Sequence[Any], *, quiet: bool) -> bool:
    """``--resume`` when every planned run is complete already, found by what each run
    recorded of its request (:func:`~toolkit.lab.execute.resume.done_as_requested`): says so
    and returns ``True``, having imported no experiment and started no pool."""
    from toolkit.lab.execute.resume import done_as_requested

    done = done_as_requested(plans)
    if done is None:
        return False
    if not quiet:
        for folder in done:
            print(f"skipped (complete): {folder}")
    print("nothing to do: every run is complete or running")
    return True


def _run(args: argparse.Namespace, runs: list[Any], executor: Any, earlier: list[Path],
         watcher: Watcher, ledger: Any) -> int:
    from toolkit.lab.errors import RunInterrupted
    from toolkit.lab.execute.local import run_all

    grouped = ledger.grouped
    on_terminal = sys.stderr.isatty() and not args.quiet
    if not args.quiet and len(runs) > 1:
        n = min(executor.workers, len(runs))
        where = {"local": f" in {n} processes" if n > 1 else "",
                 "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
        watcher.say(f"{len(runs)} runs{where[executor.kind]}")
    # a seed group gets one report over its seeds once all have ended (none of their own)
    finish = None if args.no_report or grouped else _report_quietly
    if finish is not None and args.verbose:
        from toolkit.lab.report import write_report as finish

    def on_done(index: int, total: int, outcome: Any) -> None:
        ledger.ended(index, outcome)
        watcher(index, total, outcome)

    def on_phase(text: str) -> None:
        if text:
            ledger.phase = "pool"
        watcher.phase(text)

    watcher.on_run_started = ledger.started

    pool = executor.kind == "local" and min(executor.workers, len(runs)) > 1
    ledger.phase = "pool" if pool else "runs"
    watcher.phase("")
    t0 = time.perf_counter()
    with _notes(args.verbose):
        outcomes, status = run_all(runs, executor=executor, quiet=args.quiet, finish=finish,
                                   on_done=on_done, watch=watcher.watch, on_phase=on_phase)
    if status >= 128:
        raise RunInterrupted(status - 128)  # the summary says what is complete
    shown = [o.run_dir for o in outcomes if o.status == "complete"]
    if grouped:
        ledger.phase = "reports"
        watcher.phase("drawing the seed group's report" if not args.no_report else "the seed group")

        def say(text: str) -> None:
            watcher.say(text, sys.stderr)

        with _notes(args.verbose):
            shown = _finish_groups(outcomes, runs, report=not args.no_report, t0=t0,
                                   say=say if on_terminal or args.verbose else None,
                                   earlier=earlier, ledger=ledger)
    watcher.close()
    if args.quiet:
        return status
    if args.verbose and len(shown) <= 3:
        for folder in shown:
            if (folder / "findings.json").is_file():
                print_findings(folder)
    if len(shown) <= 3:
        tally(shown)
    else:
        c = runs[0].config
        print(f"{len(shown)} complete run folders; `toolkit compare "
              f"{Path(c.output_dir) / c.experiment}` tabulates them")
    return status


def _finish_groups(outcomes: Sequence[Any], runs: Sequence[Any], *, report: bool, t0: float,
                   say: Any, earlier: Sequence[Path], ledger: Any) -> list[Path]:
    """The seed group of the complete runs that differ only in their seed (with ``earlier``
    complete runs of ``--resume``), its report, then each complete run outside a group; the
    folders, groups first. The groups are written whole before a signal is acted on (their
    findings take a second or so); their reports may be stopped (the ``ledger`` says which
    were drawn). A failing report is a warning: the numbers stay valid."""
    from toolkit.lab.errors import RunInterrupted
    from toolkit.lab.execute.signals import signals_deferred
    from toolkit.lab.report import write_report
    from toolkit.lab.results.records import group_runs, record_group, write_group
    from toolkit.lab.results.view import RunResults

    experiments = {r.experiment.name: r.experiment for r in runs}
    done = [o.run_dir for o in outcomes if o.status == "complete"]
    groups = group_runs([*done, *earlier])
    members = {d for g in groups for d in g}
    failed = [f"a run with another seed ended {o.status}: {o.run_dir}"
              + (f" ({o.error})" if o.error else "") for o in outcomes if o.status != "complete"]
    with signals_deferred() as held:
        folders = [write_group(members_of, problems=failed) for members_of in groups]
    ledger.members = members
    ledger.groups.update(dict.fromkeys(folders, not report))
    if held:
        raise RunInterrupted(held[0])

    def draw(folder: Path, name: str) -> None:
        if not report:
            return
        t1 = time.perf_counter()
        try:
            write_report(folder, experiments.get(name))
        except Exception as err:
            print(f"toolkit: warning: {folder}: {type(err).__name__}: {err}", file=sys.stderr)
        if say is not None and folder not in members:
            say(f"  report: {fmt(time.perf_counter() - t1, 's')}")

    shown = []
    for folder, members_of in zip(folders, groups):
        t1 = time.perf_counter()
        draw(folder, RunResults(members_of[0]).experiment)
        ledger.groups[folder] = True
        if say is not None and report:
            say(f"  report over {len(members_of)} seeds: {fmt(time.perf_counter() - t1, 's')}")
        record_group(folder, wall_seconds=round(time.perf_counter() - t0, 3))
        if say is not None:
            say(f"seed group: {folder}")
        shown.append(folder)
    for run_dir in done:
        if run_dir not in members:
            draw(run_dir, RunResults(run_dir).experiment)
            shown.append(run_dir)
    return shown


@contextlib.contextmanager
def _notes(verbose: bool) -> Iterator[None]:
    """Notes the report logs (graphs laid out without graphviz: the report says so itself)
    reach the terminal only with ``--verbose``."""
    from toolkit.lab.report.render import held_notes

    with held_notes() as notes:
        yield
    if verbose:
        for note in notes:
            print(f"  note: {note}", file=sys.stderr, flush=True)


def _resume(runs: list[Any], *, quiet: bool) -> tuple[list[Any], list[Path]]:
    """``--resume``: the planned runs still to run, and the complete runs of the others
    (matched by identity: config and seed, wherever the folder lives)."""
    from toolkit.lab.execute.resume import plan_resume

    plan = plan_resume(runs)
    for err in plan.damaged:
        print(f"toolkit: warning: {err}; not counted as complete", file=sys.stderr)
    if not quiet:
        for done in plan.done:
            print(f"skipped (complete): {done}")
    for running in plan.running:
        print(f"skipped (running now, not started twice): {running}", file=sys.stderr)
    return plan.todo, plan.done


def cmd_list(args: argparse.Namespace) -> int:
    from toolkit.lab.plan.registry import config_files, describe, discover, load_all

    found = discover()
    # Read from the sources (no torch import, instant); --check imports every module.
    rows: dict[str, tuple[str, bool, str | None]] = {}
    for name, path in found.items():
        info = describe(name, path)
        # a composite (the showcase) runs the others: it needs no QUICK of its own
        rows[name] = (info.description, info.has_quick or info.composite, info.problem)
    if args.check:
        loaded, broken = load_all()
        for name, exp in loaded.items():
            rows[name] = (exp.description, exp.quick is not None
                          or callable(getattr(exp.module, "parts", None)), None)
        for name, problem in broken.items():
            rows[name] = (rows[name][0], rows[name][1], problem)
    print("experiments:")
    width = max([len(n) for n in rows] + [4])
    for name, (description, has_quick, problem) in sorted(rows.items()):
        if problem:
            print(f"  {name:<{width}}  BROKEN: {problem}")
            continue
        quick = "" if has_quick else "  (no QUICK: not in the showcase)"
        print(f"  {name:<{width}}  {description}{quick}")
    print("configs:")
    cwd = Path.cwd()
    for path in config_files():
        try:
            shown = path.resolve().relative_to(cwd.resolve())
        except ValueError:
            shown = path
        print(f"  {shown}")
    broken_names = sorted(n for n, row in rows.items() if row[2])
    if broken_names:
        print(f"toolkit: warning: {len(broken_names)} experiment module(s) cannot be loaded: "
              f"{', '.join(broken_names)}", file=sys.stderr)
    if not args.check:
        print("(read from the sources; `toolkit list --check` also imports each experiment)")
    return EXIT_OK


def run_module(module: Any, argv: Sequence[str] | None = None) -> int:
    """Run an experiment module as a script with its ``QUICK`` params, and draw its report.

    An experiment ends with::

        if __name__ == "__main__":
            from toolkit.lab.cli import run_module
            raise SystemExit(run_module(__name__))

    so that ``python -m stop_gradient_experiments.em_gmm`` (or ``python my_probe.py``) runs it
    as ``toolkit run`` would run a config of its quick settings: seed 0, every block switched
    off in turn, the experiment's ``DTYPE`` (else float32), results under ``results/``.
    """
    from toolkit.lab.errors import ConfigError
    from toolkit.lab.execute.run import execute
    from toolkit.lab.plan.config import plan_one
    from toolkit.lab.plan.registry import Experiment

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
    except ConfigError as err:
        print(f"toolkit: error: {err.line()}", file=sys.stderr)
        return EXIT_USAGE
    print(f"running {experiment.name} (seed {spec.seed}, {spec.config.dtype}, QUICK params)",
          file=sys.stderr, flush=True)
    from toolkit.lab.execute.run import check_output_dir
    from toolkit.lab.report import write_report

    check_output_dir(spec.config.output_dir, experiment.name, source=spec.source)
    outcome = execute(spec, finish=None if args.no_report else write_report)
    print(f"{outcome.status}  {outcome.run_dir}  ({fmt(outcome.duration_s, 's')})")
    if outcome.status == "complete":
        tally([outcome.run_dir])
    return outcome.exit_code
