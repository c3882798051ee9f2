"""The ``toolkit`` command line (``python -m toolkit``): it parses and hands over. Every error
is one line, ``toolkit: error: <file>: <what failed>; <what to do>`` (``--debug``: the
traceback), with the exit status of ``MAIN_EPILOG``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from toolkit._utils.formatting import shown
from toolkit.lab.cli import commands
from toolkit.lab.cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, run_module

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main", "run_module"]


MAIN_EPILOG = """\
examples:
  toolkit list                                   experiments and configs
  toolkit run configs/showcase.toml              every experiment's quick comparison, one report
  toolkit run configs/em_gmm.toml --set params.n_iter=20 --seeds 0,1,2
  toolkit sweep configs/em_gmm_sweep.toml --workers 2   the [sweep] grid in 2 processes
  toolkit report results/em_gmm/<run_id>         redraw figures and report.html
  toolkit compare results/em_gmm                 mean ± std over seeds, blocked vs unblocked
  toolkit check results                          damaged files and abandoned runs

exit status:
  0        done
  1        a run failed; report skipped a damaged run; check found damage; an unexpected error
  2        bad input; a damaged input file; a file or folder that cannot be read or written
  130/143  interrupted (SIGINT/SIGTERM): one summary of what is complete and the command
           that finishes the rest (`toolkit run ... --resume`, `toolkit report DIR`)
"""

RUN_EPILOG = """\
examples:
  toolkit run configs/td_learning.toml --set params.chain_steps=50 --set dtype=float32
  toolkit run configs/td_learning.toml --seeds 0,1,2 --workers 3 --out runs
  toolkit run configs/em_gmm.toml --seeds 0,1 --tensorboard runs

--set KEY=VALUE: KEY is a dotted path (params.n_steps, dtype, sweep.params.lr); VALUE is a
TOML literal (10, 1e-3, true, [1, 2], "text"); a bare word that is not a literal (cpu,
em.*) is taken as a string. Every run of every CONFIG is validated before the first starts.
"""

SWEEP_EPILOG = """\
A config's [sweep] table lists values per key (params.lr = [0.1, 0.5]); every combination
is one run, times the seeds.

examples:
  toolkit sweep configs/td_learning.toml --set sweep.params.lr=[0.1,0.5] --workers 2
  toolkit sweep configs/td_learning.toml --seeds 0-4 --dry-run
  toolkit sweep configs/td_learning.toml --seeds 0-4 --resume   (finish an interrupted sweep)
  toolkit sweep configs/td_learning.toml --executor dask --address tls://10.0.0.5:8786 \\
      --tls-ca-file ca.pem --tls-cert cert.pem --tls-key key.pem
"""

REPORT_EPILOG = """\
examples:
  toolkit report results/td_learning/20250101T120000Z__seed0__a1b2c3
  toolkit report results/td_learning/*        (every run directory given)
"""

CHECK_EPILOG = """\
Checks every file below DIR against the results format (results/README.md) and lists each
damaged file and each abandoned run (meta.json says running, its process is gone).

examples:
  toolkit check results
"""

COMPARE_EPILOG = """\
Pools the complete runs below DIR by experiment and config (seed aside): each summary value's
mean and range over seeds, blocked and unblocked side by side; writes DIR/compare.csv,
DIR/compare.html and DIR/compare_figures/.

examples:
  toolkit compare results/td_learning
  toolkit compare results/em_gmm --latest
"""


_FORMAT = argparse.RawDescriptionHelpFormatter


def _add_run_options(p: argparse.ArgumentParser, *, many: bool) -> None:
    from toolkit.lab.plan.config import DEFAULT_MAX_RUNS  # not before main() holds the signals

    p.add_argument("configs", nargs="+" if many else 1, metavar="CONFIG",
                   help="TOML config file" + "(s)" * many)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable), e.g. --set params.n_steps=10")
    p.add_argument("--seeds", metavar="LIST", help="replicate seeds, e.g. 0,1,2 or 0-4 "
                   "(replaces seed/seeds of the config)")
    p.add_argument("--out", metavar="DIR", help="output root (replaces output_dir)")
    p.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, metavar="N",
                   help=f"refuse, before making any, more runs than N (default "
                        f"{DEFAULT_MAX_RUNS:,})")
    p.add_argument("--executor", choices=("local", "dask"),
                   help="local (default: here, or a pool of --workers processes) or dask")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes of the local pool or of the Dask LocalCluster (default 1)")
    dask = p.add_argument_group("Dask cluster (with --executor dask; TLS only)")
    dask.add_argument("--address", metavar="tls://HOST:PORT",
                      help="scheduler to send the runs to (default: a LocalCluster on loopback)")
    for flag, what in (("--tls-ca-file", "CA certificate of the cluster"),
                       ("--tls-cert", "this client's certificate"),
                       ("--tls-key", "this client's private key")):
        dask.add_argument(flag, metavar="FILE", help=f"{what} (PEM; default: dask's "
                          "distributed.comm.tls.* settings)")
    dask.add_argument("--dashboard", action="store_true", default=None,
                      help="serve the LocalCluster's dashboard on 127.0.0.1, print its link")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no tally")
    p.add_argument("--verbose", action="store_true", help="also each finished run, every "
                   "finding in full, what the runs say and the report's notes")
    p.add_argument("--no-report", action="store_true",
                   help="skip figures and report.html (draw later with `toolkit report`)")
    p.add_argument("--tensorboard", metavar="DIR", help="live curves: every logged metric also "
                   "goes to TensorBoard event files in DIR (needs pip install -e "
                   "\".[tensorboard]\")")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs only")
    p.add_argument("--resume", action="store_true", help="skip runs whose exact config "
                   "already has a complete run under the output folder")


def _version() -> str:
    """``toolkit 0.1.0 (python 3.11.7, torch 2.13.0, ...)``, read from the packages' metadata."""
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
    parser = Parser(prog="toolkit", formatter_class=_FORMAT, epilog=MAIN_EPILOG,
                    description="Run stop_gradient experiments with and without their blocks, "
                                "and report the difference.")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser.add_argument("--version", action="version", version=_version(),
                        help="print the toolkit's version and those it runs with, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)

    def command(name: str, handler: object, help: str, epilog: str | None = None) -> Parser:
        p = sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                           formatter_class=_FORMAT, epilog=epilog)
        p.set_defaults(handler=handler)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback of an error")
        return p

    _add_run_options(command("run", commands.cmd_run, "run config(s): each seed and sweep "
                             "point is one run directory", RUN_EPILOG), many=True)
    _add_run_options(command("sweep", commands.cmd_run, "run the [sweep] grid of a config "
                             "(x seeds)", SWEEP_EPILOG), many=False)
    command("report", commands.cmd_report, "redraw figures, report.html and report.md from "
            "the files of runs", REPORT_EPILOG).add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory "
        "(results/<experiment>/<run_id>) or a seed group's folder")
    p = command("compare", commands.cmd_compare, "aggregate runs: blocked vs unblocked over "
                "seeds", COMPARE_EPILOG)
    p.add_argument("directory", metavar="DIR", help="a folder holding run directories")
    p.add_argument("--out", metavar="DIR", help="where compare.csv/compare.html go (default: DIR)")
    p.add_argument("--latest", action="store_true", help="only the runs of the command that "
                   "ran last (one sweep, or one run's seeds)")
    command("check", commands.cmd_check, "list damaged and abandoned runs below a folder",
            CHECK_EPILOG).add_argument("directory", metavar="DIR", help="a results folder")
    command("list", commands.cmd_list, "list experiments and configs").add_argument(
        "--check", action="store_true", help="also import every experiment module and check "
        "its contract (imports torch)")
    sub.add_parser("audit", help="run a training script unchanged and audit its backward() and "
                                 "step() calls (toolkit audit --help)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``toolkit``; returns the exit status. SIGINT or SIGTERM at any moment
    ends every command with one line and status 130 or 143 (:mod:`toolkit.lab.execute.signals`;
    without ``argv``, this process's own command line, until the process exits)."""
    from toolkit.lab.execute.signals import ending, interruptible, say_interrupted

    # this process's own lab command (not an audit: the user's script ends as Python ends it)
    own = argv is None and sys.argv[1:2] != ["audit"]
    try:
        with interruptible(to_the_end=own):
            status = _main(argv)
    except KeyboardInterrupt as err:  # RunInterrupted too
        status = say_interrupted(getattr(err, "signum", signal.SIGINT))
    return ending(status) if own else status


def _main(argv: Sequence[str] | None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["audit"]:  # everything after it is the audit's and the script's own
        from toolkit.audit.cli import main as audit

        return audit(raw[1:])
    args = build_parser().parse_args(raw)
    args.argv = raw  # what to run again, if stopped
    from toolkit.lab.errors import ConfigError, DamagedFile

    try:
        return args.handler(args)
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
    """One line for a file or folder that cannot be read or written: the file, why, the fix."""
    import errno

    from toolkit.lab.errors import os_error_line

    elsewhere = " or write elsewhere with --out DIR" if command != "report" else ""
    fixes = {errno.ENOSPC: f"the disk is full: free some space{elsewhere}",
             errno.EDQUOT: f"the disk quota is used up: free some space{elsewhere}",
             errno.EROFS: f"that file system is read-only: copy the results to a writable "
                          f"folder{elsewhere}",
             **dict.fromkeys((errno.EACCES, errno.EPERM), f"no permission to write "
                             f"there{elsewhere}"),
             **dict.fromkeys((errno.EEXIST, errno.ENOTDIR), "a file is in the way of a "
                             "folder: give a folder's path"),
             errno.ENOENT: "no such file or folder: check the path"}
    fix = fixes.get(err.errno or 0, "check the path, its permissions and the disk")
    return f"{os_error_line(err)}; {fix}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
