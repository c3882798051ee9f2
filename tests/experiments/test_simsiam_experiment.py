"""The simsiam experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import math

import pytest
import stop_gradient_experiments.simsiam as simsiam_experiment

from toolkit.lab import Finding, RunResults, run_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int) -> RunResults:
    params = {**simsiam_experiment.QUICK, "epochs": 25, "hidden": 64, "dim": 32}
    return run_experiment("simsiam", params, seed=seed, device="cpu",
                          disable_blocks=["simsiam.*"],
                          output_dir=tmp_path_factory.mktemp("simsiam"))


def test_required_summary_keys(quick_run: RunResults) -> None:
    s = quick_run.summary
    for variant in ("blocked", "unblocked"):
        assert 0 <= s[variant]["output_std_sqrt_d"] <= math.sqrt(s["dim"])
        assert 0 <= s[variant]["knn_accuracy"] <= 1
    assert s["pixels"]["knn_accuracy"] > 0.95  # 5-NN on the digits' pixels
    assert quick_run.meta["blocks_seen"] == ["simsiam.target"]


def test_the_output_collapses_only_without_the_block(quick_run: RunResults) -> None:
    s = quick_run.summary
    assert s["blocked"]["output_std_sqrt_d"] >= 0.5
    assert s["unblocked"]["output_std_sqrt_d"] < 0.5 * s["blocked"]["output_std_sqrt_d"]
    assert s["unblocked"]["final_loss"] < s["blocked"]["final_loss"]  # the trivial minimum
    assert s["blocked"]["knn_accuracy"] >= 0.8


def test_findings_and_figures(quick_run: RunResults, check_figures) -> None:
    items = simsiam_experiment.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert items[0].verdict is True  # the loss goes to −1 without the block
    assert items[2].verdict is True  # k-NN with the block
    figures = simsiam_experiment.figures(quick_run)
    assert list(figures) == ["collapse", "knn"]
    assert all(caption.endswith(".") for _, caption in figures.values())
    check_figures("simsiam", figures)
