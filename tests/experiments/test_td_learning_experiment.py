"""The td_learning experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

from pathlib import Path

import pytest
import stop_gradient_experiments.td_learning as td_learning
from matplotlib.figure import Figure

from toolkit.lab import Finding, RunResults, run_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int) -> RunResults:
    return run_experiment("td_learning", td_learning.QUICK, seed=seed, device="cpu",
                          dtype="float64", disable_blocks=["td.*"],
                          output_dir=tmp_path_factory.mktemp("td_learning"))


def test_required_summary_keys_and_the_books_numbers(quick_run: RunResults) -> None:
    s = quick_run.summary
    assert s["a_split"]["blocked"]["values"] == pytest.approx({"A": 0.5, "B": 1.0, "C": 0.0},
                                                              abs=1e-9)
    assert s["a_split"]["unblocked"]["values"] == pytest.approx(
        {"A": 0.5, "B": 0.75, "C": 0.25}, abs=1e-9)
    baird = s["baird"]
    assert baird["blocked"]["initial_weight_norm"] == pytest.approx(107**0.5)
    assert baird["blocked"]["final_weight_norm"] > 40 * baird["blocked"]["initial_weight_norm"]
    assert baird["unblocked"]["final_weight_norm"] < baird["blocked"]["initial_weight_norm"]
    assert quick_run.meta["blocks_seen"] == ["td.target"]


def test_the_random_chain_reaches_both_closed_form_fixed_points(quick_run: RunResults) -> None:
    c = quick_run.summary["chain"]
    assert c["blocked"]["dist_to_td_fixed_point"] < 1e-6
    assert c["unblocked"]["dist_to_rg_fixed_point"] < 1e-6
    assert c["blocked"]["value_error"] == pytest.approx(c["closed_form"]["value_error_td"])
    assert c["unblocked"]["value_error"] == pytest.approx(c["closed_form"]["value_error_rg"])
    assert c["blocked"]["grad_max_err_vs_closed_form"] < 1e-13
    assert c["unblocked"]["grad_max_err_vs_closed_form"] < 1e-13
    # the best value estimate in span(Φ) beats both fixed points
    assert c["closed_form"]["value_error_best"] <= min(c["closed_form"]["value_error_td"],
                                                       c["closed_form"]["value_error_rg"])


def test_findings_and_figures(quick_run: RunResults, check_figures) -> None:
    items = td_learning.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert [f.verdict for f in items if f.verdict is not None] == [True] * 5
    assert "not free" in items[3].text and "437" in items[2].sentence
    assert all(f.seed_independent for f in items[:4])
    figs = td_learning.figures(quick_run)
    assert list(figs) == ["a_split_values", "baird_weight_norm", "chain_values"]
    assert all(isinstance(fig, Figure) for fig, _ in figs.values())
    check_figures("td_learning", figs)  # captions say more than the panel titles


def test_the_shipped_config_runs_the_books_setup() -> None:
    from toolkit.lab.plan.config import plan

    (config,) = [spec.config for spec in plan(Path(__file__).parents[2] / "configs" / "td_learning.toml")]
    assert config.params["baird_alpha"] == 0.01 and config.params["baird_gamma"] == 0.99
    assert config.params["baird_sweeps"] == 1000 and tuple(config.disable_blocks) == ("td.*",)


def test_the_closed_form_predicts_where_each_descent_ends(quick_run: RunResults) -> None:
    """The affine-map prediction (no steps taken) lands where the descent did."""
    s = quick_run.summary
    for variant in ("blocked", "unblocked"):
        assert s["a_split"]["predicted_err_vs_book"][variant] == pytest.approx(
            s["a_split"][variant]["max_err_vs_book"], abs=1e-9)
        assert s["baird"]["predicted"][variant]["final_weight_norm"] == pytest.approx(
            s["baird"][variant]["final_weight_norm"], rel=1e-9)
    assert s["chain"]["predicted_dist"]["blocked"] == pytest.approx(
        s["chain"]["blocked"]["dist_to_td_fixed_point"], abs=1e-9)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_too_few_steps_make_measurements_that_say_why(tmp_path: Path, dtype: str) -> None:
    """The examples the docs give (``chain_steps=50``, float32; a short Baird): every
    prediction the run's steps cannot reach is measured, with its reason; none fails."""
    params = {"a_split_steps": 50, "baird_sweeps": 100, "chain_steps": 50, "log_every": 10}
    run = run_experiment("td_learning", params, seed=0, device="cpu", dtype=dtype,
                         disable_blocks=["td.*"], output_dir=tmp_path)
    found = td_learning.findings(run)
    assert not [f.sentence for f in found if f.holds is False]
    short = [f for f in found if f.outside]
    assert {f.text.split(":")[0].split("'")[0] for f in short} >= {
        "Baird", "Random chain", "The block is not free"}
    assert all("Measured only:" in f.sentence and f.label == "measured" for f in short)
    (headline,) = [f for f in found if f.headline is not None]
    assert headline.text.startswith("Baird")
