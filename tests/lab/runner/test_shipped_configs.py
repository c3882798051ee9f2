"""Every config shipped in configs/ validates against its experiment's Params."""

from __future__ import annotations

from pathlib import Path
from tomllib import loads

import pytest

from toolkit.lab.plan.config import Plan, plan

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.toml"))


def test_configs_are_shipped():
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates(path: Path, monkeypatch: pytest.MonkeyPatch):
    # only the shipped experiments (the showcase selects every one that defines QUICK)
    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    # plan validates every run (common keys and the experiment's Params) or raises
    specs = plan(path, overrides=["device=cpu"])
    experiment = loads(path.read_text())["experiment"]
    assert specs
    assert all(spec.config.device == "cpu" and spec.config.experiment == experiment
               and spec.experiment.name == experiment for spec in specs)


def test_sweep_config_expands_grid_times_seeds():
    path = CONFIGS[0].parent / "em_gmm_sweep.toml"
    specs = plan(path)
    assert len(specs) == len(Plan.read(path)) == 6
    points = sorted({spec.sweep_point["params.inner_steps"] for spec in specs})
    assert points == [1, 5, 20]


def test_the_showcase_runs_three_seeds_side_by_side(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH")
    read = Plan.read(CONFIGS[0].parent / "showcase.toml", overrides=["device=cpu"])
    assert [spec.seed for spec in read.specs()] == [0, 1, 2]
    assert read.executor.workers == 3
