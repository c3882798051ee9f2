"""What the command line's subcommands do: the CLI composes (configs, experiments found through
the registry, the report as the runner's ``finish``) and hands the pieces to the runner.

:mod:`toolkit.lab.cli.app` parses the arguments and calls these; :func:`run_module` runs an experiment
module as a script.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt
from toolkit.lab.cli.terminal import Watcher, last_step, print_findings, tally

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"toolkit: error: {message} (see `{self.prog} --help`)\n")



def _interrupted(outcomes: Sequence[Any], total: int, code: int) -> None:
    """After an interrupt: one line per state of the runs, and what was kept of each."""
    by_state: dict[str, list[Any]] = {}
    for o in outcomes:
        by_state.setdefault(o.status, []).append(o)
    print(f"toolkit: interrupted (exit status {code}); the {total} run(s):", file=sys.stderr)
    for state, runs in by_state.items():
        if state == "interrupted":
            empty = sum(last_step(o.run_dir) is None for o in runs)
            kept = (f"{len(runs) - empty} kept what they had logged"
                    + (f", {empty} had logged no step yet" if empty else ""))
            print(f"  {len(runs)} interrupted: marked in their meta.json; {kept}",
                  file=sys.stderr)
        else:
            print(f"  {len(runs)} {state}: kept", file=sys.stderr)
    if total > len(outcomes):
        print(f"  {total - len(outcomes)} not started: `--resume` runs them (and reruns the "
              f"interrupted ones)", file=sys.stderr)


def _report_quietly(run_dir: Path, experiment: Any = None) -> Path:
    """The report, its notes (graphs laid out without graphviz) kept in the report and off
    the terminal: module-level, so that a pool's workers call it too."""
    from toolkit.lab.report import write_report
    from toolkit.lab.report.render import held_notes

    with held_notes():
        return write_report(run_dir, experiment)


def cmd_run(args: argparse.Namespace) -> int:
    """``toolkit run`` / ``sweep``: read each config once (no torch yet), start the pool's
    fork server while the experiments load, plan, then hand the runs to the executor."""
    from toolkit.lab.errors import ConfigError
    from toolkit.lab.execute.dask import check_executor
    from toolkit.lab.execute.local import start_pool_server
    from toolkit.lab.execute.run import check_output_dir
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
    executor = executor_for(plans, kind=args.executor, workers=args.workers,
                            address=args.address, tls_ca_file=args.tls_ca_file,
                            tls_cert=args.tls_cert, tls_key=args.tls_key,
                            dashboard=args.dashboard)
    check_executor(executor)
    if executor.kind == "dask":
        from toolkit.lab.execute.dask import import_distributed

        import_distributed()  # a missing extra is an input error, before anything runs
    elif not args.dry_run and min(executor.workers, total) > 1:
        start_pool_server()  # its imports overlap this process's planning
    runs = [spec for p in plans for spec in p.specs()]
    grouped = len({group_key(r.config) for r in runs}) < len(runs)
    earlier: list[Path] = []
    if args.resume:
        runs, earlier = _resume(runs, quiet=args.quiet)
        if not runs:
            print("nothing to do: every run is complete or running")
            return EXIT_OK
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
            return _run(args, mine, executor, grouped, earlier)
    return _run(args, runs, executor, grouped, earlier)


def _run(args: argparse.Namespace, runs: list[Any], executor: Any, grouped: bool,
         earlier: list[Path]) -> int:
    from toolkit.lab.execute.local import run_all

    on_terminal = sys.stderr.isatty() and not args.quiet
    if not args.quiet and len(runs) > 1:
        n = min(executor.workers, len(runs))
        where = {"local": f" in {n} processes" if n > 1 else "",
                 "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
        print(f"{len(runs)} runs{where[executor.kind]}", flush=True)
    # a seed group gets one report over its seeds once all have ended (none of their own)
    finish = None if args.no_report or grouped else _report_quietly
    if finish is not None and args.verbose:
        from toolkit.lab.report import write_report as finish
    if on_terminal and len(runs) == 1 and executor.kind == "local":
        c = runs[0].config
        print(f"running {c.experiment} (seed {c.seed}, {c.dtype}, {c.threads} thread"
              f"{'s' * (c.threads != 1)})", file=sys.stderr, flush=True)
    watcher = Watcher(len(runs), quiet=args.quiet, verbose=args.verbose)
    t0 = time.perf_counter()
    try:
        with _notes(args.verbose):
            outcomes, status = run_all(runs, executor=executor, quiet=args.quiet,
                                       finish=finish, on_done=watcher, watch=watcher.watch)
    finally:
        watcher.close()
    if status >= 128:
        _interrupted(outcomes, len(runs), status)
    shown = [o.run_dir for o in outcomes if o.status == "complete"]
    if grouped and status < 128:
        with _notes(args.verbose):
            shown = _finish_groups(outcomes, runs, report=not args.no_report, t0=t0,
                                   say=_say if on_terminal or args.verbose else None,
                                   earlier=earlier)
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
                   say: Any, earlier: Sequence[Path]) -> list[Path]:
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
    for members_of in groups:
        folder = write_group(members_of, problems=failed)
        t1 = time.perf_counter()
        draw(folder, RunResults(members_of[0]).experiment)
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


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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
