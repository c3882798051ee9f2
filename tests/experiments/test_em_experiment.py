"""The em_gmm experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import stop_gradient_experiments.em_gmm as em_experiment
import torch

from toolkit.algorithms.em import GMMParams, precisions_cholesky_from_covariances
from toolkit.lab import Finding, run_experiment
from toolkit.lab.report import write_report


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int):
    out = tmp_path_factory.mktemp("em_gmm")
    return run_experiment("em_gmm", em_experiment.QUICK, dtype=em_experiment.DTYPE,
                          device="cpu", disable_blocks=["em.*"], output_dir=out,
                          finish=write_report, seed=seed)


@pytest.mark.slow
def test_quick_run_reports_the_three_variants(quick_run) -> None:
    run = quick_run
    n_iter = run.params["n_iter"]
    for variant in ("closed_form", "blocked", "unblocked"):
        steps, ll = run.metric(f"{variant}/train/loglik")
        assert list(steps) == list(range(n_iter + 1))
        assert np.isfinite(ll).all()
        run.metric(f"{variant}/train/resp_entropy")
        run.metric(f"{variant}/iris/loglik")
    # closed-form EM never decreases the log-likelihood and equals scikit-learn's trajectory
    _, ll_cf = run.metric("closed_form/train/loglik")
    assert np.diff(ll_cf).min() > -1e-12
    _, ll_sk = run.metric("sklearn/train/loglik")
    np.testing.assert_allclose(ll_cf[: len(ll_sk)], ll_sk, rtol=1e-6)
    # Fisher's identity: exact with the block, violated without it
    _, err_b = run.metric("blocked/grad/fisher_rel_err")
    _, err_u = run.metric("unblocked/grad/fisher_rel_err")
    assert err_b.max() < 1e-8
    assert err_u.min() > 1e-3
    s = run.summary
    assert s["blocked"]["fisher_rel_err_max"] < 1e-8 < s["unblocked"]["fisher_rel_err_median"]
    assert s["train_reference"]["sklearn_max_rel_diff"] < 1e-6
    # without the block the responsibilities are pushed toward hard assignments
    assert s["unblocked"]["final_resp_entropy"] < s["blocked"]["final_resp_entropy"]
    for key in ("final_loglik", "means_rmse", "weights_max_abs_err", "covariances_max_rel_err",
                "iris_final_loglik"):
        assert np.isfinite(s["blocked"][key]) and np.isfinite(s["unblocked"][key])
    assert (run.run_dir / "figures" / "ellipses_train.png").exists()
    assert (run.run_dir / "figures" / "loglik_fisher_entropy.png").exists()
    art = run.artifact("params_train")
    assert art["blocked_means"].shape == (3, 2)
    assert json.loads((run.run_dir / "meta.json").read_text())["blocks_seen"] == [
        "em.responsibilities"]


@pytest.mark.slow
def test_findings_verdicts_and_figures(quick_run, check_figures) -> None:
    items = em_experiment.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    # Fisher's identity, the entropy on the 2-D mixture, scikit-learn parity; the
    # log-likelihoods and iris are measured
    assert [f.verdict for f in items if f.topic == "result"] == [True, True, None, True, None]
    assert all(f.basis for f in items if f.verdict is not None)
    # the reference reaches the good optimum from the shared start
    assert quick_run.summary["closed_form"]["means_rmse"] < 0.5
    figures = em_experiment.figures(quick_run)
    check_figures("em_gmm", figures)
    # a colour is one component in every panel: each ellipse's colour is that of the true
    # component nearest to its centre
    fig = figures["ellipses_train"][0]
    truth = fig.axes[0]
    centre = {line.get_color(): line.get_xydata()[0] for line in truth.get_lines()
              if line.get_marker() == "x"}
    for ax in fig.axes[1:]:
        for line in ax.get_lines():
            if line.get_marker() == "x":
                nearest = min(centre, key=lambda c: float(((centre[c] - line.get_xydata()[0])
                                                            ** 2).sum()))
                assert nearest == line.get_color(), ax.get_title()
    # the log-likelihoods are drawn as differences to closed-form EM's
    assert "closed-form EM's" in figures["loglik_fisher_entropy"][0].axes[0].get_title()


def test_parameter_errors_match_components_by_assignment() -> None:
    from stop_gradient_experiments.em_gmm import parameter_errors

    cov = torch.eye(2, dtype=torch.float64).expand(3, 2, 2).contiguous()
    truth = GMMParams(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
                      torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.0]], dtype=torch.float64),
                      cov, precisions_cholesky_from_covariances(cov, "full"))
    order = torch.tensor([2, 0, 1])
    permuted = GMMParams(*(t[order] for t in truth))
    errs = parameter_errors(permuted, truth)
    assert errs == {"weights_max_abs_err": 0.0, "means_rmse": 0.0,
                    "covariances_max_rel_err": 0.0}
    shifted = GMMParams(permuted.weights, permuted.means + 0.1, cov, truth.precisions_cholesky)
    assert parameter_errors(shifted, truth)["means_rmse"] == pytest.approx(0.1 * 2**0.5)


def test_summary_is_deterministic(tmp_path: pathlib.Path, seed: int) -> None:
    kw = {"n_samples": 100, "n_iter": 3, "inner_steps": 2, "include_iris": False}
    a = run_experiment("em_gmm", kw, seed=seed + 5, dtype="float64", disable_blocks=("em.*",),
                       output_dir=tmp_path, device="cpu")
    b = run_experiment("em_gmm", kw, seed=seed + 5, dtype="float64", disable_blocks=("em.*",),
                       output_dir=tmp_path, device="cpu")
    assert (a.run_dir / "summary.json").read_text() == (b.run_dir / "summary.json").read_text()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scikit_learns_agreement_is_read_in_the_runs_own_rounding(
        tmp_path: pathlib.Path, seed: int, dtype: str) -> None:
    """scikit-learn computes in float64: a float32 run agrees to float32's rounding, which the
    old float64 tolerance (1e-10) called "not as predicted"; every prediction is made and
    none fails, and the tolerance is a thousand units of the run's dtype."""
    kw = {"n_samples": 100, "n_iter": 5, "inner_steps": 2, "include_iris": False}
    run = run_experiment("em_gmm", kw, seed=seed, dtype=dtype, disable_blocks=("em.*",),
                         output_dir=tmp_path, device="cpu")
    found = em_experiment.findings(run)
    assert [f.label for f in found if f.predicts] == ["as predicted"] * 3
    (sk,) = [f for f in found if "scikit-learn" in f.text]
    assert sk.values["sk_tol"] == pytest.approx(1e3 * torch.finfo(getattr(torch, dtype)).eps)
    assert sk.values["sk_diff"] < sk.values["sk_tol"] and dtype in sk.sentence
