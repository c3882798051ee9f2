"""What the command line's subcommands do: the CLI composes (configs, experiments found through
the registry, the report as the runner's ``finish``) and hands the pieces to the runner.

:mod:`toolkit.lab.cli.app` parses the arguments and calls these; :func:`run_module` runs an experiment
module as a script.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown
from toolkit.lab.cli.terminal import (
    kept,
    outcome_line,
    print_findings,
    progress_bar,
    tally,
    wrapped,
)

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
    """``toolkit run`` / ``sweep``: the plans of the configs (read and validated once, before
    anything runs), handed to the executor; then the seed groups, their reports and a tally.

    SIGINT or SIGTERM at any moment ends the command with one summary of what is complete and
    the command that finishes the rest, exit status 128 + the signal (130 for Ctrl-C).
    """
    argv = getattr(args, "argv", None)
    ended: list[Any] = []  # the outcomes so far
    planned: list[int] = [0]
    undrawn: list[Path] = []  # complete runs and seed groups whose report is due
    try:
        return _cmd_run(args, ended, planned, undrawn)
    except KeyboardInterrupt as err:  # RunInterrupted too
        for line in _summary(getattr(err, "signum", signal.SIGINT), ended, planned[0],
                             undrawn, sys.argv[1:] if argv is None else argv):
            print(line, file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)


def _cmd_run(args: argparse.Namespace, ended: list[Any], planned: list[int],
             undrawn: list[Path]) -> int:
    from toolkit.lab.errors import ConfigError, RunInterrupted
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
    executor = executor_for(plans, kind=args.executor, workers=args.workers,
                            address=args.address, tls_ca_file=args.tls_ca_file,
                            tls_cert=args.tls_cert, tls_key=args.tls_key,
                            dashboard=args.dashboard)
    if args.resume and not args.dry_run and _nothing_left(plans, quiet=args.quiet):
        return EXIT_OK  # known without importing torch or an experiment
    from toolkit.lab.execute.dask import check_executor, import_distributed

    check_executor(executor)
    if executor.kind == "dask":
        import_distributed()  # a missing extra is an input error, before anything runs
    runs = [spec for p in plans for spec in p.specs()]
    _no_twice(runs, args.configs)
    grouped = len({group_key(r.config) for r in runs}) < len(runs)
    earlier: list[Path] = []
    if args.resume:
        runs, earlier = _resume(runs, quiet=args.quiet)
        if not runs:
            print("nothing to do: every run is complete or running")
            return EXIT_OK
    planned[0] = len(runs)
    from toolkit.lab.execute.local import run_all
    from toolkit.lab.execute.run import check_output_dir

    for root, name in dict.fromkeys((r.config.output_dir, r.experiment.name) for r in runs):
        check_output_dir(root, name, source=runs[0].source, create=not args.dry_run)
    if args.dry_run:
        for r in runs:
            point = " ".join(f"{k}={v}" for k, v in r.sweep_point.items())
            print(f"{r.config.experiment} seed={r.seed} {point}".rstrip())
        print(f"{len(runs)} run(s); executor {executor.kind}")
        return EXIT_OK
    names = list(dict.fromkeys(r.experiment.name for r in runs))
    n = min(executor.workers, len(runs))
    where = {"local": f" in {n} processes" if n > 1 else "",
             "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
    # a seed group gets one report over its seeds once all have ended (none of their own)
    finish = None if args.no_report or grouped else _report_quietly
    bar = progress_bar(len(runs), f"{', '.join(names)}: {len(runs)} runs{where[executor.kind]}",
                       quiet=args.quiet)

    def on_done(i: int, total: int, outcome: Any) -> None:
        ended.append(outcome)
        if finish is not None and outcome.status == "complete":
            undrawn.append(Path(outcome.run_dir))
        bar.update()
        if outcome.status == "failed" or args.verbose:
            bar.write(outcome_line(len(ended) - 1, total, outcome),
                      file=sys.stdout if outcome.status == "complete" else sys.stderr)

    t0, ticking = time.perf_counter(), threading.Event()

    def tick() -> None:  # the bar's elapsed time moves while no run ends
        while not ticking.wait(1):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    if not bar.disable:
        ticker.start()
    try:
        with _notes(args.verbose), contextlib.ExitStack() as stack:
            if args.resume:
                from toolkit.lab.execute.resume import claimed

                runs = stack.enter_context(claimed(runs))
            # what a run says (ctx.say, its own bars) is shown with --verbose only
            _, status = run_all(runs, executor=executor, quiet=not args.verbose or n > 1,
                                finish=finish, on_done=on_done)
    finally:
        ticking.set()
        if ticker.is_alive():
            ticker.join()
        bar.close()
    if status >= 128:
        raise RunInterrupted(status - 128)  # the summary says what is complete
    shown_dirs = [o.run_dir for o in ended if o.status == "complete"]
    if grouped:
        with _notes(args.verbose):
            shown_dirs = _finish_groups(ended, runs, report=not args.no_report, t0=t0,
                                        earlier=earlier, undrawn=undrawn)
        if args.verbose:  # where each seed group's report went (its time is in the tally)
            for folder in shown_dirs:
                if (folder / "group.json").is_file():
                    print(f"seed group: {shown(folder)}", file=sys.stderr)
    if args.quiet:
        return status
    if args.verbose and len(shown_dirs) <= 3:
        for folder in shown_dirs:
            if (folder / "findings.json").is_file():
                print_findings(folder)
    if len(shown_dirs) <= 3:
        tally(shown_dirs)
    else:
        c = runs[0].config
        print(f"{len(shown_dirs)} complete run folders; `toolkit compare "
              f"{shown(Path(c.output_dir) / c.experiment)}` tabulates them")
    return status


def _no_twice(runs: Sequence[Any], configs: Sequence[str]) -> None:
    """The same run planned twice (a config given twice, two files saying the same): refused
    as repeated seeds are, before anything runs."""
    from toolkit.lab.errors import ConfigError

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
    """What an interrupted ``toolkit run`` says: what is complete, what was interrupted (with
    the steps it kept), what did not start, and the commands that finish the rest."""
    name = signal.Signals(signum).name
    head = f"toolkit: interrupted by {name} (exit status {128 + signum})"
    if not ended:
        lines = [head + ("; no run had started" if planned else "")]
    else:
        lines = [f"{head}; of {planned} run{'s' * (planned != 1)}:"]
        for o in ended:
            note = fmt(o.duration_s, "s")
            if o.status == "interrupted":
                note += f"; {kept(Path(o.run_dir))}"
            elif o.status == "failed" and o.error:
                note += f"; {shown(o.error)}"
            lines.append(wrapped(f"{shown(o.run_dir)} ({note})", indent=f"  {o.status:<12} ",
                                 more=" " * 17))
        if planned > len(ended):
            left = planned - len(ended)
            lines.append(f"  {'not started':<12} {left} run{'s' * (left != 1)}")
    commands = []
    if planned > len(ended) or any(o.status != "complete" for o in ended):
        again = list(argv) + (["--resume"] if ended and "--resume" not in argv else [])
        commands.append(shlex.join(["toolkit", *again]))
    drawn = [str(f) for f in undrawn if not (Path(f) / "report.html").is_file()]
    if drawn:
        commands.append(shlex.join(["toolkit", "report", *drawn]))
    if not commands:
        return [*lines, "nothing is left to do: every run is complete"]
    return [*lines, f"to finish: {shown(commands[0])}", *(f"           {shown(c)}"
                                                         for c in commands[1:])]


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
            print(f"skipped (complete): {shown(folder)}")
    print("nothing to do: every run is complete or running")
    return True


def _finish_groups(outcomes: Sequence[Any], runs: Sequence[Any], *, report: bool, t0: float,
                   earlier: Sequence[Path], undrawn: list[Path]) -> list[Path]:
    """The seed group of the complete runs that differ only in their seed (with ``earlier``
    complete runs of ``--resume``), its report, then each complete run outside a group; the
    folders, groups first. A failing report is a warning: the numbers stay valid."""
    from toolkit.lab.report import write_report
    from toolkit.lab.results.records import group_runs, record_group, write_group
    from toolkit.lab.results.view import RunResults

    experiments = {r.experiment.name: r.experiment for r in runs}
    done = [o.run_dir for o in outcomes if o.status == "complete"]
    groups = group_runs([*done, *earlier])
    members = {d for g in groups for d in g}
    failed = [f"a run with another seed ended {o.status}: {o.run_dir}"
              + (f" ({o.error})" if o.error else "") for o in outcomes if o.status != "complete"]
    folders = [write_group(members_of, problems=failed) for members_of in groups]
    singles = [d for d in done if d not in members]
    if report:
        undrawn += [*folders, *singles]
    for folder, run_dir in [*zip(folders, (g[0] for g in groups)), *zip(singles, singles)]:
        if report:
            try:
                write_report(folder, experiments.get(RunResults(run_dir).experiment))
            except Exception as err:
                print(f"toolkit: warning: {shown(folder)}: {type(err).__name__}: {err}",
                      file=sys.stderr)
        if folder in folders:
            record_group(folder, wall_seconds=round(time.perf_counter() - t0, 3))
    return [*folders, *singles]


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
            print(f"skipped (complete): {shown(done)}")
    for running in plan.running:
        print(f"skipped (running now, not started twice): {shown(running)}", file=sys.stderr)
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
    elif broken_names:
        print(f"check: {len(broken_names)} of {len(rows)} experiments cannot be loaded")
        return EXIT_FAILED
    else:
        print(f"check: all {len(rows)} experiments load and follow the contract")
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
    print(f"{outcome.status}  {shown(outcome.run_dir)}  ({fmt(outcome.duration_s, 's')})")
    if outcome.status == "complete":
        tally([outcome.run_dir])
    return outcome.exit_code
