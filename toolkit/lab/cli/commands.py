"""What the command line's subcommands do: the CLI composes (configs, experiments found through
the registry, the report as the runner's ``finish``) and hands the pieces to the runner.

:mod:`toolkit.lab.cli.app` parses the arguments and calls these; :func:`run_module` runs an experiment
module as a script.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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


def check_blocks(specs: Sequence[Any]) -> None:
    """Every ``disable_blocks`` pattern must match a block its experiment declares
    (:attr:`~toolkit.lab.runner.Experiment.blocks`); ConfigError otherwise, before anything runs. An
    experiment that declares none is not checked."""
    import fnmatch

    from toolkit.lab.runner.errors import ConfigError, suggest

    for spec in specs:
        config, declared = spec.config, spec.experiment.blocks
        for pattern in config.disable_blocks if declared else ():
            if not any(fnmatch.fnmatchcase(name, pattern) for name in declared):
                hint = suggest(pattern, declared)
                prefix = f"{declared[0].split('.')[0]}.*"
                raise ConfigError(config.source, "disable_blocks", f"{pattern!r} matches no "
                                  f"block of {config.experiment} (its blocks: "
                                  f"{', '.join(declared)}), so blocked and unblocked would "
                                  f"compute the same thing", (hint + " " if hint else "")
                                  + f"use a block name or a pattern such as {prefix!r}")


def _executor(args: argparse.Namespace, specs: set[Any]) -> Any:
    """The executor of the configs' [executor] tables (``specs``), with the command line's
    options on top."""
    from toolkit.lab.runner.config import ExecutorSpec
    from toolkit.lab.runner.errors import ConfigError

    if len(specs) > 1 and args.executor is None:
        raise ConfigError("CONFIG", "executor", "the configs name different [executor] tables",
                          "run them separately or choose one with --executor")
    base = next(iter(specs)) if specs else ExecutorSpec()
    values = base.model_dump()
    if args.executor is not None:
        values["kind"] = args.executor
    if args.address is not None:
        values["address"] = args.address
    if args.workers is not None:
        if args.workers < 1:
            raise ConfigError("--workers", "", f"must be >= 1, got {args.workers}",
                              "use --workers 1 (sequential) or more")
        values["workers"] = args.workers
    for key in ("tls_ca_file", "tls_cert", "tls_key", "insecure", "dashboard"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    spec = ExecutorSpec(**values)
    from toolkit.lab.runner.dask_connect import check_executor

    check_executor(spec)  # a plain tcp:// address off this machine is refused here
    return spec


def _draw_report(run_dir: Path, experiment: Any = None, *, verbose: bool = False,
                 drafts: Any = None) -> None:
    """The command line's ``finish`` hook on a terminal: draw the report and say how long it
    took."""
    from toolkit.lab.report import draw_report

    print("  drawing the report ...", end="", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with _notes(verbose):  # printed after the line, not inside it
        try:
            draw_report(run_dir, experiment, drafts=drafts)
        finally:
            print(f" {fmt(time.perf_counter() - t0, 's')}", file=sys.stderr, flush=True)


def _report_here(run_dir: Path, experiment: Any = None, *, board: Any, terminal: bool,
                 verbose: bool) -> None:
    """The ``finish`` hook of runs made in this process: the report on every core, with the
    sections drawn while the run went on (``board``, a
    :class:`~toolkit.lab.report.drafts.DraftBoard`); on a terminal it says how long it took,
    and its notes reach the terminal only with ``--verbose``."""
    drafts = board.pop(run_dir)
    if terminal:
        _draw_report(run_dir, experiment, verbose=verbose, drafts=drafts)
        return
    from toolkit.lab.report import draw_report
    from toolkit.lab.report.render import held_notes

    with contextlib.nullcontext() if verbose else held_notes():
        draw_report(run_dir, experiment, drafts=drafts)


def _report_quietly(run_dir: Path, experiment: Any = None) -> Path:
    """``write_report`` with its notes (graphs laid out without graphviz) kept in the report,
    off the terminal: module-level, so that a pool's workers call it too."""
    from toolkit.lab.report import write_report
    from toolkit.lab.report.render import held_notes

    with held_notes():
        return write_report(run_dir, experiment)


def _pool_ahead(args: argparse.Namespace, seeds: Any) -> None:
    """When the configs will run in a local pool, start its workers' fork server now: it
    imports torch and the experiments while this process plans the runs (seconds earlier than
    when the pool is made). A config that cannot be read is left to the planning to report."""
    from toolkit.lab.runner.planning import count_runs
    from toolkit.lab.runner.sweep import start_pool_server

    try:
        counted = [count_runs(path, args.overrides, seeds=seeds) for path in args.configs]
        executor = _executor(args, {spec for _, spec in counted})
    except Exception:
        return
    if executor.kind == "local" and min(executor.workers, sum(n for n, _ in counted)) > 1:
        start_pool_server()


def cmd_run(args: argparse.Namespace) -> int:
    from toolkit.lab.runner.config import parse_seeds
    from toolkit.lab.runner.planning import plan
    from toolkit.lab.runner.sweep import run_configs

    if args.max_runs < 1:
        from toolkit.lab.runner.errors import ConfigError

        raise ConfigError("--max-runs", "", f"must be >= 1, got {args.max_runs}",
                          "give the most runs this command may make, e.g. --max-runs 20000")
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if not args.dry_run:
        _pool_ahead(args, seeds)
    # planned once: each run's config, experiment (entry point or loose file), validated params
    # and device, handed as they are to whichever executor runs them
    runs = []
    for path in args.configs:
        runs += plan(path, args.overrides, seeds=seeds, output_dir=args.out,
                     max_runs=args.max_runs)
    if len(runs) > args.max_runs:
        from toolkit.lab.runner.errors import ConfigError

        raise ConfigError(" ".join(args.configs), "", f"give {len(runs):,} runs together, "
                          f"above the limit of {args.max_runs:,}", "run fewer configs at "
                          "once, or raise the limit with --max-runs N")
    check_blocks(runs)
    executor = _executor(args, {r.config.executor for r in runs})
    if executor.kind == "dask":
        from toolkit.lab.runner.dask_executor import import_distributed

        import_distributed()  # a missing extra is an input error, before anything runs
    from toolkit.lab.runner.seeds import finish_groups, makes_groups

    configs = [r.config for r in runs]
    grouped = makes_groups(configs)  # runs that differ only in their seed: one seed group
    earlier: list[Path] = []
    if args.resume:
        runs, earlier = _resume(runs, quiet=args.quiet)
        configs = [r.config for r in runs]
        if not configs:
            print("nothing to do: every run is complete or running")
            return EXIT_OK
    from toolkit.lab.runner.run import check_output_dir

    for config in configs:  # before anything is printed or run
        check_output_dir(config, create=not args.dry_run)
    if args.dry_run:
        for c in configs:
            point = " ".join(f"{k}={v}" for k, v in c.sweep_point.items())
            print(f"{c.experiment} seed={c.seed} {point}".rstrip())
        print(f"{len(configs)} run(s); executor {executor.kind}")
        return EXIT_OK
    on_terminal = sys.stderr.isatty() and not args.quiet
    if not args.quiet and len(configs) > 1:
        n = min(executor.workers, len(configs))
        where = {"local": f" in {n} processes" if n > 1 else "",
                 "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
        print(f"{len(configs)} runs{where[executor.kind]}", flush=True)
    finish = None
    in_process = executor.kind == "local" and (executor.workers <= 1 or len(configs) <= 1)
    # A seed group gets one report over its seeds, drawn once all of them have finished
    # (their own reports are skipped).
    board = None
    if not args.no_report and not grouped:
        finish = _report_quietly  # in a pool worker too: the report says its notes itself
        if args.verbose:
            from toolkit.lab.report import write_report as finish
        if in_process:  # a showcase's sections are drawn as its experiments end
            from toolkit.lab.report.drafts import DraftBoard

            board = DraftBoard()
            finish = functools.partial(_report_here, board=board, terminal=on_terminal,
                                       verbose=args.verbose)
    if in_process and on_terminal and len(configs) == 1:
        c = configs[0]
        print(f"running {c.experiment} (seed {c.seed}, {c.dtype}, {c.threads} thread"
              f"{'s' * (c.threads != 1)})", file=sys.stderr, flush=True)
    on_child_done = None
    if board is not None:
        def on_child_done(index: int, run_dir: str, name: str) -> None:
            board.child_done(runs[index].experiment, run_dir, name)
    watcher = Watcher(len(configs), quiet=args.quiet, verbose=args.verbose,
                      on_child_done=on_child_done)
    t0 = time.perf_counter()
    try:
        with _notes(args.verbose):
            outcomes, status = run_configs(runs, executor=executor, quiet=args.quiet,
                                           finish=finish, on_done=watcher, watch=watcher.watch)
    finally:
        watcher.close()
        if board is not None:
            board.close()
    if status >= 128:
        _interrupted(outcomes, len(configs), status)
    shown = [o.run_dir for o in outcomes if o.status == "complete"]
    if grouped and status < 128:
        from toolkit.lab.report import draw_report

        say = _say if on_terminal or args.verbose else None
        with _notes(args.verbose):
            shown = finish_groups(outcomes, finish=None if args.no_report else draw_report,
                                  experiments={r.experiment.name: r.experiment for r in runs},
                                  t0=t0, say=say, earlier=earlier)
    if args.quiet:
        return status
    if args.verbose and len(shown) <= 3:
        for folder in shown:
            if (folder / "findings.json").is_file():
                print_findings(folder)
    if len(shown) <= 3:
        tally(shown)
    else:
        print(f"{len(shown)} complete run folders; `toolkit compare "
              f"{Path(configs[0].output_dir) / configs[0].experiment}` tabulates them")
    return status


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
    from toolkit.lab.runner.sweep import plan_resume

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
    from toolkit.lab.runner.registry import config_files, describe, discover, load_all

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
    from toolkit.lab.runner.errors import ConfigError
    from toolkit.lab.runner.planning import plan_one
    from toolkit.lab.runner.registry import Experiment
    from toolkit.lab.runner.run import execute

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
    outcome = execute(spec, finish=None if args.no_report else _draw_report)
    print(f"{outcome.status}  {outcome.run_dir}  ({fmt(outcome.duration_s, 's')})")
    if outcome.status == "complete":
        tally([outcome.run_dir])
    return outcome.exit_code
