"""``toolkit audit SCRIPT [ARGS...]``: run a training script unchanged and audit its first
iterations (or, ``--watch EVERY``, every EVERY-th iteration of the whole run).

Exit status as linters and pytest give it: 0 clean, 1 a failure found, 2 the script could not be
audited (or the command was wrong); the script's own ``sys.exit`` status and exceptions pass
through (an exception: its traceback as Python shows it, status 1)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

EXIT_CLEAN, EXIT_FAILED, EXIT_CANNOT = 0, 1, 2

EPILOG = """\
examples:
  toolkit audit train.py --lr 1e-3          audit its first 2 iterations, then stop it
  toolkit audit --steps 5 --diff train.py   5 iterations; print the verified edits as a diff
  toolkit audit --apply train.py            write the verified edits (a copy of each file kept)
  toolkit audit --watch 100 train.py        run to the end, audit every 100th iteration

The audit's own options come before SCRIPT; everything after it is the script's."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="toolkit audit", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a training script, unchanged, and audit its backward() and "
                    "optimizer.step() calls as they happen.")
    p.add_argument("--steps", type=int, default=2, metavar="N",
                   help="audit the first N iterations, then stop the script (default 2)")
    p.add_argument("--watch", type=int, default=None, metavar="EVERY",
                   help="let the script run to its end and audit every EVERY-th iteration; a "
                        "finding is printed when it first appears")
    p.add_argument("--diff", action="store_true", help="print the verified edits as a diff")
    p.add_argument("--apply", action="store_true",
                   help="write the verified edits into the script's folder (a copy of each "
                        "changed file is kept as FILE.orig)")
    p.add_argument("--no-verify", action="store_true",
                   help="print edits without rerunning the script to verify them")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="write the findings (report.json) and each stepped tensor's gradient "
                        "at each audited step (grads.pt) into DIR")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of torch, numpy and random before the script starts (default 0)")
    p.add_argument("script", metavar="SCRIPT", help="the training script (a .py file)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the script's own arguments")
    return p


def _fail(line: str) -> int:
    print(f"toolkit audit: {line}", file=sys.stderr)
    return EXIT_CANNOT


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``toolkit audit`` and ``python -m toolkit.audit``; returns the status."""
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.watch is not None and args.watch < 1:
        parser.error(f"--watch must be at least 1, got {args.watch}")
    if not os.path.isfile(args.script):
        return _fail(f"{args.script}: no such file; give the path of a training script")
    if not args.script.endswith(".py"):
        return _fail(f"{args.script}: not a Python file (.py); give the training script")

    import torch

    from toolkit.lens.audit.watch.edits import diff, write_edits
    from toolkit.lens.audit.watch.runner import run_script
    from toolkit.lens.audit.watch.session import Watch
    from toolkit.lens.audit.watch.verify import verify

    name = os.path.basename(args.script)

    def shown(finding) -> None:
        if args.watch is not None:
            print("\n".join(finding.lines()), flush=True)

    verifying = not args.no_verify
    watch = Watch(args.steps, args.watch, record=verifying or args.record is not None,
                  on_finding=shown)
    outcome = run_script(args.script, list(args.args), watch, seed=args.seed)
    findings = list(watch.findings.values())
    failures = [f for f in findings if f.failure]

    if verifying:
        for f in failures:
            if f.edits:
                f.verified, f.why_not = verify(f, [g for g in failures if g is not f],
                                               args.script, list(args.args), watch.grads,
                                               args.steps if args.watch is None else 1)
    if args.record is not None:
        os.makedirs(args.record, exist_ok=True)
        report = {"script": name, "iterations": watch.iteration + (0 if outcome.stopped else 1),
                  "backwards": watch.backwards, "steps": watch.step_events,
                  "stopped": outcome.stopped, "exit_code": outcome.exit_code,
                  "error": None if outcome.error is None else
                  f"{type(outcome.error).__name__}: {outcome.error}",
                  "findings": [f.to_dict() for f in findings]}
        Path(args.record, "report.json").write_text(json.dumps(report, indent=1),
                                                     encoding="utf-8")
        torch.save(watch.grads, Path(args.record, "grads.pt"))

    audited = watch.iteration if outcome.stopped else watch.iteration + 1
    if outcome.error is None and outcome.exit_code in (None, 0):
        if watch.backwards == 0:
            return _fail(f"{name} never called backward() (ran to its end): nothing to audit; "
                         f"is training behind a flag, or does it use its own engine?")
        if watch.step_events == 0:
            return _fail(f"{name} called backward() {watch.backwards} times but no torch "
                         f"optimizer stepped: a custom engine hides the step, which the audit "
                         f"cannot see")
    how = (f"stopped by its own {type(outcome.error).__name__} in iteration {watch.iteration}"
           if outcome.error is not None else
           f"stopped after {args.steps} iterations (nothing more ran; files the script wrote "
           f"are where it says)" if outcome.stopped else
           f"ran to its end, {audited} iterations" + (f", every {args.watch}th audited"
                                                      if args.watch else ""))
    print(f"toolkit audit: {name}: {how}; {watch.backwards} backward() calls, "
          f"{watch.step_events} optimizer steps")
    if args.watch is None:
        for f in findings:
            print("\n".join(f.lines()))
    verified = [e for f in failures if f.verified for e in f.edits]
    if args.diff and verified:
        print(diff(verified, os.path.dirname(os.path.abspath(args.script))), end="")
    if args.apply and verified:
        for path, copy in write_edits(verified, os.path.dirname(os.path.abspath(args.script))):
            print(f"toolkit audit: wrote {os.path.basename(path)} (the old one is "
                  f"{os.path.basename(copy)})")
    infos = len(findings) - len(failures)
    print(f"toolkit audit: {len(failures)} failures, {infos} notes"
          + (f"; {len(verified)} verified edits" if failures else ""))
    if outcome.error is not None:
        sys.stderr.write("".join(outcome.traceback))
        return EXIT_FAILED
    if outcome.exit_code not in (None, 0):
        return int(outcome.exit_code)  # type: ignore[arg-type]
    return EXIT_FAILED if failures else EXIT_CLEAN
