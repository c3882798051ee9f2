"""The simsiam experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import math

import pytest
import stop_gradient_experiments.simsiam as simsiam_experiment

from toolkit.lab import Finding, RunResults, run_experiment

# Small networks, 30 epochs of 10 updates at the default lr 0.4: lr × steps = 120, inside the
# range the collapse predictions cover (at least MIN_TRAVEL = 100)
TINY = {"epochs": 30, "hidden": 64, "dim": 32}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int) -> RunResults:
    params = {**simsiam_experiment.QUICK, **TINY}
    return run_experiment("simsiam", params, seed=seed, device="cpu",
                          disable_blocks=["simsiam.*"],
                          output_dir=tmp_path_factory.mktemp("simsiam"))


def test_required_summary_keys(quick_run: RunResults) -> None:
    s = quick_run.summary
    for variant in ("blocked", "unblocked"):
        assert 0 <= s[variant]["output_std_sqrt_d"] <= math.sqrt(s["dim"])
        assert 0 <= s[variant]["knn_accuracy"] <= 1
    assert s["pixels"]["knn_accuracy"] > 0.95  # 5-NN on the digits' pixels
    assert s["sgd_steps"] == 30 * (1347 // 128)  # 1347 training digits, short batch dropped
    assert quick_run.meta["blocks_seen"] == ["simsiam.target"]


def test_the_output_collapses_only_without_the_block(quick_run: RunResults) -> None:
    # Chen & He, Figure 2, read as the findings read it: std·√d ≤ 0.1 without the block and
    # ≥ 0.5 with it. At these sizes over seeds 0-9: at most 0.023 without, at least 0.977 with
    s = quick_run.summary
    assert s["unblocked"]["output_std_sqrt_d"] <= simsiam_experiment.COLLAPSED
    assert s["blocked"]["output_std_sqrt_d"] >= simsiam_experiment.SPREAD
    assert s["unblocked"]["final_loss"] <= -0.95 < s["blocked"]["final_loss"]
    assert s["blocked"]["knn_accuracy"] >= 0.5  # far above chance (0.1); 0.78 to 0.85 over seeds 0-9


def test_findings_headline_and_figures(quick_run: RunResults, check_figures) -> None:
    items = simsiam_experiment.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert not any(f.outside for f in items)  # lr × steps = 120: inside the covered range
    assert items[0].verdict is True  # the loss goes to −1 without the block
    assert items[1].verdict is True  # and the output collapses
    assert items[3].verdict is None and not items[3].predicts  # k-NN unblocked: measured
    headlines = [f for f in items if f.headline is not None]
    assert headlines == [items[1]]  # exactly one: the collapse
    line = items[1].headline
    assert (line.blocked, line.unblocked) == ("b_std", "u_std")
    assert line.thresholds == (simsiam_experiment.COLLAPSED, simsiam_experiment.SPREAD)
    assert items[1].values["u_std"] == quick_run.summary["unblocked"]["output_std_sqrt_d"]
    figures = simsiam_experiment.figures(quick_run)
    assert list(figures) == ["collapse", "knn"]
    assert all(caption.endswith(".") for _, caption in figures.values())
    u_std = quick_run.summary["unblocked"]["output_std_sqrt_d"]
    caption = figures["collapse"][1]
    assert simsiam_experiment.fmt(u_std) in caption and "under the collapse line" in caption
    check_figures("simsiam", figures)


def test_too_little_training_leaves_the_collapse_measured(tmp_path, seed: int) -> None:
    # 2 epochs of 10 updates at lr 0.4: lr × steps = 8, far below MIN_TRAVEL; the loss,
    # collapse and blocked k-NN findings become measurements that say why
    run = run_experiment("simsiam", {"epochs": 2, "hidden": 16, "dim": 8, "pred_hidden": 4},
                         seed=seed, device="cpu", disable_blocks=["simsiam.*"],
                         output_dir=tmp_path)
    items = simsiam_experiment.findings(run)
    for f in items[:3]:
        assert f.verdict is None and not f.predicts
        assert "lr × SGD steps is 8," in f.outside
        assert f.sentence.endswith(f"Measured only: {f.outside}")
    assert items[1].headline is not None  # still the headline, drawn as a measurement
    assert not any(f.predicts for f in items)  # nothing left to judge at this length
    below = run.summary["unblocked"]["output_std_sqrt_d"] <= simsiam_experiment.COLLAPSED
    caption = simsiam_experiment.figures(run)["collapse"][1]  # the words follow the numbers
    assert ("not everywhere under the collapse line" in caption) == (not below)


def test_the_covered_range_is_lr_times_steps() -> None:
    class Run:  # the two numbers too_short reads
        def __init__(self, lr: float, steps: int) -> None:
            self.params, self.summary = {"lr": lr}, {"sgd_steps": steps}

    assert simsiam_experiment.too_short(Run(0.4, 400)) == ""  # QUICK
    assert simsiam_experiment.too_short(Run(0.4, 250)) == ""  # exactly MIN_TRAVEL
    assert "lr × SGD steps is 40," in simsiam_experiment.too_short(Run(0.1, 400))
    assert simsiam_experiment.too_short(Run(0.4, 249)) != ""
