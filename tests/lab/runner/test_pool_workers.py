"""A local pool's workers are forked from a fork server that imported the runs' experiments
once (``set_forkserver_preload``), yet each pool's workers start with the environment, import
path and working directory of the process that made that pool, as spawned workers would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.lab.execute.local import _preload, run_all
from toolkit.lab.plan.config import Plan, plan
from toolkit.lab.results.schema import ExecutorConfig

FIXTURES = Path(__file__).parent / "fixtures"
SHOWCASE = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"


def test_the_fork_server_preloads_the_runner_and_every_part(tmp_path: Path) -> None:
    runs = plan(SHOWCASE, ['params.experiments=["tiny_counter", "td_learning"]'],
                output_dir=tmp_path)
    modules = _preload(runs)
    # the module that blocks the fork server's signals for its workers first, then the runner
    assert modules[:2] == ["toolkit.lab.execute.fork_server", "toolkit.lab.execute.local"]
    # a composite's parts are preloaded by module name; a loose file (tiny_counter) has none
    assert "stop_gradient_experiments.td_learning" in modules
    assert not any("tiny_counter" in m for m in modules)


@pytest.mark.slow
def test_each_pool_takes_the_setting_of_its_maker(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = plan(FIXTURES / "tiny.toml", [], seeds=[0, 1], output_dir=tmp_path / "first")
    outcomes, status = run_all(first, executor=ExecutorConfig(workers=2), quiet=True)
    assert status == 0, [o.error for o in outcomes]  # the fork server runs from here on
    # then the experiments move, the working directory changes and a relative output folder
    # is given: the next pool's workers must see all three
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "tiny_counter.py").write_text(
        (FIXTURES / "experiments" / "tiny_counter.py").read_text())
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(moved))
    monkeypatch.setenv("TOOLKIT_TEST_MARK", "seen")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    second = plan(FIXTURES / "tiny.toml", [], seeds=[0, 1], output_dir="relative")
    outcomes, status = run_all(second, executor=ExecutorConfig(workers=2), quiet=True,
                               finish=_note_setting)
    assert status == 0, [o.error for o in outcomes]
    for outcome in outcomes:
        assert outcome.run_dir.resolve().is_relative_to(work / "relative")
        mark, experiments, cwd = (outcome.run_dir / "setting.txt").read_text().split("\n")
        assert (mark, experiments, cwd) == ("seen", str(moved), str(work))


def _note_setting(run_dir: Path, experiment: object) -> None:
    """A ``finish`` that writes what the worker's environment and directory were."""
    Path(run_dir, "setting.txt").write_text("\n".join([
        os.environ.get("TOOLKIT_TEST_MARK", ""), os.environ.get("TOOLKIT_EXPERIMENTS_PATH", ""),
        os.getcwd()]))


def test_runs_are_counted_as_planned_without_the_experiment(tmp_path: Path) -> None:
    overrides = ["sweep.params.n_steps=[1, 2]", "seeds=[0, 1, 2]"]
    read = Plan.read(FIXTURES / "tiny.toml", overrides)
    assert read.experiment is None  # counted before the experiment is loaded
    assert len(read) == len(plan(FIXTURES / "tiny.toml", overrides, output_dir=tmp_path)) == 6
    assert read.executor == ExecutorConfig()
    assert len(Plan.read(FIXTURES / "tiny.toml", overrides, seeds=[4])) == 2


_MAKER = """
import concurrent.futures as cf, multiprocessing, os, sys
from toolkit.lab.execute.local import _worker_init

def pid(_):
    return os.getpid()

if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    pool = cf.ProcessPoolExecutor(2, mp_context=ctx, initializer=_worker_init,
                                  initargs=(dict(os.environ), list(sys.path), os.getcwd()))
    with open(sys.argv[1], "w") as fh:
        fh.write(" ".join(map(str, set(pool.map(pid, range(8))))))
    os._exit(0)  # ends as a Ctrl-C in submit can: no shutdown, no sentinel on the task queue
"""


@pytest.mark.slow
def test_a_pool_worker_ends_with_the_process_that_made_the_pool(tmp_path: Path) -> None:
    # a worker waits on its task queue, whose writing end every worker holds too: without its
    # maker it would wait forever (and hold the command's output open)
    script = tmp_path / "maker.py"
    script.write_text(_MAKER)
    pids_file = tmp_path / "pids"
    subprocess.run([sys.executable, str(script), str(pids_file)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=300, check=True)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert pids
    deadline = time.monotonic() + 30
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if _alive(p)]
    assert not alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie is gone, waiting to be reaped
    return not (stat.is_file() and stat.read_text().split(") ")[-1].startswith("Z"))
