"""Full disks and read-only folders: every command ends with one line and a documented exit
status, no run is left saying ``running``, and no complete run is lost (issue 25).

A real full disk is a tiny tmpfs, and a real read-only folder a read-only bind mount, both in a
mount namespace of the test's own (``unshare``); where the platform refuses that, the injected
``OSError(ENOSPC)`` at each write site stands in (:class:`faults_testutil.DiskFull`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from faults_testutil import DiskFull, can_unshare, in_namespace, one_line
from runner_testutil import FIXTURES

from toolkit.lab import RunResults
from toolkit.lab.cli import main

CONFIG = FIXTURES / "tiny.toml"
NO_SPACE = "No space left on device"


def _runs(out: Path) -> dict[str, RunResults]:
    folder = out / "tiny_counter"
    return {d.name: RunResults(d) for d in sorted(folder.iterdir())
            if (d / "meta.json").is_file()} if folder.is_dir() else {}


def _snapshot(out: Path) -> dict[str, bytes]:
    """The bytes of every complete run's files (a lost or rewritten run changes them)."""
    return {f"{name}/{f.name}": f.read_bytes() for name, run in _runs(out).items()
            if run.status == "complete" for f in sorted(run.run_dir.glob("*.json*"))}


def _no_temporary_files(out: Path) -> None:
    assert not [p for p in out.rglob(".*") if p.name.endswith(".tmp")]


# (file, writes that succeed first, exit status, what the line says)
SITES = [
    ("config.toml", 0, 1, "could not start"),
    ("meta.json", 0, 1, "could not start"),
    ("summary.json", 0, 1, "could not start"),
    ("summary.json", 1, 1, "OSError: [Errno 28]"),
    ("costs.json", 1, 1, "OSError: [Errno 28]"),
    ("curve.npz", 0, 1, "OSError: [Errno 28]"),
    ("metrics.jsonl", 0, 1, "OSError: [Errno 28]"),
    ("meta.json", 1, 1, "the final writes failed"),
    ("meta.json", 2, 1, "the final writes failed"),  # `complete`, the last write, fails
    ("findings.json", 0, 1, "the final writes failed"),
    ("report.html", 0, 0, "toolkit: warning:"),
]


@pytest.mark.parametrize(("name", "after", "code", "says"), SITES,
                         ids=[f"{n}#{a}" for n, a, _, _ in SITES])
def test_a_full_disk_at_each_write_site_of_a_run(
        name: str, after: int, code: int, says: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["run", str(CONFIG), "--out", str(out), "--no-report", "--quiet"]) == 0
    before = _snapshot(out)
    capsys.readouterr()
    DiskFull(monkeypatch, name, after)
    argv = ["run", str(CONFIG), "--seeds", "1", "--out", str(out), "--quiet"]
    assert main(argv + ([] if name == "report.html" else ["--no-report"])) == code
    captured = capsys.readouterr()
    line = one_line(captured.out + captured.err, NO_SPACE)
    assert says in line and name in line
    monkeypatch.undo()
    assert {k: v for k, v in _snapshot(out).items() if "__seed0__" in k} == before
    statuses = {n.split("__")[1]: r.status for n, r in _runs(out).items()}
    expected = {"could not start": {"seed0": "complete"}, "toolkit: warning:": {
        "seed0": "complete", "seed1": "complete"}}.get(says, {"seed0": "complete",
                                                              "seed1": "failed"})
    assert statuses == expected  # none says running; the seed-0 run was not run again
    if expected.get("seed1") == "failed":
        (failed,) = [r for r in _runs(out).values() if r.status == "failed"]
        assert NO_SPACE in failed.meta["error"] and name in failed.meta["error"]
    _no_temporary_files(out)


@pytest.mark.parametrize(("command", "name"), [("report", "report.md"),
                                               ("compare", "compare.csv")])
def test_a_full_disk_under_report_and_compare(command: str, name: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(out), "--no-report",
                 "--quiet"]) == 0
    before = _snapshot(out)
    capsys.readouterr()
    DiskFull(monkeypatch, name)
    target = [str(next(iter(_runs(out).values())).run_dir)] if command == "report" \
        else [str(out)]
    assert main([command, *target]) == 2
    line = one_line(capsys.readouterr().err, NO_SPACE)
    assert line.startswith("toolkit: error: ") and f"{name}: {NO_SPACE}; the disk is full" \
        in line
    assert _snapshot(out) == before
    _no_temporary_files(out)


needs_namespace = pytest.mark.skipif(not can_unshare(), reason="this platform does not let a "
                                     "test mount a tmpfs in a namespace of its own")


@needs_namespace
@pytest.mark.slow
def test_a_real_full_tmpfs(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    kept = tmp_path / "kept"
    script = f"""
out = {str(disk / 'results')!r}
cli("run", {str(CONFIG)!r}, "--out", out, "--no-report", "--quiet")
for pages in (0, 1, 2, 3, 4, 6, 8, 12, 16):
    fill({str(disk)!r}, pages)
    cli("run", {str(CONFIG)!r}, "--seeds", "1", "--out", out, "--quiet")
    os.remove(os.path.join({str(disk)!r}, ".filler"))
fill({str(disk)!r}, 0)
cli("run", {str(CONFIG)!r}, "--seeds", "1,2", "--workers", "2", "--out", out, "--quiet")
cli("compare", out)
shutil.copytree(out, {str(kept)!r})  # the tmpfs goes with the namespace
"""
    first, *runs, pool, compare = in_namespace(f"mount -t tmpfs -o size=1m tmpfs {disk}",
                                               script)
    assert first["code"] == 0
    for result in [*runs, pool, compare]:
        text = result["out"] + result["err"]
        assert "Traceback" not in text
        if result["code"] != 0:  # 1: the run failed, 2: refused before it started
            assert result["code"] in (1, 2)
            assert NO_SPACE in one_line(text, NO_SPACE)
    assert runs[0]["code"] == pool["code"] == compare["code"] == 2  # no room: refused
    assert one_line(pool["err"], "toolkit: error:").endswith(
        f"cannot write run folders to '{disk / 'results'}' ({NO_SPACE}); choose a "
        f"writable folder with --out DIR or output_dir = \"...\"")
    statuses = [r.status for r in _runs(kept).values()]
    assert statuses.count("complete") >= 1 and set(statuses) <= {"complete", "failed"}
    seed0 = [r for r in _runs(kept).values() if r.seed == 0]
    assert len(seed0) == 1 and seed0[0].status == "complete"


def _cli(*argv: str) -> dict[str, object]:
    """The command line in process, its output captured."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


@pytest.mark.slow
def test_a_read_only_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert main(["run", str(CONFIG), "--out", str(out), "--no-report", "--quiet"]) == 0
    (run,) = _runs(out).values()
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    before = _snapshot(out)
    commands = [["run", str(CONFIG), "--seeds", "1", "--out", str(out), "--no-report"],
                ["run", str(CONFIG), "--seeds", "1", "--out", str(out), "--dry-run"],
                ["report", str(run.run_dir)],
                ["compare", str(out)],
                ["compare", str(out), "--out", str(a_file)]]
    folders = [out, *(p for p in out.rglob("*") if p.is_dir())]
    if os.geteuid() != 0:  # an ordinary user is bound by the folders' permissions
        for folder in folders:
            folder.chmod(0o555)
        try:
            results = [_cli(*argv) for argv in commands]
        finally:
            for folder in folders:
                folder.chmod(0o755)
    elif can_unshare():  # root ignores permissions, not a read-only mount
        results = in_namespace(f"mount --bind {out} {out} && mount -o remount,bind,ro {out}",
                               "".join(f"cli(*{argv!r})\n" for argv in commands))
    else:
        pytest.skip("root ignores folder permissions and this platform refuses mounts")
    run_, dry, report, compare, compare_to_file = results
    for result in results:
        assert result["code"] == 2, result
        one_line(result["err"], "toolkit: error:")
    refused = "output_dir: cannot write run folders to"
    assert refused in run_["err"] and refused in dry["err"]
    assert str(run.run_dir / "figures") in report["err"]
    assert "compare.csv" in compare["err"]
    assert f"{a_file}: File exists; a file is in the way of a folder" in compare_to_file["err"]
    assert _snapshot(out) == before and len(_runs(out)) == 1  # nothing lost, nothing added


def test_the_output_check_at_dry_run_makes_no_folder(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new" / "results"
    assert main(["run", str(CONFIG), "--out", str(out), "--dry-run"]) == 0
    assert not (tmp_path / "new").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", str(CONFIG), "--out", str(blocker / "results"), "--dry-run"]) == 2
    line = one_line(capsys.readouterr().err, "toolkit: error:")
    assert f"cannot write run folders to '{blocker / 'results'}'" in line
    shutil.rmtree(tmp_path / "new", ignore_errors=True)
