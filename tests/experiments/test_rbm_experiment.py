"""The rbm_cd experiment: a quick run through the runner, its numbers and its figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from experiments import rbm_cd
from toolkit import BlockNotSwitchableError, disable_blocks
from toolkit.algorithms.rbm import BLOCK, RBMParams, cd_gradient, exact_log_likelihood_gradient
from toolkit.report import write_report
from toolkit.runner import load_config, run_experiment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("rbm_runs")
    # two methods keep the test fast; the quick config runs all three
    return run_experiment(ROOT / "configs" / "rbm_cd_quick.toml", output_dir=out,
                          finish=write_report,
                          overrides=['params.methods=["cd1", "cd10"]'])


@pytest.mark.slow
def test_quick_run_logs_every_variant_and_method(quick_run) -> None:
    keys = set().union(*(row.keys() for row in quick_run.metrics))
    for variant in ("blocked", "unblocked", "sampled"):
        for method in ("cd1", "cd10"):
            for name in ("loglik", "cos_exact", "cos_cd"):
                assert f"{variant}/{method}/{name}" in keys
    assert "sklearn/pcd/loglik" in keys and "toolkit/cd1/loglik" in keys
    s = quick_run.summary
    for method in ("cd1", "cd10"):
        # with the block the gradient is the CD update at the chain's samples, exactly
        assert s["blocked"][method]["mean_cos_cd"] == pytest.approx(1.0, abs=1e-12)
        assert s["sampled"][method]["mean_cos_cd"] == pytest.approx(1.0, abs=1e-12)
        # without it, the gradient through the mean-field chain is a different direction
        assert s["unblocked"][method]["mean_cos_cd"] < 0.999
        # and the backward graph is larger (it contains the chain)
        assert s["unblocked"][method]["graph_nodes"] > s["blocked"][method]["graph_nodes"]
        # training improved on the uniform model (16 bits: log 2**-16 = −11.09)
        assert s["blocked"][method]["final_loglik"] > -16 * math.log(2) + 1.0
        assert s["blocked"][method]["summed_nll"] == pytest.approx(
            -32 * s["blocked"][method]["final_loglik"])
        # the gap to the best any model can do: 28·ln 32 + 4·ln 16 nats
        assert s["blocked"][method]["gap_to_optimum"] == pytest.approx(
            s["blocked"][method]["summed_nll"] - 28 * math.log(32) - 4 * math.log(16))
    assert quick_run.meta["blocks_seen"] == ["rbm.negative_samples"]


@pytest.mark.slow
def test_quick_run_writes_figures_and_artifacts(quick_run) -> None:
    figures = {p.name for p in (quick_run.run_dir / "figures").glob("*.png")}
    assert {"loglik.png", "grad_cosine.png", "filters.png", "samples.png"} <= figures
    weights = quick_run.artifact("weights")
    assert weights["blocked_cd1"].shape == (8, 16)
    samples = quick_run.artifact("samples")
    assert samples["unblocked_cd10"].shape == (16, 16)
    assert set(samples["sampled_cd1"].ravel().tolist()) <= {0.0, 1.0}
    assert "failed" not in (quick_run.run_dir / "report.md").read_text()


def test_configs_validate() -> None:
    for name in ("rbm_bas", "rbm_digits", "rbm_cd_quick"):
        (config,) = load_config(ROOT / "configs" / f"{name}.toml")
        assert config.experiment == "rbm_cd" and config.disable_blocks == ("rbm.*",)
        params = rbm_cd.Params(**config.params)
        assert params.n_components <= 20
    quick = rbm_cd.Params(**rbm_cd.QUICK)
    (quick_config,) = load_config(ROOT / "configs" / "rbm_cd_quick.toml")
    assert quick == rbm_cd.Params(**quick_config.params)


def test_params_reject_unknown_methods() -> None:
    with pytest.raises(ValueError, match="unknown method 'cd2'"):
        rbm_cd.Params(methods=["cd1", "cd2"])
    with pytest.raises(ValueError, match="without repeats"):
        rbm_cd.Params(methods=["cd1", "cd1"])


def test_train_gradient_metrics_against_references() -> None:
    # one logged epoch on BAS, through the estimator's callback: the blocked mean-field gradient
    # is the CD update (cos 1), and the exact-gradient cosine is computed against the enumerated
    # likelihood gradient
    X, _ = rbm_cd.load_data("bas", torch.float64)
    params = rbm_cd.Params(n_iter=1, log_every=1)
    result = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=0, dtype=torch.float64)
    first, last = result["rows"]
    assert first["step"] == 0 and last["step"] == 1 and set(last) == {"step", "loglik"}
    assert first["cos_cd"] == pytest.approx(1.0, abs=1e-12)
    assert -1.0 <= first["cos_exact"] <= 1.0
    assert first["loglik"] == pytest.approx(-16 * math.log(2), abs=0.05)  # near-uniform start
    p = result["params"]
    assert isinstance(p, RBMParams) and not result["diverged"]
    # the references used by train agree with each other at v_model = the data (gradient 0)
    zero = cd_gradient(p, X, X)
    assert all(float(z.abs().max()) == 0.0 for z in zero)
    assert exact_log_likelihood_gradient(p, X).weights.shape == (8, 16)
    # the same call without the block trains through the chain: the CD cosine drops below 1
    with disable_blocks(BLOCK):
        unblocked = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=0,
                                 dtype=torch.float64)
    assert unblocked["rows"][0]["cos_cd"] < 1 - 1e-9
    assert unblocked["graph_nodes"] > result["graph_nodes"]
    # a sampled chain cannot run without the block
    with disable_blocks(BLOCK), pytest.raises(BlockNotSwitchableError,
                                                     match=r"block .rbm\.negative_samples."):
        rbm_cd.train(X, "cd1", params, chain="sampled", seed=0, dtype=torch.float64)


def test_train_stops_when_the_parameters_diverge() -> None:
    X, _ = rbm_cd.load_data("bas", torch.float64)
    params = rbm_cd.Params(n_iter=50, log_every=10, learning_rate=1e308)
    # steps of 1e308 overflow to infinity when two successive updates of a weight share a
    # sign; from seed 2 that happens in the fifth epoch (from seeds 0 and 1 the mean-field
    # chain saturates first and the weights stay finite)
    result = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=2, dtype=torch.float64)
    assert result["diverged"]
    steps = [row["step"] for row in result["rows"]]
    assert steps[-1] < 50 and result["rows"][-1]["loglik"] is None
