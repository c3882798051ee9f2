"""The metrics glossary cannot drift (issue 44): every metric key a quick run of an experiment
logs is described by exactly one of its ``METRICS`` declarations, and every declaration
describes some logged key."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolkit.lab import Experiment, ExperimentLoadError, ExperimentParams, run_experiment
from toolkit.lab.results.schema import MetricDoc, metric_doc_for

ROOT = Path(__file__).resolve().parents[2]
#: every built-in experiment but the showcase, which composes them (its keys are theirs)
EXPERIMENTS = sorted(p.parent.name for p in (ROOT / "experiments").glob("*/metrics.py"))


def test_every_experiment_but_the_showcase_declares_its_metrics() -> None:
    folders = {p.parent.name for p in (ROOT / "experiments").glob("*/__init__.py")}
    assert set(EXPERIMENTS) == folders - {"showcase"}


def _logged_keys(run_dir: Path) -> set[str]:
    keys: set[str] = set()
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        keys |= set(json.loads(line)) - {"step"}
    return keys


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_declarations_and_logged_keys_match(name: str, tmp_path: Path) -> None:
    module = importlib.import_module(f"stop_gradient_experiments.{name}")
    docs = module.METRICS
    run = run_experiment(name, module.QUICK, seed=0, device="cpu",
                         dtype=getattr(module, "DTYPE", "float32"), output_dir=tmp_path)
    keys = _logged_keys(run.run_dir)
    undeclared = sorted(k for k in keys if metric_doc_for(k, docs) is None)
    assert not undeclared, f"{name}: add a MetricDoc to experiments/{name}/metrics.py for {undeclared}"
    ambiguous = sorted(k for k in keys if sum(d.matches(k) for d in docs) > 1)
    assert not ambiguous, f"{name}: more than one declaration matches {ambiguous}"
    unused = [d.key for d in docs if not any(d.matches(k) for k in keys)]
    assert not unused, f"{name}: no logged key matches the declarations {unused}"


def test_a_pattern_matches_whole_keys_of_its_variants_and_choices() -> None:
    doc = MetricDoc(key="{variant}/grad_{kind:random|tied}/{dtype}_err", meaning="m")
    assert doc.matches("blocked/grad_tied/float16_err")
    assert doc.matches("unblocked/grad_random/bfloat16_err")
    assert not doc.matches("torch/grad_tied/float16_err")       # not a variant
    assert not doc.matches("blocked/grad_other/float16_err")    # not a listed choice
    assert not doc.matches("blocked/grad_tied/a/b_err")         # {dtype} spans one part only
    assert not doc.matches("blocked/grad_tied/float16_err/x")   # the whole key
    assert MetricDoc(key="sklearn/train/loglik", meaning="m").matches("sklearn/train/loglik")


@pytest.mark.parametrize(("fields", "message"), [
    ({"key": "loss", "meaning": "m"}, r"key\n  String should match pattern .* input_value='loss'"),
    ({"key": "a//b", "meaning": "m"}, r"key\n  String should match pattern .* input_value='a//b'"),
    ({"key": "{variant/a", "meaning": "m"},
     r"key\n  String should match pattern .* input_value='\{variant/a'"),
    ({"key": "a/b", "meaning": ""}, r"meaning"),
    ({"key": "a/b", "meaning": "m", "units": "s"}, r"units"),
])
def test_a_bad_declaration_is_one_validation_error_naming_the_field(fields, message) -> None:
    with pytest.raises(ValidationError, match=message):
        MetricDoc(**fields)


class _Params(ExperimentParams):
    n: int = 1


def _module(metrics) -> types.ModuleType:
    module = types.ModuleType("probe_metrics_experiment")
    module.__file__ = __file__
    module.Params = _Params
    module.run = lambda params, ctx: None
    module.METRICS = metrics
    return module


def test_the_contract_checks_the_metrics_hook() -> None:
    doc = MetricDoc(key="{variant}/train/loss", meaning="training loss", unit="nats")
    assert Experiment.from_module(_module((doc,))).module.METRICS == (doc,)
    with pytest.raises(ExperimentLoadError, match=r"METRICS must be a tuple of .*MetricDoc"):
        Experiment.from_module(_module({"blocked/train/loss": "training loss"}))
    with pytest.raises(ExperimentLoadError, match=r"declares \{variant\}/train/loss more than once"):
        Experiment.from_module(_module((doc, doc)))


def test_the_glossary_page_renders_every_declaration() -> None:
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_metrics",
                                                  ROOT / "docs" / "_hooks" / "metrics.py")
    hook = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = hook
    spec.loader.exec_module(hook)
    page = hook.glossary_page(hook.declarations())
    for name in EXPERIMENTS:
        module = importlib.import_module(f"stop_gradient_experiments.{name}")
        assert f"{{ #{name} }}" in page
        for doc in module.METRICS:
            assert hook.code(doc.key) in page
