"""A local pool's workers are forked from a fork server that imported the runs' experiments
once, yet each pool's workers start with the environment, import path and working directory of
the process that made that pool, as spawned workers would."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from toolkit.lab.runner import plan
from toolkit.lab.runner.config import ExecutorSpec
from toolkit.lab.runner.sweep import pool_context, preload_modules, run_configs

FIXTURES = Path(__file__).parent / "fixtures"
SHOWCASE = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"


def test_the_fork_server_preloads_the_runner_and_every_part(tmp_path: Path) -> None:
    runs = plan(SHOWCASE, ['params.experiments=["tiny_counter", "td_learning"]'],
                output_dir=tmp_path)
    modules = preload_modules(runs)
    assert modules[0] == "toolkit.lab.runner.sweep"
    # a composite's parts are preloaded by module name; a loose file (tiny_counter) has none
    assert "stop_gradient_experiments.td_learning" in modules
    assert not any("tiny_counter" in m for m in modules)
    if "forkserver" in multiprocessing.get_all_start_methods():
        assert pool_context(runs).get_start_method() == "forkserver"


def test_each_pool_takes_the_setting_of_its_maker(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = plan(FIXTURES / "tiny.toml", [], seeds=[0, 1], output_dir=tmp_path / "first")
    outcomes, status = run_configs(first, executor=ExecutorSpec(workers=2), quiet=True)
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
    outcomes, status = run_configs(second, executor=ExecutorSpec(workers=2), quiet=True,
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
