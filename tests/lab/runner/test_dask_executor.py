"""Runs on a Dask cluster: same bytes as the local executor, failures, retries, interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO

from toolkit._utils.formatting import fmt
from toolkit.lab import RunResults
from toolkit.lab.cli import main
from toolkit.lab.execute.local import run_all
from toolkit.lab.plan.config import Plan, plan
from toolkit.lab.results.schema import ExecutorConfig

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """Two worker processes of one thread each, behind mutual TLS with certificates of their
    own; a task is sent to a worker with a free thread only and given up at its second
    worker death, as in the cluster the executor starts. Yields ``(address, tls)``: ``tls`` the
    :class:`ExecutorConfig` keys of this client's certificate files."""
    import dask
    from distributed.security import Security

    security = Security.temporary()
    folder = tmp_path_factory.mktemp("certs")
    tls = {}
    for key, pem in (("tls_ca_file", security.tls_ca_file),
                     ("tls_cert", security.tls_client_cert),
                     ("tls_key", security.tls_client_key)):
        tls[key] = str(folder / f"{key}.pem")
        Path(tls[key]).write_text(pem)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.scheduler.worker-saturation": 1.0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", protocol="tls://",
                                           security=security, dashboard_address="127.0.0.1:0",
                                           silence_logs=50)
    assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
    yield cluster.scheduler_address, tls
    cluster.close()


def _dask(cluster) -> ExecutorConfig:
    address, tls = cluster
    return ExecutorConfig(kind="dask", address=address, **tls)


def _sweep_config(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text('experiment = "tiny_counter"\nseeds = [0, 1]\ndevice = "cpu"\n'
                    'dtype = "float64"\ndisable_blocks = ["tiny.*"]\n'
                    '[params]\nn_steps = 5\n[sweep]\n"params.lr" = [0.1, 0.2]\n')
    return path


def _summaries(root: Path) -> dict[tuple[int, float], bytes]:
    out = {}
    for run_dir in (root / "tiny_counter").iterdir():
        run = RunResults(run_dir)
        out[(run.config["seed"], run.params["lr"])] = (run_dir / "summary.json").read_bytes()
    return out


def test_sweep_matches_the_local_executor_byte_for_byte(cluster, tmp_path: Path) -> None:
    path = _sweep_config(tmp_path)
    local = plan(path, output_dir=tmp_path / "local")
    remote = plan(path, output_dir=tmp_path / "dask")
    _, status_local = run_all(local, executor=ExecutorConfig(kind="local", workers=1))
    outcomes, status = run_all(remote, executor=_dask(cluster))
    assert status == status_local == 0 and len(outcomes) == 4
    assert all(o.status == "complete" for o in outcomes)
    a, b = _summaries(tmp_path / "local"), _summaries(tmp_path / "dask")
    assert len(a) == 4 and a == b
    workers = set()
    for run_dir in (tmp_path / "dask" / "tiny_counter").iterdir():
        meta = RunResults(run_dir).meta
        assert meta["executor"]["kind"] == "dask" and meta["run_id"] == run_dir.name
        workers.add(meta["executor"]["worker"])
        # the config records the folder the run belongs to, not the worker's scratch folder
        assert RunResults(run_dir).config["output_dir"] == str(tmp_path / "dask")
        assert {"config.toml", "metrics.jsonl", "costs.json", "artifacts"} <= {
            p.name for p in run_dir.iterdir()}
    assert all(w.startswith("tls://") for w in workers)
    assert not [p for p in (tmp_path / "dask" / "tiny_counter").iterdir()
                if p.name.startswith(".")]  # no staging folder left behind


def test_failing_run_is_reported_and_the_others_complete(cluster, tmp_path: Path) -> None:
    path = _sweep_config(tmp_path)
    configs = plan(path, ["params.fail_at=0"], output_dir=tmp_path / "r")[:1]
    configs += plan(path, output_dir=tmp_path / "r")[:1]
    outcomes, status = run_all(configs, executor=_dask(cluster))
    assert status == 1
    by_status = {o.status: o for o in outcomes}
    assert set(by_status) == {"failed", "complete"}
    assert "failing at step 0 as asked" in by_status["failed"].error
    assert RunResults(by_status["failed"].run_dir).status == "failed"


def test_a_dead_worker_is_retried_once_then_the_run_fails(cluster, tmp_path: Path) -> None:
    config = tmp_path / "dies.toml"
    config.write_text(f'experiment = "dies_once"\nseed = 0\n'
                      f'[params]\nmarker = {json.dumps(str(tmp_path / "m1"))}\n')
    spec = _dask(cluster)
    configs = plan(config, output_dir=tmp_path / "r")
    (outcome,), status = run_all(configs, executor=spec)
    assert status == 0 and outcome.status == "complete"  # died once, then ran
    assert RunResults(outcome.run_dir).summary["blocked"]["attempts"] == 2
    configs = plan(config, ["params.always=true",
                            f"params.marker={json.dumps(str(tmp_path / 'm2'))}"],
                   output_dir=tmp_path / "r2")
    (outcome,), status = run_all(configs, executor=spec)
    assert status == 1 and outcome.status == "failed"
    meta = RunResults(outcome.run_dir).meta
    assert meta["status"] == "failed" and "KilledWorker" in meta["error"]


def test_resume_skips_complete_runs(cluster, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep_config(tmp_path)
    address, tls = cluster
    args = ["run", str(path), "--out", str(tmp_path / "r"), "--executor", "dask", "--address",
            address, "--tls-ca-file", tls["tls_ca_file"], "--tls-cert", tls["tls_cert"],
            "--tls-key", tls["tls_key"], "--no-report", "--quiet"]
    assert main(args) == 0
    assert main([*args, "--resume"]) == 0
    assert "nothing to do: every run is complete" in capsys.readouterr().out


def test_missing_extra_is_a_one_line_input_error(tmp_path: Path, monkeypatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    path = _sweep_config(tmp_path)
    assert main(["run", str(path), "--executor", "dask", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install -e ".[distributed]"' in err[0]
    assert not (tmp_path / "r").exists()


def test_address_needs_the_dask_executor(tmp_path: Path, capsys) -> None:
    path = _sweep_config(tmp_path)
    assert main(["run", str(path), "--address", "tls://127.0.0.1:1"]) == 2
    assert "--address: is only used by the dask executor" in capsys.readouterr().err


def test_executor_table_in_the_config(tmp_path: Path) -> None:
    path = _sweep_config(tmp_path)
    path.write_text(path.read_text() + '[executor]\nkind = "dask"\nworkers = 2\n')
    read = Plan.read(path)
    assert read.executor == ExecutorConfig(kind="dask", workers=2)
    # where a run ran is not part of its config
    assert all("executor" not in spec.config.model_dump() for spec in read.specs())


def test_ctrl_c_cancels_and_marks_started_runs_interrupted(tmp_path: Path) -> None:
    started = tmp_path / "started"
    out = tmp_path / "results"
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(FIXTURES / "experiments"),
               PYTHONPATH=str(REPO))
    # a session of its own: the signal goes to the whole process group, as Ctrl-C in a terminal
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "run", str(FIXTURES / "tiny.toml"), "--out", str(out),
         "--seeds", "0,1,2,3,4,5", "--executor", "dask", "--workers", "2", "--no-report",
         "--set", "params.n_logged=100000", "--set", "params.sleep_s=0.01",
         "--set", f"params.started_file={json.dumps(str(started))}"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    runs = [RunResults(d) for d in (out / "tiny_counter").iterdir()]
    statuses = [r.status for r in runs]
    assert "interrupted" in statuses and "running" not in statuses
    assert len(statuses) <= 2  # the runs that had not started were cancelled, not written
    # what the workers had logged came back (the run that wrote `started` had logged a step;
    # another may have started and logged none yet), and the message says which
    logged = sum(len(r.metrics) >= 1 for r in runs if r.status == "interrupted")
    assert logged >= 1
    text = " ".join(err[err.index("toolkit: interrupted"):].split())  # the summary unwrapped
    for run in runs:  # each with how long it ran and what it kept, as its meta.json says
        kept = "nothing logged" if run.last_step is None else \
            f"kept steps up to {run.last_step}"
        assert f"interrupted {run.run_dir} ({fmt(run.meta['duration_s'], 's')}; {kept})" \
            in text
    left = 6 - len(statuses)
    assert f"not started {left} run{'s' * (left != 1)}" in text
    assert text.endswith(" --resume")


def _folders(root: Path) -> dict[tuple[int, str], list[RunResults]]:
    """The run folders below ``root`` by (seed, marker param)."""
    found: dict[tuple[int, str], list[RunResults]] = {}
    for meta in sorted(root.glob("*/meta.json")):
        run = RunResults(meta.parent)
        found.setdefault((run.meta["seed"], run.params["marker"]), []).append(run)
    return found


def test_killed_workers_leave_one_folder_per_run_none_running(cluster,
                                                              tmp_path: Path) -> None:
    """Issue 73: worker processes die under a sweep (os._exit, as after an OOM kill). Every
    planned run leaves exactly one folder and none says running or is abandoned once the
    sweep has ended: a run retried after a death completes in one folder that names the
    worker it died on, and a run given up after its second death is failed, naming both."""
    config = tmp_path / "dies.toml"
    markers = [str(tmp_path / f"m{i}") for i in range(2)]
    config.write_text(f'experiment = "dies_once"\nseeds = [0, 1]\n'
                      f'[sweep]\n"params.marker" = {json.dumps(markers)}\n')
    once = plan(config, output_dir=tmp_path / "once")  # 4 runs, 2 to 4 deaths
    always = plan(config, ["params.always=true", "seeds=[0]",  # 1 run, 2 deaths
                           f"sweep={{\"params.marker\" = [{json.dumps(markers[0])}]}}"],
                  output_dir=tmp_path / "always")
    outcomes, status = run_all([*once, *always], executor=_dask(cluster))
    assert status == 1 and len(outcomes) == 5
    for root, ended, keys in (
            (tmp_path / "once" / "dies_once", "complete",
             [(s, m) for s in (0, 1) for m in sorted(markers)]),
            (tmp_path / "always" / "dies_once", "failed", [(0, markers[0])])):
        folders = _folders(root)
        assert sorted(folders) == keys, folders
        for runs in folders.values():
            assert [run.status for run in runs] == [ended], [r.run_dir for r in runs]
            executor = runs[0].meta["executor"]
            if ended == "failed":  # died on two workers: both named
                error = runs[0].meta["error"]
                assert "KilledWorker" in error
                assert error.count("tls://127.0.0.1:") >= 2, error
            elif executor.get("died_on"):  # the attempt that died is named, then removed
                assert all(w.startswith("tls://127.0.0.1:") for w in executor["died_on"])
    # each marker's first run died at least once before a retry completed it
    assert sum(bool(runs[0].meta["executor"].get("died_on"))
               for runs in _folders(tmp_path / "once" / "dies_once").values()) >= 2
    assert {o.status for o in outcomes} == {"complete", "failed"}
    assert all(o.run_dir.parent.name == "dies_once" for o in outcomes)


def test_workers_that_die_on_restart_keep_their_nannies(tmp_path: Path) -> None:
    """A run that kills every worker it reaches can kill a worker its nanny has just restarted.
    distributed's LocalCluster closes a nanny for good when no worker of its name is back
    ``distributed.deploy.lost-worker-timeout`` after a death (15 s; 0 s here, so that the race
    is lost every time): with both nannies closed the other runs would wait for ever. The
    executor's own cluster keeps its nannies, which restart their workers, until the runs end."""
    import dask

    config = tmp_path / "dies.toml"
    config.write_text('experiment = "dies_once"\nseeds = [0, 1]\n'
                      f'[params]\nmarker = {json.dumps(str(tmp_path / "m"))}\n')
    specs = plan(config, output_dir=tmp_path / "r")
    specs += plan(config, ["params.always=true", "seeds=[0]"], output_dir=tmp_path / "a")
    box: dict = {}
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "0s"}):
        sweep = threading.Thread(target=lambda: box.update(result=run_all(
            specs, executor=ExecutorConfig(kind="dask", workers=2))), daemon=True)
        sweep.start()
        sweep.join(120)
    assert not sweep.is_alive(), "the sweep stalled: its cluster closed the nannies"
    outcomes, status = box["result"]
    assert status == 1 and sorted(o.status for o in outcomes) == ["complete", "complete",
                                                                  "failed"]
