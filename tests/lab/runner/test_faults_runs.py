"""Killed runs, damaged files, resumed folders and refused patterns: each command ends with one
clear line and a documented exit status, and no complete run is lost or run again (issue 25)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from faults_testutil import one_line
from runner_testutil import FIXTURES, REPO

from toolkit.lab import RunInterrupted, RunResults
from toolkit.lab.cli import main
from toolkit.lab.execute import run as run_module
from toolkit.lab.plan.config import plan
from toolkit.lab.plan.registry import load_experiment

CONFIG = FIXTURES / "tiny.toml"


def _runs(folder: Path) -> list[RunResults]:
    return [RunResults(d) for d in sorted(folder.iterdir()) if (d / "meta.json").is_file()]


def _bytes(runs: list[RunResults]) -> dict[str, bytes]:
    return {f"{r.run_dir}/{f.name}": f.read_bytes() for r in runs
            for f in sorted(r.run_dir.iterdir()) if f.is_file()}


@pytest.mark.slow
def test_kill_9_during_a_run_then_report_compare_and_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, marker = tmp_path / "results", tmp_path / "stalled"
    config = tmp_path / "stalls.toml"
    config.write_text(f'experiment = "stalls_once"\nseeds = [0, 1, 2]\ndevice = "cpu"\n'
                      f'[params]\nstall_seed = 1\nmarker = {json.dumps(str(marker))}\n')
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "run", str(config), "--out",
                             str(out), "--no-report", "--quiet"], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not marker.exists():  # seed 0 completed, seed 1 stalls after two logged steps
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)

    folder = out / "stalls_once"
    complete, killed = _runs(folder)
    assert (complete.seed, complete.status, killed.seed) == (0, "complete", 1)
    assert killed.meta["status"] == "running" and killed.status == "abandoned"
    assert killed.status_line() == (f"abandoned (nothing holds its lock: its process "
                                    f"{proc.pid} on {killed.meta['host']} is gone; last "
                                    f"logged step 1)")
    before = _bytes([complete])

    assert main(["report", str(killed.run_dir)]) == 0
    assert f"This run is abandoned (nothing holds its lock: its process {proc.pid}" in \
        (killed.run_dir / "report.html").read_text()
    assert main(["compare", str(folder)]) == 0
    shown = one_line(capsys.readouterr().out, "not in the table")
    assert shown == f"not in the table, {killed.status_line()}: {killed.run_dir}"

    assert main(["run", str(config), "--out", str(out), "--no-report", "--resume"]) == 0
    assert one_line(capsys.readouterr().out, "skipped (complete)").endswith(str(complete.run_dir))
    runs = _runs(folder)
    by_seed = {s: [r.status for r in runs if r.seed == s] for s in (0, 1, 2)}
    assert by_seed == {0: ["complete"], 1: ["abandoned", "complete"], 2: ["complete"]} or \
        by_seed == {0: ["complete"], 1: ["complete", "abandoned"], 2: ["complete"]}
    assert _bytes([complete]) == before  # kept, not run again


FILES = ["meta.json", "config.toml", "summary.json", "costs.json", "findings.json",
         "metrics.jsonl"]


def _parses(name: str, text: bytes) -> bool:
    """Whether ``text`` still reads as the format of ``name``: a file cut after a whole line of
    TOML (or JSON lines) is a shorter valid file, not a damaged one."""
    try:
        if name.endswith(".toml"):
            tomllib.loads(text.decode())
        else:
            for line in text.decode().splitlines() if name.endswith(".jsonl") else [text]:
                json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


@pytest.fixture(scope="module")
def two_complete_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("two") / "results"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))
        assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", str(out), "--no-report",
                     "--quiet"]) == 0
    return out


@pytest.mark.parametrize("name", FILES)
def test_each_results_file_truncated_in_turn(name: str, two_complete_runs: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    shutil.copytree(two_complete_runs, out)
    folder = out / "tiny_counter"
    good, bad = _runs(folder)
    damaged = bad.run_dir / name
    text = damaged.read_bytes()
    cut = len(text) // 2
    # cut inside a value, as a killed write does: where the file no longer parses (half of a
    # config.toml can end after a whole line, whose length depends on the folder's path)
    while cut > 1 and (text[cut - 1:cut] in (b"\n", b" ") or _parses(name, text[:cut])):
        cut -= 1
    assert not _parses(name, text[:cut]), text
    damaged.write_bytes(text[:cut])
    before = _bytes([good])
    capsys.readouterr()

    assert main(["compare", str(out)]) == 0  # the other run is aggregated
    captured = capsys.readouterr()
    warning = one_line(captured.err, "toolkit: warning:")
    assert warning.startswith(f"toolkit: warning: {damaged}: ") and "left out" in warning
    with (out / "compare.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["quantity"] == "loss"]
    assert rows and {r["n"] for r in rows} == {"1"} and {r["seeds"] for r in rows} == {"0"}

    assert main(["report", str(good.run_dir), str(bad.run_dir)]) == 1
    warning = one_line(capsys.readouterr().err, "toolkit: warning:")
    assert warning.startswith(f"toolkit: warning: {damaged}: ") and "skipped" in warning
    assert (good.run_dir / "report.html").is_file()
    assert not (bad.run_dir / "report.html").exists()

    assert main(["check", str(out)]) == 1
    listed = one_line(capsys.readouterr().out, "damaged:")
    assert listed.startswith(f"damaged: {damaged}: ")
    assert damaged.read_bytes() == text[:cut]  # reading repairs nothing
    after = _bytes([good])
    assert {k: after[k] for k in before} == before  # the sound run is untouched


def test_check_of_sound_results_and_a_cut_short_metrics_line(
        two_complete_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    shutil.copytree(two_complete_runs, out)
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith(
        f"3 folders below {out}: complete 2, seed group 1; 0 damaged")
    # an interrupted run may end with a line cut short: allowed, the reader stops before it
    _, run = _runs(out / "tiny_counter")
    meta = run.meta | {"status": "interrupted"}
    (run.run_dir / "meta.json").write_text(json.dumps(meta))
    with (run.run_dir / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 99, "blocked/tr')
    assert main(["check", str(out)]) == 0
    npz = run.run_dir / "artifacts" / "curve.npz"
    npz.write_bytes(npz.read_bytes()[:40])
    assert main(["check", str(out)]) == 1
    assert one_line(capsys.readouterr().out, "damaged:").startswith(f"damaged: {npz}: ")


@pytest.mark.parametrize("spelling", ["copy", "trailing slash", "relative"])
def test_resume_by_identity_not_by_path(spelling: str, two_complete_runs: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    shutil.copytree(two_complete_runs, out)  # a copied folder: config.toml names the old one
    before = _bytes(_runs(out / "tiny_counter"))
    given = {"copy": str(out), "trailing slash": f"{out}/", "relative": "results"}[spelling]
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["run", str(CONFIG), "--seeds", "0,1", "--out", given, "--resume"]) == 0
    assert one_line(capsys.readouterr().out, "nothing to do") == \
        "nothing to do: every run is complete or running"
    assert _bytes(_runs(out / "tiny_counter")) == before  # nothing run again, nothing lost


def test_a_disable_pattern_that_matches_no_block_is_refused_at_dry_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    for extra in (["--dry-run"], []):
        assert main(["run", str(CONFIG), "--set", "disable_blocks=tdd.*", "--out", str(out),
                     *extra]) == 2
        line = one_line(capsys.readouterr().err, "toolkit: error:")
        assert line == ("toolkit: error: --set disable_blocks=tdd.*: disable_blocks: 'tdd.*' "
                        "matches no block "
                        "of tiny_counter (its blocks: tiny.target, tiny.outside), so blocked "
                        "and unblocked would compute the same thing; use a block name or a "
                        "pattern such as 'tiny.*'")
    assert not out.exists()  # refused before anything ran


def test_shipped_configs_disable_blocks_the_experiments_declare(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.lab.plan.config import check_blocks

    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    for path in sorted((REPO / "configs").glob("*.toml")):
        runs = plan(path, overrides=["device=cpu"])  # planning checks them too
        for spec in runs:
            check_blocks(spec.config, spec.experiment, spec.source)  # ConfigError otherwise


_HOLD = """
import sys, time
from toolkit.lab.results.view import lock_of
lock = lock_of(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_running_exactly_while_its_process_holds_the_lock(tmp_path: Path) -> None:
    # liveness is the run's lock: no pid, host, start time or clock is compared
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    meta = {"status": "running", "experiment": "x", "seed": 0, "host": "another-machine",
            "pid": 1, "started": "2999-01-01T00:00:00+00:00"}  # a clock far ahead: no matter
    (run_dir / "meta.json").write_text(json.dumps(meta))
    run = RunResults(run_dir)
    assert run.status == "abandoned"  # no lock at all: a copied folder, or a process gone
    assert run.abandoned_reason.startswith("it holds no lock")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run_dir)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert RunResults(run_dir).status == "running"  # its process holds the lock
        assert RunResults(run_dir).abandoned_reason is None
        # an old meta.json changes nothing while the lock is held (there is no heartbeat)
        old = time.time() - 86_400
        os.utime(run_dir / "meta.json", (old, old))
        assert RunResults(run_dir).status == "running"
    finally:
        holder.kill()  # SIGKILL: the kernel drops the lock
        holder.wait(timeout=60)
    run = RunResults(run_dir)
    assert run.status == "abandoned"
    assert run.abandoned_reason == ("nothing holds its lock: its process 1 on another-machine "
                                    "is gone")
    assert run.meta["status"] == "running"  # reading writes nothing
    (run_dir / "meta.json").write_text(json.dumps(meta | {"status": "complete"}))
    assert RunResults(run_dir).status == "complete"  # a lock nobody holds ends nothing else


def test_the_lock_is_held_from_before_running_until_after_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.lab.results.files import atomic_write_json
    from toolkit.lab.results.view import LOCK

    seen: list[tuple[str, str]] = []

    def noting(path: Path, obj: object, **kwargs: object) -> None:
        atomic_write_json(path, obj, **kwargs)
        if Path(path).name == "meta.json":  # each write of meta.json, read as a reader would
            run = RunResults(Path(path).parent)
            seen.append((run.meta["status"], run.status))

    monkeypatch.setattr(run_module, "atomic_write_json", noting)
    spec = plan(CONFIG, output_dir=tmp_path)[0]
    outcome = run_module.execute(spec, quiet=True)
    assert outcome.status == "complete"
    assert seen[0] == ("running", "running") and seen[-1] == ("complete", "complete")
    assert all(status == meta for meta, status in seen)  # never abandoned while it runs
    assert (outcome.run_dir / LOCK).is_file()  # kept: it tells a run from a copied folder
    assert RunResults(outcome.run_dir).status == "complete"


def test_an_unexpected_error_is_one_line_and_debug_shows_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import toolkit.lab.cli.commands

    def broken(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(toolkit.lab.cli.commands, "cmd_list", broken)
    assert main(["list"]) == 1
    assert capsys.readouterr().err == ("toolkit: error: unexpected RuntimeError: a bug (a bug: "
                                       "run the command again with --debug to see the "
                                       "traceback)\n")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["list", "--debug"])


@pytest.mark.parametrize(("experiment", "key", "bound"), [("em_gmm", "n_iter", 100_000),
                                                          ("td_learning", "baird_sweeps",
                                                           1_000_000)])
def test_an_iteration_count_that_would_run_for_days_is_refused(
        experiment: str, key: str, bound: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:

    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    if not load_experiment(experiment).path.is_relative_to(REPO):
        pytest.skip("the installed experiments are another checkout's")
    config = REPO / "configs" / f"{experiment}.toml"
    assert main(["run", str(config), "--set", f"params.{key}={10 * bound}", "--dry-run"]) == 2
    line = one_line(capsys.readouterr().err, "toolkit: error:")
    assert f"params.{key}: Input should be less than or equal to {bound}, got {10 * bound}" \
        in line


@pytest.mark.slow
def test_ctrl_c_on_a_pool_says_what_each_run_kept(tmp_path: Path) -> None:
    started, out = tmp_path / "started", tmp_path / "results"
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "run", str(CONFIG), "--out", str(out), "--seeds",
         "0,1,2,3", "--workers", "2", "--no-report", "--set", "params.n_logged=100000",
         "--set", "params.sleep_s=0.01", "--set", f"params.started_file={json.dumps(str(started))}"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # the signal goes to the whole group, as Ctrl-C in a terminal
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err
    runs = _runs(out / "tiny_counter")
    assert runs and {r.status for r in runs} == {"interrupted"}
    logged = sum(r.last_step is not None for r in runs)
    assert logged >= 1  # the run that wrote `started` had logged its first step
    text = " ".join(err.split())  # the summary's lines unwrapped
    for run in runs:  # one line for each run that had started, saying what it kept
        kept = "nothing logged" if run.last_step is None else \
            f"kept steps up to {run.last_step}"
        assert text.count(str(run.run_dir)) == 1
        assert f"interrupted {run.run_dir} (" in text and f"; {kept})" in text
    left = 4 - len(runs)
    assert one_line(err, "not started") == f"  not started  {left} run{'s' * (left != 1)}"
    assert one_line(err, "to finish: ").endswith(" --resume")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_final_writes_waits_until_the_record_is_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    # A pool stopped by Ctrl-C passes the signal on to its workers: one that has just left its
    # experiment and makes its findings still writes its whole record, and only then stops
    # (the outcome's exit code), so the run is listed, complete, not lost or left "running"
    findings = run_module.compute_findings

    def signalled(*args: object) -> object:
        os.kill(os.getpid(), signum)  # its handler would raise here
        return findings(*args)

    def stop(got: int, frame: object) -> None:
        raise RunInterrupted(got)

    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))
    monkeypatch.setattr(run_module, "compute_findings", signalled)
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = run_module.execute(plan(CONFIG, output_dir=tmp_path)[0], quiet=True)
        assert signal.getsignal(signum) == stop  # the handler is put back
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    assert (outcome.status, outcome.exit_code) == ("complete", 128 + signum)
    run = RunResults(outcome.run_dir)
    assert run.status == "complete" and (run.run_dir / "findings.json").is_file()
