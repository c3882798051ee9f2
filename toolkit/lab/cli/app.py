"""Command-line interface: ``toolkit`` / ``python -m toolkit``.

Subcommands: ``run``, ``sweep``, ``report``, ``compare``, ``check``, ``list`` and ``demo``.

Every command has one error path: a mistake in the input, a damaged results file, or a file or
folder that cannot be read or written (a full disk, a read-only folder, a file where a folder
should be) prints one line, ``toolkit: error: <file>: <what failed>; <what to do>``, never a
traceback (``--debug`` shows it). Exit status:

- 0: done;
- 1: a run failed (its meta.json says why), or a command could not do all it was asked (a
  damaged run skipped by ``report``, damage found by ``check``), or an unexpected error (a bug:
  ``--debug`` shows its traceback);
- 2: bad input, or a file or folder that cannot be read or written;
- 130 / 143: interrupted (SIGINT / SIGTERM); ``run`` and ``sweep`` then print one summary of
  what is complete and the command that finishes the rest.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from toolkit._utils.formatting import shown
from toolkit.lab.cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, run_module
from toolkit.lab.plan.config import DEFAULT_MAX_RUNS

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "demo", "main", "run_module"]


MAIN_EPILOG = """\
examples:
  toolkit list                                   experiments and configs
  toolkit run configs/showcase.toml              every experiment's quick comparison, one report
  toolkit run configs/em_gmm.toml --set params.n_iter=20 --seeds 0,1,2
  toolkit sweep configs/em_gmm_sweep.toml --workers 2   the [sweep] grid in 2 processes
  toolkit sweep configs/em_gmm_sweep.toml --executor dask --address tls://HOST:8786 \\
      --tls-ca-file ca.pem --tls-cert cert.pem --tls-key key.pem
  toolkit report results/em_gmm/<run_id>         redraw figures and report.html
  toolkit compare results/em_gmm                 mean ± std over seeds, blocked vs unblocked
  toolkit check results                          damaged files and abandoned runs

exit status:
  0        done
  1        a run failed; report skipped a damaged run; check found damage; an unexpected error
  2        bad input; a damaged input file; a file or folder that cannot be read or written
           (full disk, read-only, a file in the way): one line names it and what to do
  130/143  interrupted (SIGINT/SIGTERM): one summary of what is complete and the command
           that finishes the rest (`toolkit run ... --resume`, `toolkit report DIR`)
"""

RUN_EPILOG = """\
examples:
  toolkit run configs/td_learning.toml
  toolkit run configs/td_learning.toml --set params.chain_steps=50 --set dtype=float32
  toolkit run configs/td_learning.toml --seeds 0,1,2 --workers 3 --out runs
  toolkit run configs/a.toml configs/b.toml --quiet
  toolkit run configs/em_gmm.toml --seeds 0,1 --tensorboard runs
  tensorboard --logdir runs         (live curves, blocked and unblocked overlaid)

--set KEY=VALUE: KEY is a dotted path (params.n_steps, dtype, sweep.params.lr); VALUE is a
TOML literal (10, 1e-3, true, [1, 2], "text"); a bare word that is not a literal (cpu,
em.*) is taken as a string. Every run of every CONFIG is validated before the first starts.

--tensorboard DIR (or tensorboard = "DIR" in a config; pip install -e ".[tensorboard]"):
each run also writes what it logs as TensorBoard event files, DIR/<experiment>/<run_id>/
<variant>/, flushed every few seconds and closed when the run ends, however it ends. TensorBoard shows blocked and unblocked as two runs on one chart.
metrics.jsonl stays the record; summary.json is the same with or without it. With a remote
Dask cluster the event files are written on the worker, under the same path.
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
  toolkit sweep configs/td_learning.toml --executor dask --address tls://10.0.0.5:8786 \\
      --tls-ca-file ca.pem --tls-cert cert.pem --tls-key key.pem

--executor dask sends each run to a Dask cluster (pip install -e ".[distributed]"): the
scheduler at --address, or a LocalCluster of --workers processes started for the sweep
(listening on 127.0.0.1 only; --dashboard serves its dashboard there and prints the link).
Each worker writes its run directory under the output folder: a remote cluster needs it shared.
Every cluster speaks TLS with mutual certificates: the LocalCluster with certificates made for
the sweep alone, a scheduler at --address (tls:// only) with the --tls-* files or dask's
distributed.comm.tls.* settings. Plain tcp:// is refused, on 127.0.0.1 too.
"""

REPORT_EPILOG = """\
examples:
  toolkit report results/td_learning/20250101T120000Z__seed0__a1b2c3
  toolkit report results/td_learning/*        (every run directory given)
"""

CHECK_EPILOG = """\
Reads every run directory and seed group below DIR and checks each file against the results
format (results/README.md): JSON and TOML that parse, the keys and statuses the format names,
metrics rows with a step, readable artifacts. Lists each damaged file and each abandoned run
(meta.json says running but its process is gone). Exit status 1 when something is damaged.

examples:
  toolkit check results
  toolkit check results/td_learning
"""

COMPARE_EPILOG = """\
Pools every complete run below DIR (with --latest, only those of the command that ran last):
runs of the same experiment and config (seed aside) form a config; each numeric summary value
gets its mean and range over seeds, blocked and unblocked side by side with their difference
paired by seed. Configs are labelled by the keys that differ between them (an earlier run with
other parameters is a config of its own); the figures draw every config on the same axes.
Prints which runs were pooled and each config's headline values (at most 120 characters
wide); writes DIR/compare.csv (every value, with std), DIR/compare.html (every value, the runs
pooled, the figures) and DIR/compare_figures/.

examples:
  toolkit compare results/td_learning
  toolkit compare results/em_gmm --latest
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


def _add_debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of an error")


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
    p.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, metavar="N",
                   help=f"refuse, before making any, more runs than N (default "
                        f"{DEFAULT_MAX_RUNS:,}): a typo in --seeds or a [sweep] list must not "
                        f"fill a shared machine")
    where = p.add_argument_group("where the runs run")
    where.add_argument("--executor", choices=("local", "dask"), default=None,
                       help="local (default; this process, or a pool of --workers processes) "
                            "or dask (a Dask cluster; see the Dask options)")
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes of the local pool or of the LocalCluster (default 1)")
    dask = p.add_argument_group("Dask cluster (with --executor dask)")
    dask.add_argument("--address", metavar="tls://HOST:PORT", default=None,
                      help="scheduler to send the runs to (without it a LocalCluster of "
                           "--workers processes is started on loopback, TLS too): tls:// "
                           "only, with the --tls-* files")
    dask.add_argument("--tls-ca-file", metavar="FILE", default=None,
                      help="CA certificate of the cluster (PEM), for a tls:// address "
                           "(default: dask's distributed.comm.tls.ca-file)")
    dask.add_argument("--tls-cert", metavar="FILE", default=None,
                      help="this client's certificate (PEM), signed by that CA "
                           "(default: distributed.comm.tls.client.cert)")
    dask.add_argument("--tls-key", metavar="FILE", default=None,
                      help="this client's private key (PEM; not needed when it is in the "
                           "certificate file; default: distributed.comm.tls.client.key)")
    dask.add_argument("--dashboard", action="store_true", default=None,
                      help="serve the local cluster's dashboard (on 127.0.0.1) and print its "
                           "link; off by default")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no tally")
    p.add_argument("--verbose", action="store_true",
                   help="also every finding in full, each finished run, what the runs say "
                        "and the report's notes (the full findings are always in findings.md)")
    p.add_argument("--no-report", action="store_true",
                   help="skip figures and report.html (draw later with `toolkit report`)")
    p.add_argument("--tensorboard", metavar="DIR", default=None,
                   help="live curves: every logged metric also goes to TensorBoard event "
                        "files in DIR/<experiment>/<run_id>/<variant>/, one run per variant "
                        "(blocked and unblocked overlaid); `tensorboard --logdir DIR` shows "
                        "them. Needs pip install -e \".[tensorboard]\"")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs only")
    p.add_argument("--resume", action="store_true",
                   help="skip runs whose exact config (seed included) already has a complete "
                        "run under the output folder, e.g. to finish an interrupted sweep")
    _add_debug(p)


def _version() -> str:
    """``toolkit 0.1.0 (python 3.11.7, torch 2.13.0, numpy ..., ...)``: the versions it runs
    with, read from the installed packages' metadata (nothing is imported)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import toolkit

    found = [f"python {platform.python_version()}"]
    for name in ("torch", "numpy", "scipy", "scikit-learn", "matplotlib"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return f"toolkit {toolkit.__version__} ({', '.join(found)})"


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = Parser(prog="toolkit", formatter_class=fmt, epilog=MAIN_EPILOG,
                     description="Run stop_gradient experiments with and without their blocks, "
                                 "and report the difference.")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error")
    parser.add_argument("--version", action="version", version=_version(),
                        help="print the toolkit's version and those it runs with, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)
    p = sub.add_parser("run", help="run config(s): each seed and sweep point is one run",
                       formatter_class=fmt, epilog=RUN_EPILOG,
                       description="Run experiment configs and write one run directory per run.")
    _add_run_options(p, many=True)
    p.set_defaults(handler="toolkit.lab.cli.commands:cmd_run")
    p = sub.add_parser("sweep", help="run the [sweep] grid of a config (× seeds)",
                       formatter_class=fmt, epilog=SWEEP_EPILOG,
                       description="Expand a config's [sweep] grid and seeds and run every "
                                   "member.")
    _add_run_options(p, many=False)
    p.set_defaults(handler="toolkit.lab.cli.commands:cmd_run")
    p = sub.add_parser("report", help="redraw figures, report.html and report.md of runs",
                       formatter_class=fmt, epilog=REPORT_EPILOG,
                       description="Regenerate figures/, report.html and report.md from the "
                                   "files of run directories.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="a run directory (results/<experiment>/<run_id>) or a seed group's "
                        "folder; several are drawn one after the other")
    _add_debug(p)
    p.set_defaults(handler="toolkit.lab.cli.commands_read:cmd_report")
    p = sub.add_parser("compare", help="aggregate runs: blocked vs unblocked over seeds",
                       formatter_class=fmt, epilog=COMPARE_EPILOG,
                       description="Aggregate the complete runs below DIR.")
    p.add_argument("directory", metavar="DIR",
                   help="a folder holding run directories, e.g. results/<experiment>")
    p.add_argument("--out", metavar="DIR", help="where compare.csv/compare.html go "
                   "(default: DIR)")
    p.add_argument("--latest", action="store_true", help="only the runs of the command that "
                   "ran last (the same command line: one sweep, or one run's seeds)")
    _add_debug(p)
    p.set_defaults(handler="toolkit.lab.cli.commands_read:cmd_compare")
    p = sub.add_parser("check", help="list damaged and abandoned runs below a folder",
                       formatter_class=fmt, epilog=CHECK_EPILOG,
                       description="Check every run folder below DIR against the results "
                                   "format.")
    p.add_argument("directory", metavar="DIR",
                   help="a results folder, e.g. results or results/<experiment>")
    _add_debug(p)
    p.set_defaults(handler="toolkit.lab.cli.commands_read:cmd_check")
    p = sub.add_parser("list", help="list experiments and configs",
                       description="List the experiments (with their description) and the "
                                   "configs.")
    p.add_argument("--check", action="store_true",
                   help="import every experiment module and check its contract (slower: "
                        "imports torch)")
    _add_debug(p)
    p.set_defaults(handler="toolkit.lab.cli.commands:cmd_list")
    sub.add_parser("audit", help="run a training script unchanged and audit its backward() and "
                                 "step() calls (toolkit audit --help)", add_help=False)
    sub.add_parser("demo", help="show the stop_gradient primitive on a one-line example",
                   description="Print what stop_gradient does on a one-line example: the same "
                               "value forward, no gradient backward, and the same code with the "
                               "block disabled. Imports torch; writes nothing.")
    return parser



def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``toolkit``; returns the exit status.

    SIGINT (Ctrl-C) or SIGTERM at any moment ends every command with one line and status 130
    or 143 (``run`` and ``sweep`` say what is complete and what finishes the rest).
    """
    from toolkit.lab.errors import RunInterrupted

    def stop(signum: int, frame: object) -> None:
        raise RunInterrupted(signum)

    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    else:
        old = {}
    try:
        return _main(argv)
    except KeyboardInterrupt as err:  # RunInterrupted too
        code = 128 + getattr(err, "signum", signal.SIGINT)
        print(f"toolkit: interrupted by {signal.Signals(code - 128).name} (exit status "
              f"{code})", file=sys.stderr)
        return code
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _main(argv: Sequence[str] | None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["audit"]:  # everything after it is the audit's and the script's own
        from toolkit.lens.audit.watch.cli import main as audit

        return audit(raw[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what to run again, if stopped
    if args.command == "demo":
        return demo()
    from toolkit.lab.errors import ConfigError, DamagedFile

    module, _, name = args.handler.partition(":")
    try:
        return getattr(importlib.import_module(module), name)(args)
    except Exception as err:
        if args.debug or os.environ.get("TOOLKIT_DEBUG"):
            raise
        if isinstance(err, ConfigError):
            line, code = err.line(), EXIT_USAGE
        elif isinstance(err, DamagedFile):
            line, code = (f"{err}; `toolkit check` lists every damaged file of a results "
                          f"folder"), EXIT_USAGE
        elif isinstance(err, OSError):
            line, code = _os_error(err, args.command), EXIT_USAGE
        else:
            line, code = (f"unexpected {type(err).__name__}: {err} (a bug: run the command "
                          f"again with --debug to see the traceback)"), EXIT_FAILED
        print(f"toolkit: error: {shown(' '.join(line.split()))}", file=sys.stderr)
        return code


def _os_error(err: OSError, command: str) -> str:
    """One line for a file or folder that cannot be read or written: the file, the reason, and
    what to do about it."""
    import errno

    from toolkit.lab.errors import os_error_line

    elsewhere = " or write elsewhere with --out DIR" if command != "report" else ""
    fixes = {errno.ENOSPC: f"the disk is full: free some space{elsewhere}",
             errno.EDQUOT: f"the disk quota is used up: free some space{elsewhere}",
             errno.EROFS: f"that file system is read-only: copy the results to a writable "
                          f"folder{elsewhere}",
             errno.EACCES: f"no permission to write there{elsewhere}",
             errno.EPERM: f"no permission to write there{elsewhere}",
             errno.EEXIST: "a file is in the way of a folder: give a folder's path",
             errno.ENOTDIR: "a file is in the way of a folder: give a folder's path",
             errno.ENOENT: "no such file or folder: check the path"}
    fix = fixes.get(err.errno or 0, "check the path, its permissions and the disk")
    return f"{os_error_line(err)}; {fix}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
