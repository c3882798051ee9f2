"""``toolkit audit SCRIPT [ARGS...]``: run a training script unchanged and audit its first
iterations (or, ``--watch EVERY``, every EVERY-th iteration of the whole run).

Exit status as linters and pytest give it: 0 clean, 1 a failure found, 2 the script could not be
audited (or the command was wrong); the script's own ``sys.exit`` status and exceptions pass
through (an exception: its traceback as Python shows it, status 1).

Each edit is printed with how it was proved (:class:`~toolkit.audit.kinds.Proof`); ``--apply``
writes only those whose proof is safe (:func:`applicable`: verified by rerunning the script).
``--record DIR`` writes ``report.json`` through :class:`~toolkit.audit.schema.Report`, with the
exit status and what the audit did not check."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolkit.audit.files import escaped
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.kinds import Proof
from toolkit.audit.result import plural
from toolkit.audit.schema import VERSION, Options, Report

__all__ = ["applicable", "main"]

EXIT_CLEAN, EXIT_FAILED, EXIT_CANNOT = 0, 1, 2

EPILOG = """\
examples:
  toolkit audit train.py --lr 1e-3          audit the first 2 iterations of each loop, then
                                            stop it (within 100 iterations of the last one)
  toolkit audit --steps 5 --diff train.py   5 iterations; print the verified edits as a diff
  toolkit audit --apply train.py            write the verified edits (a copy of each file kept)
  toolkit audit --watch 100 train.py        run to the end, audit every 100th iteration

The audit's own options come before SCRIPT; everything after it is the script's, as it is.
Files are written only with --apply, only inside the script's folder, never through a link."""


# the audit's options that take a value: what follows them is not the script
_VALUED = {"--steps", "--follow", "--watch", "--record", "--seed", "--edited-elsewhere"}
# and every option of the audit's, as a user may misplace it after the script's name
_OWN = _VALUED | {"--diff", "--apply", "--no-verify"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="toolkit audit", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a training script, unchanged, and audit its backward() and "
                    "optimizer.step() calls as they happen.")
    p.add_argument("--steps", type=int, default=2, metavar="N",
                   help="audit the first N iterations of each loop that trains (a warm-up, "
                        "then the main loop), then stop the script (default 2)")
    p.add_argument("--follow", type=int, default=100, metavar="K",
                   help="after the last audited iteration, let the script run on up to K "
                        "iterations to reach a later loop before stopping it (default 100; 0 "
                        "stops it at once)")
    p.add_argument("--watch", type=int, default=None, metavar="EVERY",
                   help="let the script run to its end and audit every EVERY-th iteration; a "
                        "finding is printed when it first appears")
    p.add_argument("--diff", action="store_true",
                   help="print the edits as a diff (the verified ones; all of them, marked not "
                        "verified, with --no-verify)")
    p.add_argument("--apply", action="store_true",
                   help="write the verified edits into files of the script's folder (a copy of "
                        "each changed file is kept as FILE.orig); an edit of a file elsewhere is "
                        "printed, not written")
    p.add_argument("--no-verify", action="store_true",
                   help="print edits without rerunning the script to verify them (--apply then "
                        "writes nothing)")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="write the findings (report.json) and each stepped tensor's gradient "
                        "at each audited step (grads.pt) into the folder DIR")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of torch, numpy and random before the script starts (default 0)")
    # a verification rerun's edited copies of modules outside the script's folder (JSON)
    p.add_argument("--edited-elsewhere", default=None, help=argparse.SUPPRESS)
    p.add_argument("script", metavar="SCRIPT", help="the training script (a .py file)")
    p.add_argument("args", nargs="*", metavar="ARGS",
                   help="the script's own arguments, passed as they are ('--' included)")
    return p


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The audit's own arguments (up to SCRIPT, included) and the script's, verbatim: the
    script sees ``--`` and every option after its name as ``python SCRIPT ...`` would."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[:i] + argv[i + 1:i + 2], argv[i + 2:]
        if not arg.startswith("-") or arg == "-":
            return argv[:i + 1], argv[i + 1:]
        i += 2 if arg in _VALUED else 1
    return argv, []


def _ordinal(n: int) -> str:
    """``2nd``, ``3rd``, ``11th``, ``100th``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fail(line: str) -> int:
    print(f"toolkit audit: {escaped(line)}", file=sys.stderr)
    return EXIT_CANNOT


def _say(*lines: str) -> None:
    """Each line printed with its control characters escaped: nothing the script's paths or
    text hold can start a line of its own."""
    print("\n".join(escaped(line) for line in lines), flush=True)


def _say_diff(text: str) -> None:
    print(escaped(text, keep="\t\n\r"), end="", flush=True)


def _withdrawn(printed: list, findings: dict, withdrawn: dict) -> list[str]:
    """A line for the failures printed as the run went that a later iteration took back (and
    did not report again), by kind and reason, with their iterations."""
    taken: dict[tuple[str, str], list[int]] = {}
    for f in printed:
        if f.failure and f.key not in findings and f.key in withdrawn:
            taken.setdefault((str(f.kind), withdrawn[f.key][1]), []).append(f.iteration)
    lines = []
    for (kind, why), iterations in taken.items():
        its = sorted(set(iterations))
        s = "s" if len(its) > 1 else ""
        lines.append(f"toolkit audit: withdrawn: the {kind} failure{s} printed above "
                     f"(iteration{s} {', '.join(map(str, its))}): {why}")
    return lines


def _record_folder(folder: str) -> str | None:
    """Why ``--record`` may not write into ``folder``, or ``None``: a link or a file is
    refused, a missing folder is made."""
    if os.path.islink(folder):
        return f"--record {folder}: is a link; give a folder of its own"
    if os.path.exists(folder) and not os.path.isdir(folder):
        return f"--record {folder}: is a file, not a folder"
    for name in ("report.json", "grads.pt"):
        inner = os.path.join(folder, name)
        if os.path.islink(inner) or (os.path.exists(inner) and not os.path.isfile(inner)):
            return f"--record {folder}: {name} there is a link or not a file; nothing was written"
    return None


def _write_record(folder: str, report: Report, grads: list) -> None:
    """``report.json`` (validated by :class:`~toolkit.audit.schema.Report`) and ``grads.pt``
    into ``folder``, never through a link."""
    import torch

    os.makedirs(folder, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(os.path.join(folder, "report.json"), flags, 0o644), "w",
                   encoding="utf-8") as fh:
        fh.write(report.to_json())
    with os.fdopen(os.open(os.path.join(folder, "grads.pt"), flags, 0o644), "wb") as fh:
        torch.save(grads, fh)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``toolkit audit`` and ``python -m toolkit.audit``; returns the status."""
    ours, theirs = _split(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    args = parser.parse_args(ours)
    args.args = theirs
    args.command = [*ours, *theirs]
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.follow < 0:
        parser.error(f"--follow must be at least 0, got {args.follow}")
    if args.watch is not None and args.watch < 1:
        parser.error(f"--watch must be at least 1, got {args.watch}")
    if not os.path.isfile(args.script):
        return _fail(f"{args.script}: no such file; give the path of a training script")
    if not args.script.endswith(".py"):
        return _fail(f"{args.script}: not a Python file (.py); give the training script")
    if args.record is not None and (why := _record_folder(args.record)) is not None:
        return _fail(why)
    return _audit(args)


def _audit(args: argparse.Namespace) -> int:
    import torch  # noqa: F401 (loaded before the script, as the watch needs it)

    from toolkit.audit.files import Refused, forget_sources, outside, read_source
    from toolkit.audit.fixes.script_edits import diff, write_edits
    from toolkit.audit.rules.running import never_trained
    from toolkit.audit.script.runner import run_script
    from toolkit.audit.script.session import Watch
    from toolkit.audit.verify.rerun import forget_baselines, together, verify

    # resolved once, before the script can chdir
    cwd, script = os.getcwd(), os.path.abspath(args.script)
    record = None if args.record is None else os.path.abspath(args.record)
    root = os.path.dirname(script)
    name = os.path.basename(script)
    forget_sources()
    forget_baselines()
    with contextlib.suppress(OSError, SyntaxError, UnicodeDecodeError):
        read_source(script)   # the text that runs is the text every edit is written against
    elsewhere = None
    if args.edited_elsewhere:
        with open(args.edited_elsewhere, encoding="utf-8") as fh:
            elsewhere = json.load(fh)

    printed = []

    def shown(finding) -> None:
        if args.watch is not None:
            printed.append(finding)
            _say(*finding.lines())

    verifying = not args.no_verify
    watch = Watch(args.steps, args.watch, follow=args.follow,
                  record=verifying or record is not None,
                  on_finding=shown)
    pid = os.getpid()
    outcome = run_script(script, list(args.args), watch, seed=args.seed, elsewhere=elsewhere)
    if os.getpid() != pid:
        # a process the script forked came back here: the audit belongs to its parent
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(outcome.exit_code or (1 if outcome.error is not None else 0))
    findings = list(watch.findings.values())
    failures = [f for f in findings if f.failure]
    for line in _withdrawn(printed, watch.findings, watch.withdrawn):
        _say(line)

    if verifying:
        # a run that ended by itself is run as far again with each edit (see verify)
        ran_to = None if outcome.stopped or outcome.error is not None else watch.iteration + 1
        for f in failures:
            if f.edits:
                f.verified, f.why_not = verify(f, [g for g in failures if g is not f],
                                               script, list(args.args), watch.grads,
                                               args.steps if args.watch is None else 1, cwd,
                                               ran_to=ran_to)
    if verifying and args.watch is not None:   # found and printed as the run went: the proofs
        for f in failures:
            if f.edits:
                _say(f"toolkit audit: {f.kind} (iteration {f.iteration}): "
                     + ("verified: " + "; ".join(str(e) for e in f.edits)
                        + f" (proof: {f.proof.text})" if f.proof.safe else
                        f"not verified: {f.why_not} (proof: {f.proof.text})"))

    ran = watch.iteration + (0 if outcome.stopped else 1)
    audited = [i for i in range(ran) if watch.audited(i)] if watch.backwards else []

    def finish(status: int, not_checked: list[str]) -> int:
        """The record written (when asked) with the exit status; the status returned."""
        if record is None:
            return status
        report = Report(
            version=VERSION, command=args.command, script=name, args=list(args.args),
            options=Options(steps=args.steps, follow=args.follow, watch=args.watch,
                            seed=args.seed, verify=verifying, apply=args.apply, diff=args.diff),
            iterations=ran, audited=audited, backwards=watch.backwards,
            steps=watch.step_events, stopped=outcome.stopped, exit_code=outcome.exit_code,
            error=None if outcome.error is None else
            f"{type(outcome.error).__name__}: {outcome.error}",
            not_checked=not_checked, findings=[f.to_dict() for f in findings], status=status)
        try:
            _write_record(record, report, watch.grads)
        except OSError as err:
            return _fail(f"--record {args.record}: could not be written ({err.strerror or err})")
        return status

    if outcome.error is None and outcome.exit_code in (None, 0) and watch.backwards == 0:
        return finish(_fail(f"{name} never called backward() (ran to its end), nor "
                            f"torch.autograd.grad over tensors an optimizer steps: nothing to "
                            f"audit; is training behind a flag, or does it use its own engine?"),
                      [f"everything: {name} never called backward()"])
    how = (f"stopped by its own {type(outcome.error).__name__} in iteration {watch.iteration}"
           if outcome.error is not None else
           f"exited with status {outcome.exit_code} in iteration {watch.iteration} (its own "
           f"exit, whose status the audit returns)" if outcome.exit_code not in (None, 0) else
           f"stopped after {watch.iteration} iterations (nothing more ran; files the script wrote "
           f"are where it says)" if outcome.stopped else
           f"ran to its end, {ran} iterations" + (
               "" if not args.watch else ", each audited" if args.watch == 1 else
               f", every {_ordinal(args.watch)} audited"))
    taken = watch.taken_by_hand
    calls = f"{watch.backwards - taken} backward() calls" + (
        f" and {taken} torch.autograd.grad calls over stepped tensors" if taken else "")
    _say(f"toolkit audit: {name}: {how}; {calls}, {watch.step_events} optimizer steps")
    if args.watch is None:
        for f in findings:
            _say(*f.lines())
    proved = applicable(failures)
    shown_edits = [e for f in proved for e in f.edits]
    if args.diff and args.no_verify:
        unproved = [e for f in failures for e in f.edits]
        if unproved:
            _say("toolkit audit: the edits, not verified (--no-verify): check them before "
                 "using them")
            _say_diff(diff(unproved, root))
    elif args.diff and shown_edits:
        _say_diff(diff(shown_edits, root))
    status = EXIT_FAILED if failures else EXIT_CLEAN
    if args.apply:
        steps = args.steps if args.watch is None else 1
        status = _apply(failures, root, args.no_verify, diff, write_edits, outside, Refused,
                        status, lambda fs: together(fs, script, list(args.args), steps, cwd))
    infos = len(findings) - len(failures)
    _say(f"toolkit audit: {plural(len(failures), 'failure')}, {plural(infos, 'note')}"
         + (f"; {plural(len(shown_edits), 'verified edit')}" if failures else ""))
    not_checked = []
    if watch.backwards == 0:   # it ended, by an error or an exit of its own, before any
        not_checked.append(f"everything: {name} ended before its first backward()")
        ours = [a for a in args.args if a.split("=", 1)[0] in _OWN]
        if outcome.exit_code not in (None, 0) and ours:
            _say(f"toolkit audit: {' '.join(ours)} came after {name}, so the script got "
                 f"{'it' if len(ours) == 1 else 'them'}: the audit's options go before the "
                 f"script's name")
    if outcome.stopped:
        not_checked.append(
            f"what the script does after iteration {watch.iteration} (a later loop, a bug that "
            f"begins late): it ran {args.follow} iterations past the last audited one with no "
            f"new loop; --follow K looks further, --watch EVERY runs it to its end"
            if args.follow else
            f"what the script does after its first {args.steps} iterations (a later loop, a bug "
            f"that begins late); --follow K looks further, --watch EVERY runs it to its end")
    if watch.step_events == 0 and watch.backwards:
        not_checked.append(
            "no torch optimizer stepped (weights updated by hand?), so nothing was judged at an "
            "optimizer's step (leaks, missing gradients, tensors no optimizer steps); targets, "
            "graph kept across iterations and gradients read twice were checked in each audited "
            "iteration")
    meant = taken_as_meant(watch.meant, findings)
    if meant:
        not_checked.append(meant)
    written = written_by_hand(watch.hand_written,
                              lambda _, t: watch.name_of(t))
    if written:
        not_checked.append(written)
    unended = never_trained.unended(watch)
    if unended:
        not_checked.append(unended)
    for line in not_checked:
        _say(f"toolkit audit: not checked: {line}")
    if outcome.error is not None:
        sys.stderr.write(escaped("".join(outcome.traceback), keep="\n"))
        return finish(EXIT_FAILED, not_checked)
    if outcome.exit_code not in (None, 0):
        return finish(int(outcome.exit_code), not_checked)  # type: ignore[arg-type]
    return finish(status, not_checked)


def taken_as_meant(cuts: Mapping[Any, str], findings: Sequence[ScriptFinding],
                   shown: int = 3) -> str | None:
    """The closing line on the cuts the audit took as meant
    (:mod:`~toolkit.audit.rules.running.meant`), those at a line no finding names; ``None``
    where there are none. ``shown``: how many sites it names."""
    named = {a.split(": ", 1)[0] for f in findings for a in f.at}
    left = list({str(site): what for site, what in cuts.items()
                 if str(site) not in named}.items())    # two cuts on one line: the line once
    if not left:
        return None
    sites = ", ".join(f"{site} ({what})" for site, what in left[:shown])
    more = f" and {len(left) - shown} more" if len(left) > shown else ""
    one = len(left) == 1
    which, they, belong = (("the cut at ", "it keeps", "it belongs") if one else
                           (f"{len(left)} cuts belong where they are (", "each keeps",
                            "they belong"))
    return (f"whether {which}{sites}{more}{' belongs there' if one else ')'}: {they} a loss's "
            f"gradient from tensors that loss still trains another way, as a stop-gradient "
            f"does (SimSiam's stopped branch, a TD target from the online network); only the "
            f"method the script follows says whether {belong}, so the audit took "
            f"{'it' if one else 'them'} as meant")


def written_by_hand(written: Mapping[int, tuple[Any, Any]],
                    name: Callable[[int, Any], str | None], shown: int = 3) -> str | None:
    """The closing line on gradients the script wrote into ``.grad`` itself from what
    ``torch.autograd.grad`` returned over other tensors (first-order MAML's adapted weights):
    the loss they came from was not differentiated over the tensors it wrote, so no rule read
    it as theirs (one taken over them is audited as their backward). ``written``:
    each such tensor and where the script first wrote it, by ``id``; ``name(id, tensor)``:
    what the script calls it, or ``None``. ``None`` where none was written."""
    if not written:
        return None
    what = [f"`{called}`" if (called := name(k, t)) else f"a tensor of shape {tuple(t.shape)}"
            for k, (t, _) in written.items()]
    sites = sorted({str(site) for _, site in written.values() if site is not None})
    more = f" and {len(what) - shown} more" if len(what) > shown else ""
    where = f" ({', '.join(sites[:shown])})" if sites else ""
    return (f"the loss behind the gradient the script wrote itself into the .grad of "
            f"{', '.join(what[:shown])}{more}{where}, from torch.autograd.grad over other "
            f"tensors: a loss is audited where it is differentiated over the tensors it "
            f"trains, by backward() or torch.autograd.grad")


def applicable(findings: Sequence[ScriptFinding]) -> list[ScriptFinding]:
    """The findings whose edits ``--apply`` writes and ``--diff`` shows: those whose proof is
    safe (:attr:`Proof.safe <toolkit.audit.kinds.Proof>`: ``RERUN``, verified by rerunning the
    script, or ``IN_PROCESS``); a graph proof or advice is printed, never written."""
    return [f for f in findings if f.edits and f.proof in (Proof.RERUN, Proof.IN_PROCESS)]


def _apply(findings, root, no_verify, diff, write_edits, outside, refused, status,
           together) -> int:
    """``--apply``: the edits of :func:`applicable` findings in files inside the script's
    folder written, those that hold together (``together(findings)``: the findings kept and
    why others were left out; each edit was verified alone); a finding whose edits touch a
    file elsewhere printed as a diff with why it was not written; the others' edits never."""
    if no_verify:
        _say("toolkit audit: --apply wrote nothing: with --no-verify no edit is verified")
        return status
    held = [f for f in findings if f.edits and f not in applicable(findings)]
    if held:
        _say(f"toolkit audit: --apply did not write the edits of {plural(len(held), 'finding')} "
             f"not verified ({', '.join(sorted({f'{f.kind}: {f.proof.text}' for f in held}))})")
    inside = []
    for f in applicable(findings):
        away = sorted({e.path for e in f.edits if outside(e.path, root)})
        if away:
            _say_diff(diff(list(f.edits), root))
            for path in away:
                _say(f"toolkit audit: not written: {path} lies outside the script's folder "
                     f"{root}; the edit above is yours to make")
        else:
            inside.append(f)
    kept, why = together(inside)
    if why:
        left = ", ".join(f"{f.kind} (iteration {f.iteration})" for f in inside if f not in kept)
        _say(f"toolkit audit: --apply did not write the edits of {left}: {why}")
    writable = [e for f in kept for e in f.edits]
    if not writable:
        return status
    try:
        written = write_edits(writable, root)
    except refused as err:
        return _fail(str(err))
    for path, copy in written:
        _say(f"toolkit audit: wrote {os.path.basename(path)} (the old one is "
             f"{os.path.basename(copy)})")
    return status
