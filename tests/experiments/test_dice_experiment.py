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


def _tiny(tmp_path, seed: int, dtype: str, **params) -> RunResults:
    params = {"sample_sizes": [10, 100, 1000], "repeats": 4, "timing_repeat": 1, **params}
    return run_experiment("dice", params, seed=seed, device="cpu", dtype=dtype,
                          disable_blocks=["dice.*"], output_dir=tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inside_their_range_the_predictions_are_made_with_the_runs_tolerances(
        tmp_path, seed: int, dtype: str) -> None:
    """float32 reads "to rounding" as a thousand of its own units (1e-8 was float64's), and
    the slope within four standard errors of its fit: every prediction is made."""
    found = dice_experiment.findings(_tiny(tmp_path, seed, dtype))
    assert all(f.predicts and not f.outside for f in found[:4])
    assert found[0].holds and found[1].holds and found[3].holds  # exact up to rounding
    assert dtype in found[0].sentence


def test_outside_their_range_the_predictions_are_measurements_that_say_why(
        tmp_path, seed: int) -> None:
    few = dice_experiment.findings(_tiny(tmp_path, seed, "float64", sample_sizes=[10, 100],
                                         repeats=2))
    assert few[2].label == "measured" and "needs 4 or more; this run has 2" in few[2].sentence
    one = dice_experiment.findings(_tiny(tmp_path, seed, "float64", sample_sizes=[100]))
    assert one[2].label == "measured" and "two sample sizes or more" in one[2].sentence
    half = dice_experiment.findings(_tiny(tmp_path, seed, "bfloat16"))
    assert [f.label for f in half[:3]] == ["measured"] * 3
    assert all("in bfloat16 one unit of rounding" in f.sentence for f in half[:3])
    assert half[3].holds  # the vanished derivatives are exact in every dtype
    assert not [f for f in [*few, *one, *half] if f.holds is False]


def test_the_slope_standard_error_is_the_spread_of_fitted_slopes(seed: int) -> None:
    """:func:`_slope_se` against simulation: squared errors with mean 1/N and a squared
    coefficient of variation of 1 (exponential), ``repeats`` per N, the slope fitted to
    log √mean over many draws; the delta method's standard error is within 15 % of their
    spread (its first-order error at 4 repeats is about 6 %)."""
    import numpy as np

    ns, repeats = [10, 100, 1000], 4
    rng = np.random.default_rng(seed)
    squares = rng.exponential(1.0, (4000, len(ns), repeats)) / np.array(ns)[None, :, None]
    rms = np.sqrt(squares.mean(-1))
    slopes = [dice_experiment._slope(ns, list(r)) for r in rms]
    assert all(abs(s + 0.5) < 1 for s in slopes)
    se = dice_experiment._slope_se(ns, repeats, [1.0] * len(ns))
    assert se == pytest.approx(float(np.std(slopes)), rel=0.15)
    assert dice_experiment._slope_se([100], repeats, [1.0]) is None
