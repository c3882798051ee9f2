"""The rbm_cd experiment: a quick run through the runner, its numbers and its figures."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from stop_gradient_experiments import rbm_cd

from tests.lab.report.figure_hits import text_problems
from tests.lab.report.layout import layout_problems
from toolkit import BlockNotSwitchableError, disable_blocks
from toolkit.algorithms.divergence import DivergenceWarning
from toolkit.algorithms.rbm import BLOCK, RBMParams, cd_gradient, exact_log_likelihood_gradient
from toolkit.lab import (
    RunInterrupted,
    RunResults,
    Story,
    fmt,
    read_findings,
    run_experiment,
)
from toolkit.lab.plan.config import plan
from toolkit.lab.report import default_figures, write_report
from toolkit.lab.style import variant_style

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int):
    # the showcase's run of this experiment: QUICK, in the experiment's DTYPE
    return run_experiment("rbm_cd", rbm_cd.QUICK, dtype=rbm_cd.DTYPE, device="cpu",
                          disable_blocks=("rbm.*",), finish=write_report,
                          output_dir=tmp_path_factory.mktemp("rbm_runs"), seed=seed)


@pytest.mark.slow
def test_quick_run_logs_every_variant_and_method(quick_run) -> None:
    keys = set().union(*(row.keys() for row in quick_run.metrics))
    for variant in ("blocked", "unblocked", "sampled"):
        for method in ("cd1", "cd10", "pcd"):
            for name in ("loglik", "cos_exact", "cos_cd"):
                assert f"{variant}/{method}/{name}" in keys
    assert {"sklearn/pcd/loglik", "toolkit/cd1/loglik", "toolkit/pcd/loglik"} <= keys
    s = quick_run.summary
    uniform = -16 * math.log(2)  # the uniform model over 16 bits: log 2**-16 = −11.09
    assert s["data"]["uniform_loglik"] == pytest.approx(uniform)
    # the best any model can do: −(28·ln 32 + 4·ln 16) / 32 nats per pattern
    assert s["data"]["optimum_loglik"] == pytest.approx(-(28 * math.log(32)
                                                          + 4 * math.log(16)) / 32)
    for method in ("cd1", "cd10", "pcd"):
        # with the block the gradient is the CD update at the chain's samples, exactly
        assert s["blocked"][method]["mean_cos_cd"] == pytest.approx(1.0, abs=1e-12)
        assert s["sampled"][method]["mean_cos_cd"] == pytest.approx(1.0, abs=1e-12)
        # without it, the gradient through the mean-field chain is a different direction
        assert s["unblocked"][method]["mean_cos_cd"] < 0.999
        # and the backward graph is larger (it contains the chain)
        assert s["unblocked"][method]["graph_nodes"] > s["blocked"][method]["graph_nodes"]
        # training moved the model from its near-uniform start, and stayed a finite likelihood;
        # whether it rose is measured, not asserted: neither update is the likelihood gradient
        # and CD's likelihood can fall (Fischer & Igel 2010; at seed shift 2 one method ends
        # 0.9 nats below its start, at seed 0 every method ends 1+ nats above it)
        assert s["blocked"][method]["initial_loglik"] == pytest.approx(uniform, abs=0.05)
        final = s["blocked"][method]["final_loglik"]
        assert math.isfinite(final) and final < 0 and final != s["blocked"][method]["initial_loglik"]
    # the costs: every variant's seconds, measured
    assert set(quick_run.costs["seconds"]) == {"blocked", "unblocked", "sampled"}
    assert quick_run.meta["blocks_seen"] == ["rbm.negative_samples"]


@pytest.mark.slow
def test_quick_run_tells_its_story(quick_run) -> None:
    found = read_findings(quick_run.run_dir)["rbm_cd"]
    assert 3 <= len(found) <= 6
    # the predictions hold; the likelihoods and the scikit-learn peer are measured
    assert [f.verdict for f in found] == [True, None, None, True]
    assert [f.topic for f in found].count("cost") == 1 and found[-1].topic == "cost"
    s = quick_run.summary
    assert fmt(s["unblocked"]["pcd"]["min_loglik"], digits=4) in found[1].text
    assert fmt(s["data"]["optimum_loglik"], digits=4) in found[1].text
    assert fmt(s["sklearn"]["pcd"]["final_loglik"], digits=4) in found[2].text
    assert "autograd nodes" in found[-1].text and found[-1].seed_independent
    assert (quick_run.run_dir / "findings.md").read_text().count("(as predicted;") == 2
    assert isinstance(rbm_cd.STORY, Story) and "measures" in rbm_cd.STORY.prediction


def test_findings_verdicts_follow_the_numbers() -> None:
    # a run where the block made no difference: the verdicts say so
    same = {"initial_loglik": -11.0, "min_loglik": -11.0, "final_loglik": -9.0,
            "mean_cos_cd": 1.0, "graph_nodes": 9}
    run = SimpleNamespace(summary={"blocked": {"pcd": same}, "unblocked": {"pcd": same}},
                          costs={}, params={"methods": ["pcd"]})
    found = rbm_cd.findings(run)
    assert [f.verdict for f in found] == [False, None, False]
    assert "training took" not in found[-1].text


@pytest.mark.slow
def test_quick_run_figures_have_captions_and_no_clashing_text(quick_run, check_figures) -> None:
    figures = rbm_cd.figures(quick_run)
    assert list(figures)[:2] == ["loglik", "grad_cosine"]  # the headline figures
    assert set(figures) == {"loglik", "grad_cosine", "filters", "samples", "graph_cd_step"}
    for name, fig in default_figures(quick_run).items():
        assert text_problems(fig) == [] and layout_problems(fig) == [], name
    # epochs tick at whole numbers, and the figures use the shared colours
    ax = figures["loglik"][0].axes[0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    colors = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert colors["blocked (mean-field chain)"] == variant_style("blocked")["color"]
    assert colors["unblocked (mean-field chain)"] == variant_style("unblocked")["color"]
    check_figures("rbm_cd", figures)
    pngs = {p.name for p in (quick_run.run_dir / "figures").glob("*.png")}
    assert {"loglik.png", "grad_cosine.png", "graph_cd_step.png"} <= pngs
    assert "failed" not in (quick_run.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_quick_run_saves_the_cd_step_graph_and_the_images(quick_run) -> None:
    graph = quick_run.artifact("graph_cd_step")
    assert graph["blocks"] == ["rbm.negative_samples"]
    cuts = [n for n in graph["nodes"] if n["kind"] == "cut"]
    behind = [n for n in graph["nodes"] if n["behind"]]
    assert cuts and behind  # the chain is in the graph, behind the cut
    assert any(n["kind"] == "leaf" and n["label"].endswith(".W") and not n["behind"]
               for n in graph["nodes"])
    weights = quick_run.artifact("weights")
    assert weights["blocked_cd1"].shape == (8, 16)
    samples = quick_run.artifact("samples")
    assert samples["unblocked_pcd"].shape == (16, 16)
    assert set(samples["sampled_cd1"].ravel().tolist()) <= {0.0, 1.0}


def test_each_variant_is_logged_as_soon_as_it_finishes(tmp_path, monkeypatch) -> None:
    # an interrupt during the unblocked variant keeps what the blocked one logged
    calls: list[str] = []
    train = rbm_cd.train

    def interrupted(*args, **kwargs):
        calls.append(kwargs["chain"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return train(*args, **kwargs)

    monkeypatch.setattr(rbm_cd, "train", interrupted)
    with pytest.raises((KeyboardInterrupt, RunInterrupted)):
        run_experiment("rbm_cd", {**rbm_cd.QUICK, "n_iter": 20, "methods": ["cd1"]},
                       dtype="float64", device="cpu", output_dir=tmp_path)
    (run_dir,) = (tmp_path / "rbm_cd").iterdir()
    run = RunResults(run_dir)
    assert run.status == "interrupted"
    keys = run.metric_keys()
    assert "blocked/cd1/loglik" in keys and "unblocked/cd1/loglik" not in keys
    assert "cd1" in run.summary["blocked"]


def test_configs_validate() -> None:
    for name in ("rbm_bas", "rbm_digits"):
        (config,) = [spec.config for spec in plan(ROOT / "configs" / f"{name}.toml")]
        assert config.experiment == "rbm_cd" and config.disable_blocks == ("rbm.*",)
        params = rbm_cd.Params(**config.params)
        assert params.n_components <= 20
    assert not (ROOT / "configs" / "rbm_cd_quick.toml").exists()  # QUICK is the one source
    assert rbm_cd.Params(**rbm_cd.QUICK).n_iter == 200 and rbm_cd.DTYPE == "float64"


def test_params_reject_unknown_methods() -> None:
    with pytest.raises(ValueError, match="unknown method 'cd2'"):
        rbm_cd.Params(methods=["cd1", "cd2"])
    with pytest.raises(ValueError, match="without repeats"):
        rbm_cd.Params(methods=["cd1", "cd1"])


def test_train_gradient_metrics_against_references(seed: int) -> None:
    # one logged epoch on BAS, through the estimator's callback: the blocked mean-field gradient
    # is the CD update (cos 1), and the exact-gradient cosine is computed against the enumerated
    # likelihood gradient
    X, _ = rbm_cd.load_data("bas", torch.float64)
    params = rbm_cd.Params(n_iter=1, log_every=1)
    result = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=seed, dtype=torch.float64)
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
        unblocked = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=seed,
                                 dtype=torch.float64)
    assert unblocked["rows"][0]["cos_cd"] < 1 - 1e-9
    assert unblocked["graph_nodes"] > result["graph_nodes"]
    # a sampled chain cannot run without the block
    with disable_blocks(BLOCK), pytest.raises(BlockNotSwitchableError,
                                                     match=r"block .rbm\.negative_samples."):
        rbm_cd.train(X, "cd1", params, chain="sampled", seed=seed, dtype=torch.float64)


def test_train_stops_when_the_parameters_diverge(seed: int) -> None:
    # Diverges by construction, for every seed and every BLAS: with learning_rate·weight_decay
    # = 1e308 each update multiplies every weight by (1 − 1e308), so |W| ≈ 1e306 after the
    # first update and overflows to inf in the second; training must stop there and say so.
    X, _ = rbm_cd.load_data("bas", torch.float64)
    params = rbm_cd.Params(n_iter=50, log_every=10, learning_rate=1.0, weight_decay=1e308,
                           batch_size=32)
    with pytest.warns(DivergenceWarning, match=r"weights became non-finite .* at update 1 "
                                              r"\(epoch 1\)") as record:
        result = rbm_cd.train(X, "cd1", params, chain="mean_field", seed=seed, dtype=torch.float64)
    assert len([w for w in record if w.category is DivergenceWarning]) == 1  # warned once
    assert result["diverged"]
    assert result["divergence"] == {"where": "BernoulliRBM", "quantity": "weights", "step": 1,
                                    "epoch": 1, "applied": True}
    steps = [row["step"] for row in result["rows"]]
    assert steps == [0, 2] and result["rows"][-1]["loglik"] is None  # stopped in epoch 2 of 50
    assert rbm_cd._summary_of(result)["diverged_at"]["step"] == 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_predictions_hold_from_the_first_epoch_in_either_precision(
        tmp_path: Path, seed: int, dtype: str) -> None:
    """Nothing in these predictions waits for training or depends on the precision: at the
    first update from tiny weights the bias gradient already flows through the chain (the
    chain's σ′ is not small), the CD cosine is 1 to far below 1e-9 in float32 too (it errs
    by the square of the rounding), and the graph holds the chain's steps. A two-epoch run
    from N(0, 0.01²) weights makes every prediction, and each holds."""
    params = {"n_iter": 2, "init": "normal", "log_every": 1, "sample_steps": 5,
              "n_samples": 2, "peers": False, "sampled_peer": False}
    run = run_experiment("rbm_cd", params, dtype=dtype, device="cpu",
                         disable_blocks=("rbm.*",), output_dir=tmp_path, seed=seed)
    found = rbm_cd.findings(run)
    assert [f.holds for f in found] == [True, None, True]
    assert not any(f.outside for f in found)


def test_cosines_of_the_initial_weights_alone_are_measured(tmp_path: Path) -> None:
    """N(0, 0.01²) weights logged before any training: the chain's share of the unblocked
    update is ~1e-4, so the headline is measured with its reason, not "not as predicted"."""
    params = {"init": "normal", "n_iter": 1, "log_every": 1, "methods": ["cd1"],
              "peers": False, "sampled_peer": False, "n_samples": 2, "sample_steps": 2}
    run = run_experiment("rbm_cd", params, seed=0, dtype="float64", device="cpu",
                         disable_blocks=("rbm.*",), output_dir=tmp_path)
    found = rbm_cd.findings(run)
    assert not [f.sentence for f in found if f.holds is False]
    (headline,) = [f for f in found if f.headline is not None]
    assert headline.label == "measured" and "initial weights" in headline.sentence
    assert rbm_cd.start_only_outside({**params, "init": "uniform"}) == ""
    assert rbm_cd.start_only_outside({**params, "n_iter": 2}) == ""
