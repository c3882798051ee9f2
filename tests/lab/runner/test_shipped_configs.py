"""Every config shipped in configs/ validates against its experiment's Params."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.lab.runner import load_config
from toolkit.lab.runner.tomlio import loads

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.toml"))


def test_configs_are_shipped():
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates(path: Path, monkeypatch: pytest.MonkeyPatch):
    # only the shipped experiments (the showcase selects every one that defines QUICK)
    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    # load_config validates every run (common keys and the experiment's Params) or raises
    runs = load_config(path, overrides=["device=cpu"])
    experiment = loads(path.read_text())["experiment"]
    assert runs
    assert all(run.device == "cpu" and run.experiment == experiment for run in runs)


def test_sweep_config_expands_grid_times_seeds():
    runs = load_config(CONFIGS[0].parent / "em_gmm_sweep.toml")
    assert len(runs) == 6
    points = sorted({run.sweep_point["params.inner_steps"] for run in runs})
    assert points == [1, 5, 20]


def test_the_showcase_runs_three_seeds_side_by_side(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    runs = load_config(CONFIGS[0].parent / "showcase.toml", overrides=["device=cpu"])
    assert [run.seed for run in runs] == [0, 1, 2]
    assert {run.executor.workers for run in runs} == {3}
