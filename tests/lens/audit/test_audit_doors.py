"""The doors of ``toolkit audit SCRIPT``, tried as an attacker and a careless user would: the
audit writes a user's file only under ``--apply``, only inside the script's folder, never through
a link, never a file that changed since it was read, once even when the script forks; every
refusal is one line and exit 2 with nothing half-written; files keep their line endings and
encoding; paths cannot forge a line; the script runs as ``python SCRIPT`` would run it.

Each test builds real files (real links, a real fork, a real read-only file) and runs the
command as a user does: in this process where nothing is forked, else in a fresh one."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.audit.cli import main
from toolkit.audit.edit import Edit
from toolkit.audit.files import Refused, escaped, forget_sources, read_source
from toolkit.audit.fixes.script_edits import apply_to_text, edit_at, write_edits

# A linear regression that never clears its gradient: from iteration 1 on, each step adds the
# earlier iterations' gradient. The audit's fix: `opt.zero_grad()` before `loss.backward()`.
STALE = """\
import torch

torch.manual_seed(0)
net = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
for it in range(4):
    loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
"""
FIX = "    opt.zero_grad()\n    loss.backward()\n"


def _write(path: Path, text: str, encoding: str = "utf-8", newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return path


def _run(*argv: str, cwd: Path, stdin=subprocess.DEVNULL, timeout: float = 240):
    """``toolkit audit ARGV`` in ``cwd`` (``-P``: as the console script, the working folder is
    not put on ``sys.path``)."""
    return subprocess.run([sys.executable, "-P", "-m", "toolkit.audit", *argv], cwd=cwd,
                          capture_output=True, text=True, stdin=stdin, timeout=timeout,
                          check=False)


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def _verified(out: str) -> bool:
    """Whether the audit printed an edit as verified (not "not verified: …")."""
    return re.search(r"^ +verified: the edited script", out, re.MULTILINE) is not None


# --- only under --apply, only inside the folder, verification on copies ----------------------

HELPER = """\
import torch


class Runner:
    def __init__(self, cell):
        self.cell = cell
        self.h = torch.zeros(2, 4)

    def step(self, x):
        h = self.cell(x, self.h)
        self.h = h
        return h
"""
CARRIES = """\
import sys
import torch

sys.path.insert(0, sys.argv[1])
from helper import Runner  # noqa: E402

torch.manual_seed(0)
cell = torch.nn.RNNCell(3, 4)
opt = torch.optim.SGD(cell.parameters(), lr=0.1)
runner = Runner(cell)
for it in range(4):
    opt.zero_grad()
    loss = runner.step(torch.randn(2, 3)).pow(2).sum()
    loss.backward()
    opt.step()
"""


@pytest.mark.slow
def test_a_module_outside_the_folder_is_edited_only_in_a_copy_and_never_written(tmp_path):
    helper = _write(tmp_path / "lib" / "helper.py", HELPER)
    script = _write(tmp_path / "proj" / "train.py", CARRIES)
    before = helper.read_bytes()
    plain = _run("train.py", str(helper.parent), cwd=script.parent)
    assert helper.read_bytes() == before, "a plain audit changed a module outside the folder"
    assert plain.returncode == 1 and _verified(plain.stdout)
    applied = _run("--apply", "train.py", str(helper.parent), cwd=script.parent)
    assert helper.read_bytes() == before
    assert not [p for p in _files(helper.parent) if p.startswith("helper.py")
                and p != "helper.py"]
    assert "+        h = self.cell(x, self.h.detach())" in applied.stdout
    assert f"not written: {helper} lies outside the script's folder" in applied.stdout
    assert applied.returncode == 1


@pytest.mark.slow
def test_apply_never_writes_through_a_dangling_link_named_like_its_copy(tmp_path):
    script = _write(tmp_path / "proj" / "train.py", STALE)
    trap = tmp_path / "outside" / "planted.py"
    (script.parent / "train.py.orig").symlink_to(trap)
    done = _run("--apply", "train.py", cwd=script.parent)
    assert done.returncode == 1, done.stdout + done.stderr
    assert not trap.parent.exists(), "the copy was written through the link"
    assert FIX in script.read_text()
    assert (script.parent / "train.py.orig1").read_text() == STALE
    assert "the old one is train.py.orig1" in done.stdout


def test_a_file_changed_since_the_audit_read_it_is_not_written(tmp_path):
    script = _write(tmp_path / "train.py", "x = a.detach()\n")
    forget_sources()
    edit = edit_at(str(script), (1, 4), (1, 14), "a")
    read_source(str(script))
    script.write_text("# a line the user added\nx = a.detach()\n")
    with pytest.raises(Refused, match="changed since the audit read it"):
        write_edits([edit], str(tmp_path))
    assert script.read_text() == "# a line the user added\nx = a.detach()\n"
    assert _files(tmp_path) == {"train.py"}


@pytest.mark.slow
def test_a_script_that_rewrites_itself_while_audited_gets_one_line_and_exit_2(tmp_path):
    body = STALE.replace("    opt.step()\n", "    opt.step()\n    if it == 1:\n"
                         "        text = open(__file__).read()\n"
                         "        open(__file__, 'w').write('# touched\\n' + text)\n")
    script = _write(tmp_path / "train.py", body)
    done = _run("--apply", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "train.py: changed since the audit read it" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert script.read_text() == "# touched\n" + body and "train.py.orig" not in _files(tmp_path)


@pytest.mark.slow
def test_a_script_that_forks_has_its_edit_written_once(tmp_path):
    forks = STALE.replace("for it in range(4):", "import os\nchild = os.fork() == 0\n"
                          "for it in range(4):") + (
        "if child:\n    open('child-done', 'w').write('ok')\n")
    script = _write(tmp_path / "train.py", forks)
    done = _run("--apply", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    deadline = time.monotonic() + 120
    while not (tmp_path / "child-done").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (tmp_path / "child-done").exists(), "the forked process was stopped by the audit"
    time.sleep(1)
    assert sorted(p for p in _files(tmp_path) if ".orig" in p) == ["train.py.orig"]
    assert script.read_text().count("opt.zero_grad()") == 1


@pytest.mark.slow
def test_a_read_only_file_is_refused_in_one_line_with_nothing_left(tmp_path):
    script = _write(tmp_path / "train.py", STALE)
    script.chmod(stat.S_IRUSR | stat.S_IRGRP)
    done = _run("--apply", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"toolkit audit: {script}: is read-only; nothing was "
                                   f"written")
    assert script.read_text() == STALE and _files(tmp_path) == {"train.py"}


@pytest.mark.slow
def test_a_script_linked_from_outside_is_audited_but_never_written(tmp_path):
    real = _write(tmp_path / "elsewhere" / "train.py", STALE)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").symlink_to(real)
    done = _run("--apply", "train.py", cwd=tmp_path / "proj")
    assert done.returncode == 2 and "train.py: is a link; nothing was written" in done.stderr
    assert real.read_text() == STALE
    assert _files(tmp_path / "proj") == {"train.py"} and _files(real.parent) == {"train.py"}


def test_write_edits_refuses_every_file_before_writing_any(tmp_path):
    forget_sources()
    good = _write(tmp_path / "proj" / "a.py", "x = a.detach()\n")
    linked = tmp_path / "proj" / "b.py"
    linked.symlink_to(_write(tmp_path / "b.py", "y = b.detach()\n"))
    edits = [edit_at(str(good), (1, 4), (1, 14), "a"), edit_at(str(linked), (1, 4), (1, 14), "b")]
    with pytest.raises(Refused, match=r"b\.py: is a link; nothing was written"):
        write_edits(edits, str(tmp_path / "proj"))
    assert good.read_text() == "x = a.detach()\n" and _files(good.parent) == {"a.py", "b.py"}
    outside = edit_at(str(tmp_path / "b.py"), (1, 4), (1, 14), "b")
    with pytest.raises(Refused, match="lies outside the script's folder"):
        write_edits([edits[0], outside], str(tmp_path / "proj"))
    write_edits(edits[:1], str(tmp_path / "proj"))
    assert good.read_text() == "x = a\n" and (good.parent / "a.py.orig").read_text() == (
        "x = a.detach()\n")


def test_a_failed_write_puts_back_what_it_wrote_and_leaves_no_copy(tmp_path, monkeypatch):
    forget_sources()
    a = _write(tmp_path / "a.py", "x = a.detach()\n")
    b = _write(tmp_path / "b.py", "y = b.detach()\n")
    edits = [edit_at(str(a), (1, 4), (1, 14), "a"), edit_at(str(b), (1, 4), (1, 14), "b")]
    real_replace = os.replace

    def fail_on_b(src, dst):
        if str(dst).endswith("b.py"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_b)
    with pytest.raises(Refused, match=r"b\.py: could not be written"):
        write_edits(edits, str(tmp_path))
    monkeypatch.undo()
    assert a.read_text() == "x = a.detach()\n" and b.read_text() == "y = b.detach()\n"
    assert _files(tmp_path) == {"a.py", "b.py"}


# --- --record ---------------------------------------------------------------------------------

def test_record_refuses_a_file_a_link_and_a_linked_report(tmp_path, capsys):
    script = _write(tmp_path / "train.py", STALE)
    target = _write(tmp_path / "notes.txt", "mine\n")
    assert main(["--no-verify", "--record", str(target), str(script)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    assert main(["--no-verify", "--record", str(tmp_path / "linked"), str(script)]) == 2
    assert "is a link" in capsys.readouterr().err
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "report.json").symlink_to(target)
    assert main(["--no-verify", "--record", str(tmp_path / "rec"), str(script)]) == 2
    assert "report.json there is a link" in capsys.readouterr().err
    assert target.read_text() == "mine\n" and not (tmp_path / "real").exists()


# --- line endings and encodings ----------------------------------------------------------------

@pytest.mark.parametrize("encoding,newline,header", [
    ("utf-8", "\r\n", ""),
    ("utf-8-sig", "\n", "# é\n"),
    ("latin-1", "\n", "# -*- coding: latin-1 -*-\n# café\n"),
])
def test_an_edit_keeps_the_files_line_endings_and_encoding(tmp_path, capsys, encoding,
                                                           newline, header):
    forget_sources()
    script = _write(tmp_path / "train.py", header + STALE, encoding, newline)
    before = script.read_bytes()
    assert main(["--no-verify", str(script)]) == 1
    capsys.readouterr()
    from toolkit.audit.fixes.script_edits import insert_before

    line = (header + STALE).splitlines().index("    loss.backward()") + 1
    edit = insert_before(str(script), line, "opt.zero_grad()")
    assert edit is not None
    write_edits([edit], str(tmp_path))
    after = script.read_bytes()
    assert after == (header + STALE).replace("    loss.backward()\n", FIX).replace(
        "\n", newline).encode(encoding)
    assert after.startswith(b"\xef\xbb\xbf") == (encoding == "utf-8-sig")
    assert (tmp_path / "train.py.orig").read_bytes() == before


def test_lines_are_pythons_lines_a_form_feed_is_none(tmp_path):
    text = "a = 1\x0c\nb = x.detach()\n"
    edit = Edit("f", 2, 4, 2, 14, "x.detach()", "x")
    assert apply_to_text(text, [edit]) == "a = 1\x0c\nb = x\n"


# --- what is printed ---------------------------------------------------------------------------

def test_a_path_with_a_newline_or_a_bidi_override_cannot_forge_a_line(tmp_path, capsys):
    folder = tmp_path / "x\nFAIL    leak: forged\u202e"
    script = _write(folder / "train.py", STALE.replace("range(4)", "range(1)"))
    main(["--no-verify", str(script)])
    out, err = capsys.readouterr()
    assert not any(line.startswith("FAIL    leak: forged") for line in (out + err).splitlines())
    assert "\u202e" not in out + err
    assert escaped("a\nb\u202ec") == "a\\nb\\u202ec"


def test_no_verify_diff_prints_the_unverified_edits(tmp_path, capsys):
    script = _write(tmp_path / "train.py", STALE)
    assert main(["--no-verify", "--diff", str(script)]) == 1
    out = capsys.readouterr().out
    assert "not verified (--no-verify)" in out
    assert "+    opt.zero_grad()" in out and "--- a/train.py" in out


# --- the script runs as Python would run it ----------------------------------------------------

def test_the_script_gets_double_dash_and_what_follows_verbatim(tmp_path):
    script = _write(tmp_path / "train.py", "import sys\n"
                    "assert sys.argv[1:] == ['--', '--x', '--steps', '3'], sys.argv\n"
                    "sys.exit(7)\n")
    assert main(["--steps", "1", str(script), "--", "--x", "--steps", "3"]) == 7


@pytest.mark.slow
def test_a_script_that_changes_folder_keeps_its_verification(tmp_path):
    away = tmp_path / "away"
    away.mkdir()
    body = "import os\nos.chdir(" + repr(str(away)) + ")\n" + STALE
    script = _write(tmp_path / "proj" / "train.py", body)
    done = _run("train.py", cwd=script.parent)
    assert done.returncode == 1 and _verified(done.stdout), done.stdout


@pytest.mark.slow
def test_a_rerun_has_no_standard_input_and_says_so(tmp_path):
    script = _write(tmp_path / "train.py", "name = input()\n" + STALE)
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.audit", "train.py"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdin.write("run-1\n")
    proc.stdin.flush()   # held open, as a terminal is: a rerun that read it would wait forever
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert "(the rerun has no standard input)" in out
    assert script.read_text() == "name = input()\n" + STALE


@pytest.mark.slow
def test_a_script_named_like_a_standard_module_is_verified_or_told_why_not(tmp_path):
    _write(tmp_path / "random.py", STALE)
    done = _run("random.py", cwd=tmp_path)
    assert done.returncode == 1
    assert _verified(done.stdout) or \
        "shadows the standard library's random module" in done.stdout


def test_a_missing_zero_grad_between_watched_iterations_is_found_at_the_next(tmp_path, capsys):
    body = STALE.replace("range(4)", "range(30)").replace(
        "    loss = ", "    if it != 20:\n        opt.zero_grad()\n    loss = ")
    script = _write(tmp_path / "train.py", body)
    assert main(["--no-verify", "--watch", "10", str(script)]) == 1
    out = capsys.readouterr().out
    assert "FAIL    stale:" in out and "(iteration 20)" in out
    clean = _write(tmp_path / "clean.py", body.replace("if it != 20:", "if True:"))
    assert main(["--no-verify", "--watch", "10", str(clean)]) == 0
