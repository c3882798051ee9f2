"""One test per failure found when the lab was tried as a new user and as an attacker (issue 52):
each failed on the lab before it was rebuilt on one schema."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolkit.lab import ConfigError, RunResults, run_experiment
from toolkit.lab.errors import DamagedFile
from toolkit.lab.execute.resume import plan_resume
from toolkit.lab.plan.config import Plan, executor_for, parse_override, plan, plan_one
from toolkit.lab.results.schema import ExecutorConfig, RunConfig
from toolkit.lab.results.view import check_group, check_run, check_tree, find_runs

REPO = Path(__file__).resolve().parents[3]


def _config(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _tiny(tmp_path: Path, **params: object) -> RunResults:
    return run_experiment("tiny_counter", params or None, dtype="float64",
                          output_dir=tmp_path / "out")


# ----------------------------------------------------------------------------- records


def test_a_none_parameter_keeps_the_identity_written_to_config_toml(tmp_path: Path) -> None:
    spec = plan_one("td_learning", {"chain_steps": None, "n_states": 4},
                    output_dir=tmp_path)
    assert spec.config.params["chain_steps"] is None
    text = spec.config.to_toml()
    assert "chain_steps" not in text  # TOML has no null
    assert RunConfig.from_toml(text).identity() == spec.config.identity()


def test_resume_recognises_a_run_with_a_none_parameter(tmp_path: Path) -> None:
    config = _config(tmp_path, 'experiment = "tiny_counter"\ndtype = "float64"\n'
                               f'output_dir = "{tmp_path / "out"}"\n')
    specs = plan(config)
    run_experiment(specs[0].config)
    again = plan_resume(plan(config))
    assert not again.todo and len(again.done) == 1


def test_a_live_run_is_running_whatever_its_clock_says(tmp_path: Path) -> None:
    run = _tiny(tmp_path)
    meta = json.loads((run.run_dir / "meta.json").read_text())
    meta.update(status="running", started="1999-01-01T00:00:00+00:00", host="elsewhere",
                pid=1)
    (run.run_dir / "meta.json").write_text(json.dumps(meta))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, filelock; lock = filelock.FileLock(sys.argv[1],"
         " thread_local=False, preserve_lock_file=True); lock.acquire(); print('held', flush=True);"
         " time.sleep(60)", str(run.run_dir / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert RunResults(run.run_dir).status == "running"
    finally:
        holder.kill()
        holder.wait()
    assert RunResults(run.run_dir).status == "abandoned"  # the kernel dropped its lock


def test_complete_is_written_after_every_other_file(tmp_path: Path, monkeypatch) -> None:
    import toolkit.lab.execute.run as run_module

    seen = []
    write = run_module.atomic_write_json

    def spy(path, obj, **kwargs):  # type: ignore[no-untyped-def]
        if Path(path).name == "meta.json" and getattr(obj, "status", None) == "complete":
            folder = Path(path).parent
            seen.append({name: (folder / name).exists() for name in
                         ("findings.json", "findings.md", "summary.json", "costs.json")})
        return write(path, obj, **kwargs)

    monkeypatch.setattr(run_module, "atomic_write_json", spy)
    _tiny(tmp_path)
    assert seen and all(all(files.values()) for files in seen)


@pytest.mark.parametrize("damage", ["cut", "empty", "deleted"])
def test_check_finds_metrics_that_do_not_match_the_record(tmp_path: Path, damage: str) -> None:
    run = _tiny(tmp_path, n_steps=6)
    path = run.run_dir / "metrics.jsonl"
    assert check_run(run.run_dir) == []
    rows = path.read_text().splitlines()
    if damage == "cut":
        path.write_text("\n".join(rows[:2]) + "\n")
    elif damage == "empty":
        path.write_text("")
    else:
        path.unlink()
    problems = check_run(run.run_dir)
    assert problems and "metrics.jsonl" in str(problems[0])


def test_a_pid_no_system_has_is_a_damaged_record(tmp_path: Path) -> None:
    run = _tiny(tmp_path)
    meta = json.loads((run.run_dir / "meta.json").read_text())
    meta.update(status="running", pid=2**31)
    (run.run_dir / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DamagedFile, match="pid"):
        RunResults(run.run_dir).status  # noqa: B018


@pytest.mark.slow  # 1,500 folders made and walked
def test_folders_nested_1500_deep_are_walked_without_recursion(tmp_path: Path) -> None:
    deep = str(tmp_path)
    for _ in range(1500):  # one at a time: pathlib's mkdir(parents=True) recurses itself
        deep += "/d"
        os.mkdir(deep)
    try:
        assert list(find_runs(tmp_path)) == []
        assert list(check_tree(tmp_path)) == []
    finally:  # bottom up: shutil.rmtree (pytest's clean-up) recurses once per level
        while deep != str(tmp_path):
            os.rmdir(deep)
            deep = os.path.dirname(deep)


def test_an_empty_seed_group_is_damaged_not_a_crash(tmp_path: Path) -> None:
    group = tmp_path / "g"
    group.mkdir()
    (group / "group.json").write_text(json.dumps(
        {"kind": "seed group", "experiment": "tiny_counter", "seeds": [], "runs": []}))
    problems = check_group(group)
    assert problems and "group.json" in str(problems[0])
    from toolkit.lab.report import write_report

    with pytest.raises(DamagedFile):
        write_report(group)


# ----------------------------------------------------------------------------- at the door


def test_a_config_nested_500_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    config = _config(tmp_path, 'experiment = "tiny_counter"\n[params]\nx = '
                     + "[" * 500 + "]" * 500 + "\n")
    with pytest.raises(ConfigError, match="deep"):
        Plan.read(config)


def test_a_huge_value_is_not_echoed_whole(tmp_path: Path) -> None:
    config = _config(tmp_path, 'experiment = "tiny_counter"\n')
    with pytest.raises(ConfigError) as caught:
        plan(config, [f"params.n_steps=\"{'x' * 100_000}\""])  # kilobytes prove it
    assert len(caught.value.line()) < 1000


def test_tilde_and_variables_in_output_dir_are_expanded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RESULTS_AT", "there")
    config = _config(tmp_path, 'experiment = "tiny_counter"\noutput_dir = "~/$RESULTS_AT"\n')
    (spec,) = plan(config)
    assert spec.config.output_dir == str(tmp_path / "home" / "there")
    monkeypatch.delenv("RESULTS_AT")
    with pytest.raises(ConfigError, match="RESULTS_AT"):
        plan(config)


def test_a_set_value_with_a_line_break_is_refused() -> None:
    with pytest.raises(ConfigError, match="line break"):
        parse_override("params.n_steps=3\nseed=4")


@pytest.mark.parametrize("value", ["true", "1.0", '"1"'])
def test_a_seed_is_an_integer(tmp_path: Path, value: str) -> None:
    config = _config(tmp_path, 'experiment = "tiny_counter"\n')
    with pytest.raises(ConfigError, match="seed"):
        plan(config, [f"seed={value}"])


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://localhost:1",
                                     "inproc://x", "tls://host"])
def test_only_tls_schedulers_are_accepted(address: str) -> None:
    with pytest.raises(ValidationError, match="TLS"):
        ExecutorConfig(kind="dask", address=address)
    with pytest.raises(ConfigError, match="address"):
        executor_for([], kind="dask", address=address)


def test_compare_csv_neutralises_formulas(tmp_path: Path) -> None:
    from toolkit.lab.report.compare import _csv, compare_runs

    run = _tiny(tmp_path)
    summary = json.loads((run.run_dir / "summary.json").read_text())
    summary["blocked"] = {'=HYPERLINK("http://x","y")': 1.0, "+cmd": 2.0, "plain": 3.0}
    summary["unblocked"] = dict.fromkeys(summary["blocked"], 0.5)
    (run.run_dir / "summary.json").write_text(json.dumps(summary))
    text = _csv(compare_runs(tmp_path / "out"))
    cells = [cell for line in text.splitlines()[1:] for cell in line.split(",")]
    assert not any(cell.lstrip('"').startswith(("=", "+", "@")) for cell in cells)
    assert any("'=HYPERLINK" in cell for cell in cells)


def test_report_md_carries_no_html_from_results(tmp_path: Path) -> None:
    from toolkit.lab.report import write_report

    run = _tiny(tmp_path)
    summary = json.loads((run.run_dir / "summary.json").read_text())
    summary["blocked"] = {"<script>alert(1)</script>": 1.0}
    summary["unblocked"] = {"<script>alert(1)</script>": 2.0}
    (run.run_dir / "summary.json").write_text(json.dumps(summary))
    write_report(run.run_dir)
    for name in ("report.md", "report.html"):
        text = (run.run_dir / name).read_text()
        assert "<script>" not in text and "alert(1)" in text


def test_the_report_removes_no_file_it_did_not_write(tmp_path: Path) -> None:
    from toolkit.lab.report import write_report

    run = _tiny(tmp_path)
    figures = run.run_dir / "figures"
    figures.mkdir(exist_ok=True)
    mine = figures / "mine.png"
    mine.write_bytes(b"a user's own figure")
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"keep")
    (figures / "cache.json").write_text(json.dumps({"../outside": {"figures": []}}))
    write_report(run.run_dir)
    assert mine.read_bytes() == b"a user's own figure"
    assert outside.read_bytes() == b"keep"


# ----------------------------------------------------------------------------- Ctrl-C


@pytest.mark.slow
def test_ctrl_c_while_the_pool_starts_stops_the_command(tmp_path: Path) -> None:
    config = _config(tmp_path, 'experiment = "tiny_counter"\nseeds = [0, 1, 2, 3]\n'
                               f'output_dir = "{tmp_path / "out"}"\n[params]\nn_steps = 2\n'
                               'n_logged = 50\nsleep_s = 0.1\n')
    env = {**os.environ, "TOOLKIT_EXPERIMENTS_PATH": str(REPO / "tests/lab/runner/fixtures/"
                                                               "experiments")}
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.lab.cli.app", "run", str(config),
                             "--workers", "2", "--no-report", "--quiet"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # planning done: the pool's fork server and workers are starting
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    statuses = {RunResults(d).status for d in find_runs(tmp_path / "out")}
    assert not statuses & {"running"}
