"""Command-line interface: ``toolkit`` / ``python -m toolkit``.

Subcommands: ``run``, ``sweep``, ``report``, ``compare``, ``list`` and ``demo``. Mistakes in user
input print one line (file, key path, fix) and exit with status 2; a failed run exits with 1, an
interrupted one with 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

MAIN_EPILOG = """\
examples:
  toolkit list                                   experiments and configs
  toolkit run configs/showcase.toml              every experiment's quick comparison, one report
  toolkit run configs/em_gmm.toml --set params.n_iter=20 --seeds 0,1,2
  toolkit sweep configs/em_gmm_sweep.toml --workers 2   the [sweep] grid in 2 processes
  toolkit sweep configs/em_gmm_sweep.toml --executor dask --address tcp://HOST:8786
  toolkit report results/em_gmm/<run_id>         redraw figures and report.html
  toolkit compare results/em_gmm                 mean ± std over seeds, blocked vs unblocked

exit status: 0 ok, 1 a run failed, 2 bad input, 130/143 interrupted (SIGINT/SIGTERM)
"""

RUN_EPILOG = """\
examples:
  toolkit run configs/td_learning.toml
  toolkit run configs/td_learning.toml --set params.chain_steps=50 --set dtype=float32
  toolkit run configs/td_learning.toml --seeds 0,1,2 --workers 3 --out runs
  toolkit run configs/a.toml configs/b.toml --quiet

--set KEY=VALUE: KEY is a dotted path (params.n_steps, dtype, sweep.params.lr); VALUE is a
TOML literal (10, 1e-3, true, [1, 2], "text"); a bare word that is not a literal (cpu,
em.*) is taken as a string. Every run of every CONFIG is validated before the first starts.
"""

SWEEP_EPILOG = """\
A config's [sweep] table lists values per key; every combination is one run, times the
seeds (seeds = [0, 1, 2] or --seeds):

  [sweep]
  params.lr = [0.1, 0.5]
  dtype = ["float32", "float64"]

examples:
  toolkit sweep configs/td_learning.toml --set sweep.params.lr=[0.1,0.5] --workers 2
  toolkit sweep configs/td_learning.toml --seeds 0-4 --dry-run
  toolkit sweep configs/td_learning.toml --seeds 0-4 --resume   (finish an interrupted sweep)
  toolkit sweep configs/td_learning.toml --seeds 0-7 --executor dask --workers 2
  toolkit sweep configs/td_learning.toml --executor dask --address tcp://10.0.0.5:8786

--executor dask sends each run to a Dask cluster (pip install ".[distributed]"): the scheduler at
--address, or a LocalCluster of --workers processes started for the sweep. Workers return the
files of each run and this machine writes the run directories: no shared filesystem is needed.
"""

REPORT_EPILOG = """\
examples:
  toolkit report results/td_learning/20250101T120000Z__seed0__a1b2c3
  toolkit report results/td_learning/*        (every run directory given)
"""

COMPARE_EPILOG = """\
Aggregates every complete run below DIR: runs of the same experiment and config (seed aside)
form a group; each numeric summary value gets mean ± std over seeds, blocked and unblocked
side by side. Writes DIR/compare.csv and DIR/compare.html (with a figure) and prints a table.

examples:
  toolkit compare results/td_learning
  toolkit compare results --out comparison
"""


def demo() -> int:
    """Show the primitive: one gradient with and without a named block."""
    import torch

    from toolkit import compare_gradients, disable_blocks, record_blocks, stop_gradient

    x = torch.tensor(3.0, requires_grad=True)

    def loss() -> torch.Tensor:
        return x * stop_gradient(x, name="demo.target")

    with record_blocks() as names:
        cmp = compare_gradients(loss, {"x": x})
    print("loss = x * stop_gradient(x, name='demo.target') at x = 3")
    print(f"blocked gradient   d/dx = {cmp.blocked['x'].item():.1f}  (the target is a constant)")
    with disable_blocks("demo.*"):
        print(f"unblocked gradient d/dx = {torch.autograd.grad(loss(), x)[0].item():.1f}  (= 2x)")
    print(f"blocks seen: {names}")
    print(cmp)
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"toolkit: error: {message} (see `{self.prog} --help`)\n")


def _add_debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show full tracebacks for input errors")


def _add_run_options(p: argparse.ArgumentParser, *, many: bool) -> None:
    if many:
        p.add_argument("configs", nargs="+", metavar="CONFIG", help="TOML config file(s)")
    else:
        p.add_argument("configs", nargs=1, metavar="CONFIG", help="TOML config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable), e.g. --set params.n_steps=10")
    p.add_argument("--seeds", metavar="LIST", help="replicate seeds, e.g. 0,1,2 or 0-4 "
                   "(replaces seed/seeds of the config)")
    p.add_argument("--out", metavar="DIR", help="output root (replaces output_dir)")
    p.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="where the runs run: local (default; this process, or a pool of "
                        "--workers processes) or dask (a Dask cluster; see --address)")
    p.add_argument("--address", metavar="tcp://HOST:PORT", default=None,
                   help="Dask scheduler to send the runs to (with --executor dask; without it "
                        "a LocalCluster of --workers processes is started)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes of the local pool or of the LocalCluster (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bars, less output")
    p.add_argument("--no-report", action="store_true",
                   help="skip figures and report.html (draw later with `toolkit report`)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs only")
    p.add_argument("--resume", action="store_true",
                   help="skip runs whose exact config (seed included) already has a complete "
                        "run under the output folder, e.g. to finish an interrupted sweep")
    _add_debug(p)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="toolkit", formatter_class=fmt, epilog=MAIN_EPILOG,
                     description="Run stop_gradient experiments with and without their blocks, "
                                 "and report the difference.")
    parser.add_argument("--debug", action="store_true",
                        help="show full tracebacks for input errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    p = sub.add_parser("run", help="run config(s): each seed and sweep point is one run",
                       formatter_class=fmt, epilog=RUN_EPILOG,
                       description="Run experiment configs and write one run directory per run.")
    _add_run_options(p, many=True)
    p = sub.add_parser("sweep", help="run the [sweep] grid of a config (× seeds)",
                       formatter_class=fmt, epilog=SWEEP_EPILOG,
                       description="Expand a config's [sweep] grid and seeds and run every "
                                   "member.")
    _add_run_options(p, many=False)
    p = sub.add_parser("report", help="redraw figures, report.html and report.md of runs",
                       formatter_class=fmt, epilog=REPORT_EPILOG,
                       description="Regenerate figures/, report.html and report.md from the "
                                   "files of run directories.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    _add_debug(p)
    p = sub.add_parser("compare", help="aggregate runs: mean ± std over seeds",
                       formatter_class=fmt, epilog=COMPARE_EPILOG,
                       description="Aggregate the complete runs below DIR.")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--out", metavar="DIR", help="where compare.csv/compare.html go "
                   "(default: DIR)")
    _add_debug(p)
    p = sub.add_parser("list", help="list experiments and configs",
                       description="List the experiments (with their description) and the "
                                   "configs.")
    p.add_argument("--check", action="store_true",
                   help="import every experiment module and check its contract (slower: "
                        "imports torch)")
    _add_debug(p)
    sub.add_parser("demo", help="show the stop_gradient primitive on a one-line example")
    return parser


def _outcome_line(i: int, total: int, outcome: object) -> tuple[str, object]:
    from toolkit.runner import RunOutcome

    assert isinstance(outcome, RunOutcome)
    line = f"[{i + 1}/{total}] {outcome.status:<11} {outcome.run_dir}  ({outcome.duration_s:.1f} s)"
    if outcome.error and outcome.status == "failed":
        line += f"\n    error: {outcome.error}"
    if outcome.status == "interrupted":
        line += f"\n    kept what was logged; draw it with: toolkit report {outcome.run_dir}"
    return line, (sys.stdout if outcome.status == "complete" else sys.stderr)


def _executor(args: argparse.Namespace, configs: list) -> object:
    """The executor of the configs' [executor] table, with the command line's options on top."""
    from toolkit.runner.config import ExecutorSpec
    from toolkit.runner.errors import ConfigError

    specs = {c.executor for c in configs}
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
    if values["address"] and values["kind"] != "dask":
        raise ConfigError("--address", values["address"], "is only used by the dask executor",
                          "add --executor dask")
    return ExecutorSpec(**values)


def _draw_report(run_dir: Path) -> None:
    """The command line's ``finish`` hook: draw the report and say how long it took."""
    import time

    from toolkit.report import draw_report

    print("  drawing the report ...", end="", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        draw_report(run_dir)
    finally:
        print(f" {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


class _Progress:
    """Counts finished runs (a bar on a terminal) and prints one line per run."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.bar = None
        if total > 1 and not quiet and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="run", desc="runs", file=sys.stderr, leave=False)

    def __call__(self, i: int, total: int, outcome: object) -> None:
        if self.bar is not None:
            self.bar.update(1)
        line, stream = _outcome_line(i, total, outcome)
        if self.bar is not None:
            self.bar.write(line, file=stream)
        else:
            print(line, file=stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _cmd_run(args: argparse.Namespace) -> int:
    from toolkit.runner.config import load_config, parse_seeds
    from toolkit.runner.sweep import run_configs

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    configs = []
    for path in args.configs:
        configs += load_config(path, args.overrides, seeds=seeds, output_dir=args.out)
    executor = _executor(args, configs)
    if executor.kind == "dask":
        from toolkit.runner.dask_executor import _import_distributed

        _import_distributed()  # a missing extra is an input error, before anything runs
    from toolkit.runner.seeds import finish_groups, makes_groups

    grouped = makes_groups(configs)  # runs that differ only in their seed: one seed group
    earlier: list[Path] = []
    if args.resume:
        from toolkit.runner.sweep import find_complete

        todo = []
        for config in configs:
            done = find_complete(config)
            if done is None:
                todo.append(config)
            else:
                earlier.append(done)
                if not args.quiet:
                    print(f"skipped (complete): {done}")
        configs = todo
        if not configs:
            print("nothing to do: every run is complete")
            return EXIT_OK
    if args.dry_run:
        for c in configs:
            point = " ".join(f"{k}={v}" for k, v in c.sweep_point.items())
            print(f"{c.experiment} seed={c.seed} {point}".rstrip())
        print(f"{len(configs)} run(s); executor {executor.kind}")
        return EXIT_OK
    if not args.quiet and len(configs) > 1:
        where = {"local": f" in {executor.workers} processes" if executor.workers > 1 else "",
                 "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
        print(f"{len(configs)} runs{where[executor.kind]}", flush=True)
    from toolkit.runner.run import check_output_dir

    for config in configs:  # before anything is printed or run
        check_output_dir(config)
    finish = None
    in_process = executor.kind == "local" and (executor.workers <= 1 or len(configs) <= 1)
    # A seed group gets one report over its seeds, drawn once all of them have finished
    # (their own reports are skipped).
    if not args.no_report and not grouped:
        from toolkit.report import write_report as finish
        if in_process and not args.quiet:
            finish = _draw_report  # says what it does and how long it took
    if in_process and not args.quiet and len(configs) == 1:
        c = configs[0]
        print(f"running {c.experiment} (seed {c.seed}, {c.dtype}, {c.threads} thread"
              f"{'s' * (c.threads != 1)})", file=sys.stderr, flush=True)
    progress = _Progress(len(configs), args.quiet)
    t0 = time.perf_counter()
    try:
        outcomes, status = run_configs(configs, executor=executor, quiet=args.quiet,
                                       finish=finish, on_done=progress)
    finally:
        progress.close()
    shown = [o.run_dir for o in outcomes]
    if grouped and status < 128:
        from toolkit.report import draw_report

        shown = finish_groups(outcomes, finish=None if args.no_report else draw_report,
                              t0=t0, say=None if args.quiet else _say, earlier=earlier)
    if not args.quiet and len(shown) <= 3:
        for folder in shown:
            if (folder / "findings.json").is_file():
                _print_findings(folder)
    if not args.no_report and not args.quiet:
        for folder in shown:
            report = folder / "report.html"
            if report.exists():
                print(f"report: {report}")
    return status


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_findings(run_dir: Path) -> None:
    """What a run found (each child of a showcase), with verdicts and the wall time."""
    import json

    from toolkit.runner import read_findings

    findings = read_findings(run_dir)
    path = run_dir / "findings.json"
    problems = json.loads(path.read_text(encoding="utf-8")).get("problems", []) \
        if path.is_file() else []
    for problem in problems:
        print(f"toolkit: warning: {problem}", file=sys.stderr)
    for section, items in findings.items():
        print(f"{section}:")
        for f in items:
            mark = {True: "+", False: "!", None: "·"}[f.verdict]
            print(f"  {mark} {f}")
    if not (run_dir / "meta.json").is_file():  # a seed group
        info = json.loads((run_dir / "group.json").read_text(encoding="utf-8"))
        if info.get("wall_seconds") is not None:
            print(f"wall time {info['wall_seconds']:.1f} s for {len(info['seeds'])} seeds")
        return
    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    if meta.get("wall_seconds") is not None:
        print(f"wall time {meta['wall_seconds']:.1f} s (experiments {meta['duration_s']:.1f} s"
              + (f", report {meta['finish_s']:.1f} s" if meta.get("finish_s") else "") + ")")


def _cmd_sweep(args: argparse.Namespace) -> int:
    return _cmd_run(args)


def _cmd_report(args: argparse.Namespace) -> int:
    from toolkit.report import draw_report
    from toolkit.runner import ConfigError

    for run_dir in args.run_dirs:
        if not ((Path(run_dir) / "meta.json").is_file()
                or (Path(run_dir) / "group.json").is_file()):
            raise ConfigError(run_dir, "", "not a run directory (no meta.json) nor a seed "
                              "group (no group.json)", "give a folder such as "
                              "results/<experiment>/<run_id>")
    for run_dir in args.run_dirs:
        print(draw_report(run_dir))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from toolkit.report.compare import compare_runs, format_table, write_compare
    from toolkit.runner import ConfigError

    root = Path(args.directory)
    if not root.is_dir():
        raise ConfigError(args.directory, "", "no such directory",
                          "give a folder that holds run directories, e.g. results/<experiment>")
    table = compare_runs(root)
    if not table.rows:
        raise ConfigError(args.directory, "", "no complete runs below this folder",
                          "run some first (`toolkit run CONFIG --seeds 0,1`)")
    out = Path(args.out) if args.out else root
    csv_path, html_path = write_compare(table, out)
    print(format_table(table))
    print(f"\n{csv_path}\n{html_path}")
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    from toolkit.runner.registry import config_files, describe, discover, load_all

    found = discover()
    # Read from the sources (no torch import, instant); --check imports every module.
    rows: dict[str, tuple[str, bool, str | None]] = {}
    for name, path in found.items():
        info = describe(name, path)
        rows[name] = (info.description, info.has_quick, info.problem)
    if args.check:
        loaded, broken = load_all()
        for name, exp in loaded.items():
            rows[name] = (exp.description, exp.quick is not None, None)
        for name, problem in broken.items():
            rows[name] = (rows[name][0], rows[name][1], problem)
    print("experiments:")
    width = max([len(n) for n in rows] + [4])
    for name, (description, has_quick, problem) in sorted(rows.items()):
        if problem:
            print(f"  {name:<{width}}  BROKEN: {problem}")
            continue
        quick = "" if has_quick or name == "showcase" else "  (no QUICK: not in the showcase)"
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``toolkit``; returns the exit status.

    Ctrl-C at any moment (start-up included) ends with one line and status 130.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("toolkit: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    from toolkit.runner.errors import ConfigError

    handlers = {"run": _cmd_run, "sweep": _cmd_sweep, "report": _cmd_report,
                "compare": _cmd_compare, "list": _cmd_list}
    try:
        return handlers[args.command](args)
    except ConfigError as err:
        if args.debug or os.environ.get("TOOLKIT_DEBUG"):
            raise
        print(f"toolkit: error: {err.line()}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
