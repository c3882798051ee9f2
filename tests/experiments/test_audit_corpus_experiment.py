"""The audit_corpus experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import itertools
import pathlib

import pytest
import stop_gradient_experiments.audit_corpus as audit_corpus
from stop_gradient_experiments.audit_corpus.cases import BUGS, LEGIT

from toolkit.lab import Finding, run_experiment
from toolkit.lab.plan.config import plan
from toolkit.lab.report import write_report
from toolkit.lens import GradientGraph

CONFIGS = pathlib.Path(__file__).parents[2] / "configs"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int):
    out = tmp_path_factory.mktemp("audit_corpus")
    return run_experiment("audit_corpus", {**audit_corpus.QUICK, "rounds": 2}, seed=seed,
                          device="cpu", disable_blocks=("corpus.*",), output_dir=out,
                          finish=write_report)


@pytest.mark.slow
def test_every_bug_caught_every_fix_clean(quick_run) -> None:
    s = quick_run.summary
    assert list(s["cases"]) == list(BUGS)
    for name, case in s["cases"].items():
        assert case["caught"] and case["fixed_clean"], (name, case["said"])
        assert not case["audit"]["ok"] and case["said"].startswith(case["category"])
    assert all(v["clean"] for v in s["legit"].values()) and list(s["legit"]) == list(LEGIT)
    assert s["cases"]["gan_fake"]["leak_grad_bytes"] > 0
    bptt = s["bptt"]
    assert bptt["buggy"]["second_backward_error"].startswith(
        "Trying to backward through the graph a second time")
    assert bptt["fixed"]["second_backward_error"] == ""
    nodes = bptt["buggy"]["graph_nodes"]
    assert all(b > a for a, b in itertools.pairwise(nodes))
    assert len(set(bptt["fixed"]["graph_nodes"])) == 1
    assert all(v["ok"] for v in s["blocked"].values())
    assert not any(v["ok"] for v in s["unblocked"].values())
    assert "block 'corpus.dqn.target' (disabled)" in s["unblocked"]["dqn_target"]["path"]
    assert quick_run.meta["blocks_seen"] == ["corpus.dqn.target", "corpus.bptt.state"]


@pytest.mark.slow
def test_costs_findings_and_figures(quick_run, check_figures) -> None:
    for name in BUGS:  # times are not asserted; bytes saved for backward are exact
        cost = quick_run.costs[name]
        assert cost["buggy_seconds"] > 0 and cost["rounds"] == 2
        assert cost["memory"]["buggy"]["saved_tensor_bytes"] > 0
    assert quick_run.costs["gan_fake"]["saved_bytes_ratio_buggy_over_fixed"] > 1
    found = audit_corpus.findings(quick_run)
    assert 3 <= len(found) <= 6 and all(isinstance(f, Finding) for f in found)
    assert [f.verdict for f in found[:4]] == [True] * 4
    (head,) = [f for f in found if f.headline is not None]  # exactly one
    assert (head.values["nodes_fixed"], head.values["nodes_buggy"]) == (
        quick_run.summary["bptt"]["fixed"]["graph_nodes"][-1],
        quick_run.summary["bptt"]["buggy"]["graph_nodes"][-1])
    assert found[-1].topic == "cost" and "The audit itself costs" in found[-1].text
    figures = audit_corpus.figures(quick_run)
    assert list(figures) == ["gan_leak", "audit_table"]
    check_figures("audit_corpus", figures)
    graph = GradientGraph.from_dict(quick_run.artifact("gan_graph"))
    leaked = {n["label"] for n in graph.nodes if n["kind"] == "leaf"
              and n["groups"] == ["leak: generator"]}
    assert leaked == {f"leak: generator.{i}.{k}" for i in (0, 2, 4)
                      for k in ("weight", "bias")}
    assert (quick_run.run_dir / "figures" / "gan_leak.png").exists()


def test_a_pattern_naming_one_block_flags_only_that_fix(tmp_path: pathlib.Path,
                                                        seed: int) -> None:
    run = run_experiment("audit_corpus", {"width": 4, "batch": 3, "rounds": 1, "windows": 2},
                         seed=seed, device="cpu", disable_blocks=("corpus.bptt.*",),
                         output_dir=tmp_path)
    assert run.summary["unblocked"]["dqn_target"]["ok"]  # its block stayed in place
    assert not run.summary["unblocked"]["bptt_carried"]["ok"]
    (named,) = [f for f in audit_corpus.findings(run) if "named block disabled" in f.text]
    assert named.verdict is True and "corpus.dqn.target in place" in named.text


def test_shipped_config_matches_the_params_defaults() -> None:
    (config,) = [spec.config for spec in plan(CONFIGS / "audit_corpus.toml")]
    assert config.experiment == "audit_corpus"
    assert config.disable_blocks == ("corpus.*",)
    assert config.params == audit_corpus.Params().model_dump()
