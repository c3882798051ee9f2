"""A results folder is hostile input (issue 43): links leading out of it, FIFOs and folders in a
file's place, files nested 200,000 deep, integers of thousands of digits, findings of the
wrong shape. Nothing outside the folder is written, deleted or read; each damaged file is one
damaged run, named, and the other runs go on; no command says "unexpected"."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

from toolkit.lab.cli import main
from toolkit.lab.errors import DamagedFile, OutsideFolder
from toolkit.lab.execute.resume import LOCKS
from toolkit.lab.results.files import atomic_write_text, confined, inside, new_run_dir
from toolkit.lab.results.view import RunResults, check_run

CONFIG = FIXTURES / "tiny.toml"


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two complete runs of the tiny experiment (seeds 0 and 1), with their reports."""
    out = tmp_path_factory.mktemp("sound") / "results"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))
        assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(out), "--no-report",
                     "--quiet"]) == 0
    return out


@pytest.fixture
def results(sound: Path, tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(sound, out, symlinks=True)
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the results, holding files the lab must never touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    for name in ("old.png", "report.html", "compare.csv", "summary.json", "x.lock"):
        (folder / name).write_text(f"not the lab's: {name}\n")
    return folder


def _runs(results: Path) -> list[Path]:
    return sorted(p for p in (results / "tiny_counter").iterdir() if (p / "meta.json").exists())


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "unexpected" not in text and "Traceback" not in text, text
    return text


# ----------------------------------------------------------------------------- the helper


def test_inside_names_the_link_that_leads_out(tmp_path: Path, outside: Path) -> None:
    run = tmp_path / "run"
    (run / "figures").mkdir(parents=True)
    (run / "artifacts").symlink_to(outside)
    assert inside(run, run / "figures" / "a.png") == (run / "figures" / "a.png").resolve()
    with pytest.raises(OutsideFolder, match=r"artifacts: a symbolic link to .*outside.*; the "
                                            r"lab writes, deletes and reads only inside"):
        inside(run, run / "artifacts" / "deep" / "x.json")
    with pytest.raises(OutsideFolder, match="lies outside"):
        inside(run, run / ".." / "elsewhere")
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(run)  # the folder itself may be a link: it is the user's choice
    assert inside(linked_root, linked_root / "figures") == (run / "figures").resolve()


def test_writes_confined_to_a_folder_refuse_a_link_and_write_nothing(
        tmp_path: Path, outside: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "figures").symlink_to(outside)
    before = _snapshot(outside)
    with pytest.raises(OutsideFolder, match="figures: a symbolic link"):
        atomic_write_text(run / "figures" / "a.png", "x", root=run)
    with confined(run), pytest.raises(OutsideFolder):
        atomic_write_text(run / "figures" / "old.png", "x")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tiny_counter").symlink_to(outside)
    with pytest.raises(OutsideFolder, match="tiny_counter: a symbolic link"):
        new_run_dir(tmp_path / "out", "tiny_counter", 0)
    assert _snapshot(outside) == before


# ----------------------------------------------------------------------------- every command


def test_every_command_over_a_folder_full_of_links(
        results: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _runs(results)
    shutil.rmtree(a / "artifacts")
    (a / "artifacts").symlink_to(outside)
    (a / "figures").symlink_to(outside)
    (a / "report.html").symlink_to(outside / "report.html")
    (b / "summary.json").unlink()
    (b / "summary.json").symlink_to(outside / "summary.json")
    (results / "compare_figures").symlink_to(outside)
    before = _snapshot(outside)
    capsys.readouterr()

    assert main(["check", str(results)]) == 1
    said = _said(capsys)
    for link in (a / "artifacts", a / "figures", a / "report.html", b / "summary.json"):
        assert f"damaged: {link}: a symbolic link to {outside}" in said, said

    assert main(["report", str(a), str(b)]) == 1
    said = _said(capsys)
    assert said.count("skipped, its report not drawn") == 2, said

    assert main(["compare", str(results)]) == 2  # compare_figures/ leads out: refused at once
    said = _said(capsys)
    assert f"{results / 'compare_figures'}: a symbolic link to {outside}" in said, said
    (results / "compare_figures").unlink()
    assert main(["compare", str(results)]) == 2  # both runs damaged: nothing to compare
    said = _said(capsys)
    assert said.count("that run is left out") == 2, said

    assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(results), "--resume",
                 "--no-report", "--quiet"]) == 0  # the damaged runs are run again, inside
    _said(capsys)
    assert _snapshot(outside) == before


def test_run_into_an_experiment_folder_that_is_a_link(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "tiny_counter").symlink_to(outside)
    before = _snapshot(outside)
    for extra in (["--resume"], []):
        capsys.readouterr()
        assert main(["run", str(CONFIG), "--out", str(out), "--no-report", "--quiet",
                     *extra]) == 2
        said = _said(capsys)
        assert f"{out / 'tiny_counter'}: a symbolic link to {outside}" in said, said
    assert _snapshot(outside) == before


def test_the_output_probe_writes_nothing_through_a_link(
        tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "tiny_counter").symlink_to(outside)
    touched: list[Path] = []
    write_bytes = Path.write_bytes

    def spy(self: Path, data: bytes) -> int:
        touched.append(self.resolve())
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", spy)
    main(["run", str(CONFIG), "--out", str(out), "--no-report", "--quiet"])
    assert not [p for p in touched if p.is_relative_to(outside.resolve())]


def test_write_report_alone_refuses_a_figures_link(results: Path, outside: Path) -> None:
    from toolkit.lab.report import write_report

    run = _runs(results)[0]
    (run / "figures").symlink_to(outside)
    before = _snapshot(outside)
    with pytest.raises(OutsideFolder):
        write_report(run)
    assert _snapshot(outside) == before


# ----------------------------------------------------------------------------- damaged files

DEEP = b"[" * 200_000 + b"]" * 200_000


def _damage(run: Path, name: str, how: str, outside: Path) -> Path:
    path = run / name
    if how != "missing" and (path.exists() or path.is_symlink()):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    if how in ("deep", "huge_int"):
        value = DEEP if how == "deep" else b"9" * 5000
        path.write_bytes({".json": b'{"seed": ' + value + b"}",
                          ".jsonl": b'{"step": 0, "a": ' + value + b"}\n",
                          ".toml": b"seed = " + value + b"\n"}[path.suffix])
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "folder":
        path.mkdir()
    elif how == "link_out":
        path.symlink_to(outside / "summary.json")
    elif how == "enormous":
        with path.open("wb") as fh:  # sparse: no disk used
            fh.truncate(300 * 2**20)
    return path


# every way on meta.json, the file every reader opens first; the other files with the slow tests
@pytest.mark.parametrize("name", ["meta.json", *(pytest.param(name, marks=pytest.mark.slow) for name
                                                 in ["config.toml", "summary.json", "costs.json",
                                                     "findings.json", "metrics.jsonl"])])
@pytest.mark.parametrize("how", ["deep", "huge_int", "fifo", "folder", "link_out", "enormous"])
def test_each_file_damaged_each_way_is_one_damaged_run(
        name: str, how: str, results: Path, outside: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = _runs(results)
    damaged = _damage(bad, name, how, outside)
    capsys.readouterr()
    assert main(["check", str(results)]) == 1
    assert f"damaged: {damaged}: " in _said(capsys)
    assert main(["compare", str(results)]) == 0  # the sound run is tabulated
    said = _said(capsys)
    assert f"toolkit: warning: {damaged}: " in said and "left out" in said, said
    if how in ("deep", "fifo"):  # report draws figures: two ways are enough for it
        assert main(["report", str(bad), str(good)]) == 1
        said = _said(capsys)
        assert f"toolkit: warning: {damaged}: " in said, said
        assert (good / "report.html").is_file()


@pytest.mark.parametrize("findings", [
    {"seeds": [1], "findings": {"tiny_counter": ["not an object"]}, "problems": []},
    {"findings": {"tiny_counter": [{"text": "{x} held", "values": {}, "verdict": True,
                                    "basis": "b"}]}},
    {"seeds": [1], "findings": {"tiny_counter": [{"timing": {"rounds": "fast"}}]}},
    {"seeds": "1", "findings": []},
    {"findings": {"tiny_counter": [{"per_seed": [{"need": 7}]}]}},
], ids=["verdict-a-string", "placeholder-without-value", "rounds-a-string", "seeds-a-string",
        "old-format-need-7"])
def test_findings_of_the_wrong_inner_types_are_damage(
        findings: dict, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = _runs(results)
    (bad / "findings.json").write_text(json.dumps(findings))
    [problem] = check_run(bad)
    assert problem.path == bad / "findings.json"
    capsys.readouterr()
    assert main(["report", str(bad), str(good)]) == 1
    said = _said(capsys)
    assert f"toolkit: warning: {bad / 'findings.json'}: " in said, said


@pytest.mark.parametrize("row", ['{"step": 1, "blocked/train/loss": "low"}',
                                 '{"step": "1"}', "[1, 2]", '{"step": 1, "x": [1]}'])
def test_a_metrics_row_of_the_wrong_shape_names_its_line(row: str, results: Path) -> None:
    bad = _runs(results)[1]
    with (bad / "metrics.jsonl").open("a") as fh:
        fh.write(row + "\n")
    [problem] = check_run(bad)
    assert problem.path == bad / "metrics.jsonl" and problem.problem.startswith("line ")
    with pytest.raises(DamagedFile, match=r"metrics\.jsonl: line "):
        _ = RunResults(bad).all_metrics


def test_a_damaged_seed_group_is_named(results: Path, outside: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.lab.results.records import write_group

    group = write_group(_runs(results))
    info = json.loads((group / "group.json").read_text())
    (results / "tiny_counter" / "linked").symlink_to(outside)
    for runs, problem in ([["../../../outside"], "'runs.0': String should match pattern"],
                          [["../linked", info["runs"][1]], "a member run lies outside"],
                          ["../x", "'runs': Input should be a valid list"]):
        (group / "group.json").write_text(json.dumps({**info, "runs": runs}))
        capsys.readouterr()
        assert main(["report", str(group)]) == 1
        said = _said(capsys)
        assert f"toolkit: warning: {group / 'group.json'}: " in said and problem in said, said
        assert main(["check", str(results)]) == 1
        assert f"damaged: {group / 'group.json'}: " in _said(capsys)


def test_an_artifact_that_lies_about_its_size_is_damage(results: Path) -> None:
    import io
    import zipfile

    import numpy as np

    bad = _runs(results)[1]
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10**12,)})
    with zipfile.ZipFile(bad / "artifacts" / "curve.npz", "w") as archive:
        archive.writestr("blocked.npy", header.getvalue())
    [problem] = check_run(bad, deep=True)
    assert "claims 8,000,000,000,000 bytes of data but holds" in problem.problem
    with pytest.raises(DamagedFile, match=r"curve\.npz: .*claims"):
        RunResults(bad).artifact("curve")


def test_reading_does_not_follow_a_link_out(results: Path, outside: Path) -> None:
    run = _runs(results)[0]
    (run / "costs.json").unlink()
    (run / "costs.json").symlink_to(outside / "summary.json")
    with pytest.raises(OutsideFolder, match=r"costs\.json: a symbolic link"):
        _ = RunResults(run).costs


# ----------------------------------------------------------------------------- --resume locks


def _lock_path(out: Path, seed: int) -> Path:
    from toolkit.lab.plan.config import plan

    [spec] = plan(str(CONFIG), [], seeds=[seed], output_dir=str(out))
    return out / "tiny_counter" / LOCKS / f"{spec.config.identity()}.lock"


def test_resume_does_not_start_a_run_another_process_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    lock = _lock_path(out, 0)
    lock.parent.mkdir(parents=True)
    with lock.open("w") as held:  # another process's lock: flock is per open file
        fcntl.flock(held, fcntl.LOCK_EX)
        assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(out), "--resume",
                     "--no-report", "--quiet"]) == 0
    said = _said(capsys)
    assert "tiny_counter seed 0: running now in another process; not started twice" in said
    assert [RunResults(d).seed for d in _runs(out)] == [1]
    assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(out), "--resume",
                 "--no-report", "--quiet"]) == 0  # released: seed 0 runs now, seed 1 is kept
    assert sorted(RunResults(d).seed for d in _runs(out)) == [0, 1]


def test_a_lock_dies_with_its_process(tmp_path: Path) -> None:
    import filelock

    from toolkit.lab.results.view import LOCK, lock_of

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from toolkit.lab.results.view import lock_of\n"
                               "lock = lock_of(sys.argv[1])\nlock.acquire()\n"
                               "print('held', flush=True); time.sleep(60)", str(tmp_path)],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    mine = lock_of(tmp_path)
    with pytest.raises(filelock.Timeout):
        mine.acquire()  # never waited for
    with (tmp_path / LOCK).open("w") as raw, pytest.raises(BlockingIOError):
        fcntl.flock(raw, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the kernel's lock, seen by any reader
    holder.kill()  # SIGKILL: no handler runs, no file is cleaned up
    holder.wait(timeout=30)
    mine.acquire()  # the kernel released it
    mine.release()
    assert (tmp_path / LOCK).is_file()


@pytest.mark.slow
def test_two_resumes_at_once_run_each_seed_once(tmp_path: Path) -> None:
    out = tmp_path / "results"
    config = tmp_path / "slow.toml"
    config.write_text(CONFIG.read_text().replace("n_steps = 4", "n_steps = 2\nsleep_s = 0.4"))
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "toolkit", "run", str(config), "--seeds", "0-3", "--out",
               str(out), "--resume", "--no-report", "--quiet"]
    procs = [subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(0.01)
    said = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], said
    assert not any("unexpected" in out + err for out, err in said)
    seeds = sorted(RunResults(d).seed for d in _runs(out))
    assert seeds == [0, 1, 2, 3], said
