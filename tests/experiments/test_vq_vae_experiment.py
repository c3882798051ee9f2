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
    assert items[0].verdict is True
    figures = vq_vae_experiment.figures(quick_run)
    assert "dark grey dotted line" in figures["training_curves"][1]
    check_figures("vq_vae", figures)
