"""What the tests of ``toolkit audit SCRIPT`` share, written once.

- :func:`audit`: the audit run in this process on a script (``--no-verify --record``), its exit
  status and the report read back from the record;
- :func:`cli`: the command run as a user runs it, ``toolkit audit ARGS`` in a folder (its entry
  point in this process, its edits verified in fresh ones);
- the proof that an applied edit is right: :func:`project` puts a bug twin (``train.py``) beside
  its published script (``published.py``), :func:`applied` has ``--apply`` find the bug and
  write its edit, :func:`recorded` audits a script again and keeps its record, and the fixed
  script trains as the published one, gradient for gradient over the audited steps
  (:func:`assert_same_gradients`; :func:`check_fix` runs the whole proof) and every saved
  tensor after the whole run (:func:`trained`, :func:`assert_trains_as`).

The scripts written for the audit's principles are in ``SCRIPTS``.
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from toolkit.audit.cli import main
from toolkit.audit.verify import fresh
from toolkit.audit.verify.gradients import same_gradient
from toolkit.audit.verify.rerun import load_record

#: the pairs of scripts (as published, and a bug twin) each principle's tests read
SCRIPTS = Path(__file__).parents[1] / "lens" / "audit" / "scripts"

#: the toolkit's own API, which no finding about a plain torch script offers
TOOLKIT_WORDS = re.compile(r"stop_gradient\(|allow_trained_target|disable_blocks|audit_step")

#: how long one command may run before its test fails
TIMEOUT = 600


def audit(tmp_path: Path, script: Path, *options: str,
          args: Sequence[str] = ()) -> tuple[int, dict]:
    """``toolkit audit --no-verify --record DIR OPTIONS SCRIPT ARGS`` in this process: its exit
    status and the report it recorded (in ``tmp_path``, a folder per script)."""
    rec = tmp_path / f"record-{Path(script).stem}"
    code = main(["--no-verify", "--record", str(rec), *options, str(script), *args])
    report, _ = load_record(str(rec))
    for finding in report["findings"]:   # a plain torch script's fixes are plain torch
        words = f"{finding['message']} {finding['advice']}"
        assert not TOOLKIT_WORDS.search(words), words
    return code, report


def failures(report: dict) -> list[dict]:
    """The report's findings that are failures."""
    return [f for f in report["findings"] if f["failure"]]


def cli(*args: str, cwd: Path, own_process: bool = False) -> subprocess.CompletedProcess:
    """``toolkit audit ARGS`` in ``cwd``, as a user runs it: the command's entry point
    (:func:`~toolkit.audit.cli.main`) with what it prints captured, its exit status as the
    return code. It runs in this process, the working folder changed for the run: each edit it
    verifies is still rerun in a fresh process, as for a user, and a fresh interpreter for the
    command itself would only add a start of torch (and of its compiler, which building an
    optimizer imports) to every test. The doors of the command (the files it may write, its
    exit status as a process, standard input) are tested in fresh processes
    (``tests/lens/audit/test_audit_doors.py``).

    ``own_process``: the command in a fresh interpreter instead, for a script that forks (a
    ``DataLoader``'s workers). A test process has threads of its own (pytest-xdist's channel),
    and a child forked from a process with threads inherits their locks as they were at the
    fork, which can leave it waiting forever (POSIX ``fork``); a user's process has none."""
    if own_process:
        return subprocess.run([sys.executable, "-m", "toolkit.audit", *args], cwd=cwd,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:   # argparse's errors
            code = stop.code if isinstance(stop.code, int) else 1
    return subprocess.CompletedProcess(["toolkit", "audit", *args], code, out.getvalue(),
                                       err.getvalue())


def project(tmp_path: Path, buggy: str, clean: str) -> Path:
    """A folder holding the bug twin ``buggy`` as ``train.py`` and the published ``clean`` as
    ``published.py`` (both from ``SCRIPTS``)."""
    folder = tmp_path / "proj"
    folder.mkdir()
    shutil.copy(SCRIPTS / buggy, folder / "train.py")
    shutil.copy(SCRIPTS / clean, folder / "published.py")
    return folder


def twins(tmp_path: Path, published: str, buggy: str) -> Path:
    """A folder holding the texts ``buggy`` as ``train.py`` and ``published`` as
    ``published.py`` (scripts a test writes, where :func:`project` copies them)."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(published, encoding="utf-8")
    (folder / "train.py").write_text(buggy, encoding="utf-8")
    return folder


def recorded(folder: Path, into: Path, script: str, *options: str,
             args: Sequence[str] = (), own_process: bool = False) -> dict:
    """``toolkit audit OPTIONS --record INTO SCRIPT ARGS`` in ``folder``: it must exit 0
    (clean); its report. Run in this process (:func:`cli`; ``own_process`` as there): the
    second audit of a fixed script needs no fresh interpreter, and each one spared is a start of
    torch less (the edits themselves are verified, and the fixed script trained, in fresh
    processes)."""
    done = cli(*options, "--record", str(into), script, *args, cwd=folder,
               own_process=own_process)
    report = load_record(str(into))[0]
    assert done.returncode == 0, [f.get("message") for f in report["findings"]]
    return report


def applied(folder: Path, kind: str, *options: str, args: Sequence[str] = (),
            own_process: bool = False) -> subprocess.CompletedProcess:
    """``toolkit audit OPTIONS --apply train.py ARGS`` run in ``folder`` (``own_process`` as
    in :func:`cli`): it must fail with a ``kind`` finding and write its verified edit into
    ``train.py``; what it printed."""
    done = cli(*options, "--apply", "train.py", *args, cwd=folder, own_process=own_process)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL    {kind}:" in done.stdout and "wrote train.py" in done.stdout, done.stdout
    return done


def applied_and_trains(folder: Path, kind: str, *options: str) -> subprocess.CompletedProcess:
    """The proof of an edit by the weights it trains, where the gradients a record keeps by
    position cannot be compared (an edit that moves tensors in an optimizer's list): ``--apply``
    writes a ``kind`` edit into ``train.py`` (:func:`applied`), the fixed and the published
    scripts both audit clean, and they train the same weights (:func:`assert_trains_as`). What
    ``--apply`` printed."""
    done = applied(folder, kind, *options)
    for script in ("train.py", "published.py"):
        again = cli(*options, script, cwd=folder)
        assert again.returncode == 0, again.stdout
    assert_trains_as(folder)
    return done


def check_fix(tmp_path: Path, folder: Path, kind: str, *options: str, args: Sequence[str] = (),
              what: object = None, own_process: bool = False) -> subprocess.CompletedProcess:
    """The proof of an edit, by the command as a user runs it in ``folder`` (:func:`project`):
    the published script audits clean (its record in ``tmp_path / "pub"``); ``--apply`` finds a
    ``kind`` failure in ``train.py`` and writes its verified edit; the fixed ``train.py``
    audits clean (its record in ``tmp_path / "fixed"``), with the published script's
    gradients on every audited step. What ``--apply`` printed. ``own_process``: each command
    in a fresh interpreter (:func:`cli`)."""
    how = {"args": args, "own_process": own_process}
    recorded(folder, tmp_path / "pub", "published.py", *options, **how)
    done = applied(folder, kind, *options, **how)
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options, **how))
    assert_same_gradients(tmp_path / "fixed", tmp_path / "pub", what)
    return done


def assert_same_gradients(ours: Path, theirs: Path, what: object = None) -> None:
    """The gradients two records hold (``grads.pt``) are the same, step for step and tensor
    for tensor (:func:`~toolkit.audit.verify.gradients.same_gradient`)."""
    mine_all = torch.load(ours / "grads.pt", weights_only=True)
    theirs_all = torch.load(theirs / "grads.pt", weights_only=True)
    assert len(mine_all) == len(theirs_all) > 0
    for mine, published in zip(mine_all, theirs_all):
        assert mine["grads"].keys() == published["grads"].keys()
        for key, g in published["grads"].items():
            assert same_gradient(mine["grads"][key], g), (key, what)


def flat(tree: object, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a saved tree (dicts, lists and tuples of tensors), by dotted name."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)  # type: ignore[attr-defined]
    out: dict[str, torch.Tensor] = {}
    for key, value in items:
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _run_to_end(folder: str, scripts: Sequence[str]) -> None:
    """Each of ``scripts`` run to its end as ``python SCRIPT --out SCRIPT.pt`` would in
    ``folder`` (its own ``sys.argv`` and ``__main__``, the folder first on ``sys.path``), one
    after the other."""
    sys.path.insert(0, folder)
    for script in scripts:
        sys.argv = [script, "--out", f"{script}.pt"]
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise


def trained(folder: Path, *scripts: str) -> list[dict[str, torch.Tensor]]:
    """Each script of ``folder`` run there to its end with ``--out SCRIPT.pt``: every tensor it
    saved. One fresh process (:func:`~toolkit.audit.verify.fresh.run`, as the audit's reruns)
    runs them one after the other: each script seeds itself, and the start of a process, with
    torch's import, is most of a tiny script's time."""
    done = fresh.run(_run_to_end, [str(folder), scripts], cwd=str(folder), timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return [flat(torch.load(folder / f"{script}.pt", weights_only=True)) for script in scripts]


def assert_trains_as(folder: Path, fixed: str = "train.py", twin: str = "published.py", *,
                     atol: float = 1e-7) -> None:
    """``fixed`` and ``twin``, each run to its end in ``folder`` (:func:`trained`), save the
    same tensors, each within ``rtol=1e-5`` (and ``atol``) of the other's."""
    ours, theirs = trained(folder, fixed, twin)
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert torch.allclose(ours[key], value, rtol=1e-5, atol=atol), key
