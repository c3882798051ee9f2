"""The experiment contract (issue 45): checked when a module is registered, with a message
naming the missing or wrong piece."""

from __future__ import annotations

import types

import pytest

from toolkit.lab import Experiment, ExperimentLoadError, ExperimentParams


class Params(ExperimentParams):
    n: int = 1


def _module(**hooks) -> types.ModuleType:
    module = types.ModuleType("probe_experiment")
    module.__file__ = __file__
    module.Params = Params
    module.run = lambda params, ctx: None
    for key, value in hooks.items():
        if value is None:
            delattr(module, key)
        else:
            setattr(module, key, value)
    return module


def test_a_module_that_keeps_to_the_contract_loads() -> None:
    exp = Experiment.from_module(_module(findings=lambda run: [], figures=lambda run: {},
                                         DTYPE="float64", QUICK={"n": 2}, BLOCKS=("a.b",)))
    assert exp.dtype == "float64" and exp.quick == {"n": 2} and exp.blocks == ("a.b",)


@pytest.mark.parametrize(("hooks", "message"), [
    ({"run": None}, r"it must define `run\(params, ctx\)`"),
    ({"run": lambda params: None}, r"`run` must accept 2 arguments \(`run\(params, ctx\)`\)"),
    ({"findings": "none"}, r"`findings` must be a function called as `findings\(run\)`, got str"),
    ({"figures": lambda: {}}, r"`figures` must accept 1 argument \(`figures\(run\)`\)"),
    ({"parts": lambda name: {}}, r"`parts` must accept 0 arguments \(`parts\(\)`\)"),
    ({"DTYPE": "float16"}, r"DTYPE must be one of 'float32', 'float64', got 'float16'"),
    ({"DESCRIPTION": 3}, r"DESCRIPTION must be a string, got int"),
    ({"BLOCKS": "a.b"}, r"BLOCKS must be a tuple of block names"),
    ({"Params": dict}, r"class Params\(ExperimentParams\)"),
    ({"QUICK": {"m": 1}}, r"QUICK is not valid for Params: m"),
])
def test_each_broken_hook_is_named(hooks, message) -> None:
    with pytest.raises(ExperimentLoadError, match=message):
        Experiment.from_module(_module(**hooks))
