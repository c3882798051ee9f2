"""The vq_vae experiment end to end through the runner, with small params."""

from __future__ import annotations

import pytest
import stop_gradient_experiments.vq_vae as vq_vae_experiment

from toolkit.lab import Finding, RunResults, run_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int) -> RunResults:
    return run_experiment("vq_vae", {**vq_vae_experiment.QUICK, "epochs": 4, "hidden": 64},
                          seed=seed, device="cpu", disable_blocks=["vq_vae.*"],
                          output_dir=tmp_path_factory.mktemp("vq_vae"))


def test_required_summary_keys_and_the_exact_zero(quick_run: RunResults) -> None:
    s = quick_run.summary
    assert s["blocked"]["encoder_recon_grad_norm"] > 0
    assert s["unblocked"]["encoder_recon_grad_norm"] == 0.0  # exactly, z_q = e
    assert s["without_straight_through"]["encoder_recon_grad_norm"] == 0.0
    assert 1 <= s["blocked"]["perplexity"] <= s["n_codes"]
    assert s["blocked"]["recon_mse"] < s["unblocked"]["recon_mse"]
    assert set(quick_run.meta["blocks_seen"]) == {
        "vq_vae.straight_through", "vq_vae.codebook", "vq_vae.commitment"}


def test_findings_and_figures(quick_run: RunResults, check_figures) -> None:
    items = vq_vae_experiment.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert items[0].verdict is True and items[0].headline is not None
    assert sum(f.headline is not None for f in items) == 1
    head = items[0].headline
    assert all(isinstance(items[0].values[v], float) for v in (head.blocked, head.unblocked))
    figures = vq_vae_experiment.figures(quick_run)
    assert "dark grey dotted line" in figures["training_curves"][1]
    check_figures("vq_vae", figures)


def test_without_the_commitment_cut_the_codes_gradient_is_scaled_by_one_plus_beta(
        quick_run: RunResults) -> None:
    # β ‖z_e − e‖² uncut is β times the codebook term as a function of the codes
    g = quick_run.summary["commitment_gradients"]
    assert g["codes_ratio"] == pytest.approx(1 + quick_run.params["beta"], rel=1e-4)
    assert g["codes_residual"] < 1e-4 and g["encoder_rel_diff"] < 1e-4
    (finding,) = [f for f in vq_vae_experiment.findings(quick_run) if "commitment" in f.text]
    assert finding.verdict is True and finding.values["expect"] == 1 + quick_run.params["beta"]


def test_the_prediction_follows_the_run_s_beta_and_patterns(tmp_path, seed: int) -> None:
    # β = 1 predicts a ratio of 2; patterns that keep the straight-through cut in the
    # unblocked variant leave it out of the straight-through sentence
    run = run_experiment("vq_vae", {**vq_vae_experiment.QUICK, "epochs": 1, "hidden": 16,
                                    "beta": 1.0},
                         seed=seed, device="cpu", disable_blocks=["vq_vae.codebook"],
                         output_dir=tmp_path)
    assert run.summary["commitment_gradients"]["codes_ratio"] == pytest.approx(2.0, rel=1e-4)
    items = vq_vae_experiment.findings(run)
    assert "every block off" not in items[0].text and "u_g" not in items[0].values
    assert items[0].verdict is True
    assert [f.verdict for f in items if "commitment cut" in f.text] == [True]
