"""The dice experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import pytest
import stop_gradient_experiments.dice as dice_experiment
from matplotlib.figure import Figure

from toolkit.lab import Finding, RunResults, run_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int) -> RunResults:
    return run_experiment("dice", dice_experiment.QUICK, seed=seed, device="cpu", dtype="float64",
                          disable_blocks=["dice.*"], output_dir=tmp_path_factory.mktemp("dice"))


def test_required_summary_keys_and_their_expected_values(quick_run: RunResults) -> None:
    s = quick_run.summary
    assert s["dice"]["grad_rel_err"] <= 1e-8 and s["dice"]["hessian_rel_err"] <= 1e-8
    assert s["surrogate"]["hessian_rel_err"] >= 0.1
    assert s["surrogate"]["grad_rel_err"] <= 1e-8
    assert s["unblocked"]["grad_norm"] == 0 and s["unblocked"]["hessian_norm"] == 0
    assert s["unblocked"]["grad_rel_err"] == 1.0  # ‖0 − g‖ / ‖g‖
    assert quick_run.meta["blocks_seen"] == ["dice.magic_box"]


def test_monte_carlo_errors_fall_like_one_over_sqrt_n(quick_run: RunResults) -> None:
    mc = quick_run.summary["monte_carlo"]
    assert mc["n_samples"] == dice_experiment.QUICK["sample_sizes"]
    assert -0.7 <= mc["slope"]["grad"] <= -0.3 and -0.7 <= mc["slope"]["hessian"] <= -0.3
    assert min(mc["surrogate"]["hessian_rel_err"]) >= 0.1
    steps, values = quick_run.metric("blocked/monte_carlo/grad_rel_err")
    assert list(steps) == mc["n_samples"] and list(values) == mc["blocked"]["grad_rel_err"]


def test_findings_and_figures(quick_run: RunResults, check_figures) -> None:
    items = dice_experiment.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert [f.verdict for f in items if f.verdict is not None] == [True] * 4
    assert items[-1].verdict is None and "ms" in items[-1].sentence
    assert items[-1].label == "measured" and items[-1].timing is not None
    figs = dice_experiment.figures(quick_run)
    assert list(figs) == ["monte_carlo_error"] and isinstance(figs["monte_carlo_error"][0], Figure)
    # the caption says what the root mean square is over
    assert f"over {dice_experiment.QUICK['repeats']} independent estimates" in \
        figs["monte_carlo_error"][1]
    check_figures("dice", figs)
