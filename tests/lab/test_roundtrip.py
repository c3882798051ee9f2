"""What a run writes is what it is: every experiment's params survive config.toml (defaults,
``None``, nested), and every shipped config, run once (its experiment replaced by one that
computes nothing), is recognised by ``--resume``."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.lab import load_all
from toolkit.lab.execute.local import run_all
from toolkit.lab.execute.resume import plan_resume
from toolkit.lab.plan.config import Plan
from toolkit.lab.results.schema import RunConfig, _without_none

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = load_all()[0]


def _may_be_none(annotation: object) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        and type(None) in typing.get_args(annotation)


@st.composite
def params_of(draw: st.DrawFn) -> tuple[str, object]:
    """An experiment and a valid ``Params``: each field its default, its QUICK value, or
    ``None`` where it may be ``None``."""
    name = draw(st.sampled_from(sorted(EXPERIMENTS)))
    experiment = EXPERIMENTS[name]
    quick = experiment.quick or {}
    values = {}
    for field, info in experiment.Params.model_fields.items():
        choices = ["default"] + ["quick"] * (field in quick) + ["none"] * _may_be_none(
            info.annotation)
        choice = draw(st.sampled_from(choices))
        if choice == "quick":
            values[field] = quick[field]
        elif choice == "none":
            values[field] = None
    return name, experiment.Params.model_validate(values)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params_of())
def test_every_experiments_params_survive_config_toml(case: tuple[str, object]) -> None:
    name, params = case
    config = RunConfig(experiment=name, params=params.model_dump(mode="json"), seed=3)
    read = RunConfig.from_toml(config.to_toml())
    assert read.identity() == config.identity()
    again = EXPERIMENTS[name].Params.model_validate(read.params)
    assert _without_none(again.model_dump(mode="json")) == \
        _without_none(params.model_dump(mode="json"))


def _small(path: Path) -> dict[str, object]:
    """The experiment's QUICK params (for the showcase: one experiment)."""
    plan = Plan.read(path)
    if plan.file.experiment == "showcase":
        return {"experiments": ["td_learning"]}
    return dict(EXPERIMENTS[plan.file.experiment].quick or {})


def _record_only(params: object, ctx: object) -> None:
    """A run that computes nothing: what --resume recognises is the config a run writes, not
    what the experiment computed."""
    ctx.summary(recorded=True)  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_config_run_leaves_nothing_to_resume(path: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    read = Plan.read(path, params=_small(path), seeds=[0], output_dir=tmp_path)
    specs = read.specs()[:1]
    module = specs[0].experiment.module
    monkeypatch.setattr(module, "run", _record_only)
    monkeypatch.setattr(module, "findings", lambda run: [], raising=False)
    outcomes, status = run_all(specs, quiet=True)
    assert status == 0, [o.error for o in outcomes]
    again = plan_resume(Plan.read(path, params=_small(path), seeds=[0],
                                  output_dir=tmp_path).specs()[:1])
    assert again.todo == [] and again.running == [] and len(again.done) == len(specs)
