"""The gradient_lens experiment end to end through the runner, with its QUICK params."""

from __future__ import annotations

import json
import pathlib

import pytest
import stop_gradient_experiments.gradient_lens as gradient_lens
import torch

from toolkit import disable_blocks
from toolkit.lab import Finding, run_experiment
from toolkit.lab.plan.config import plan
from toolkit.lab.report import write_report
from toolkit.lens import GradientGraph, gradient_path

CONFIGS = pathlib.Path(__file__).parents[2] / "configs"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, seed: int):
    out = tmp_path_factory.mktemp("gradient_lens")
    return run_experiment("gradient_lens", gradient_lens.QUICK, seed=seed, device="cpu",
                          disable_blocks=("gradient_lens.*",), output_dir=out,
                          finish=write_report)


@pytest.mark.slow
def test_the_target_network_leaks_without_the_cut_and_stays_frozen_with_it(quick_run) -> None:
    s = quick_run.summary
    blocked, unblocked = s["blocked"]["td"], s["unblocked"]["td"]
    assert blocked["target_params_with_gradient"] == 0 and blocked["target_grad_norm"] == 0.0
    assert unblocked["target_params_with_gradient"] == 6 and unblocked["target_grad_norm"] > 0
    assert blocked["received"] == [f"online.{i}.{k}" for i in (0, 2, 4)
                                   for k in ("weight", "bias")]
    assert blocked["assert_no_gradient"] == "passed" and blocked["leaking"] == []
    assert unblocked["assert_no_gradient"] == "failed" and len(unblocked["leaking"]) == 6
    assert unblocked["shortest_leak"] == (
        "target.4.bias: SmoothL1Loss -> Add -> Mul -> Max -> Addmm -> target.4.bias")
    steps, drift_b = quick_run.metric("blocked/td/target_drift")
    _, drift_u = quick_run.metric("unblocked/td/target_drift")
    assert list(steps) == list(range(gradient_lens.QUICK["td_steps"] + 1))
    assert (drift_b == 0).all() and drift_u[0] == 0 and (drift_u[1:] > 0).all()
    # the online network's gradient is the same either way, and equals the lens's table
    online = next(r for r in s["flow"]["td"] if r["group"] == "online")
    assert online["norm_blocked"] == pytest.approx(blocked["online_grad_norm"], rel=1e-6)
    assert online["cosine"] == pytest.approx(1.0) and online["rel_diff"] == 0.0
    target = next(r for r in s["flow"]["td"] if r["group"] == "target")
    assert target["norm_unblocked"] == pytest.approx(unblocked["target_grad_norm"], rel=1e-6)
    assert target["rel_diff"] is None  # inf in JSON


@pytest.mark.slow
def test_the_discriminator_step_reaches_the_generator_without_the_cut(quick_run) -> None:
    s, costs = quick_run.summary, quick_run.costs
    blocked, unblocked = s["blocked"]["gan"], s["unblocked"]["gan"]
    n_gen = 2 * (gradient_lens.Params().gen_layers + 1)
    assert blocked["generator_params_with_gradient"] == 0 and blocked["generator_grads_filled"] == 0
    assert unblocked["generator_params_with_gradient"] == n_gen
    assert unblocked["generator_grads_filled"] == n_gen
    assert unblocked["graph_nodes"] > blocked["graph_nodes"]
    memory = costs["gan"]["memory"]  # bytes saved for backward are exact, not timings
    assert memory["unblocked"]["saved_tensor_bytes"] > memory["blocked"]["saved_tensor_bytes"]
    for case in ("td", "gan"):
        assert costs[case]["blocked_seconds"] > 0
        assert costs[case]["rounds"] == gradient_lens.QUICK["rounds"]


@pytest.mark.slow
def test_findings_figures_and_artifacts(quick_run, check_figures) -> None:
    found = gradient_lens.findings(quick_run)
    assert 3 <= len(found) <= 6 and all(isinstance(f, Finding) for f in found)
    for finding in found[:4]:
        assert finding.verdict is True and finding.topic == "result", finding
    assert found[4].topic == "cost" and found[4].verdict is True and found[4].seed_independent
    # the time ratio is measured: no theory predicts its size
    assert found[5].timing is not None and found[5].timing.expect is None
    assert "0 of 6 target-network parameters" in found[0].sentence
    assert "(shortest path: SmoothL1Loss -> Add -> Mul -> Max -> Addmm -> target.4.bias)" in \
        found[1].sentence
    check_figures("gradient_lens", gradient_lens.figures(quick_run))
    figures = quick_run.run_dir / "figures"
    assert (figures / "graph_td.png").exists() and (figures / "graph_gan.png").exists()
    graph = GradientGraph.from_dict(quick_run.artifact("graph_td"))
    assert graph.blocks == [gradient_lens.TARGET_BLOCK]
    assert {n["label"] for n in graph.nodes if n["behind"] and n["kind"] == "leaf"} == {
        f"target.{i}.{k}" for i in (0, 2, 4) for k in ("weight", "bias")}
    lens = quick_run.artifact("lens")
    assert "gradient reaches 6 of 6 parameters" in lens["assert_messages"]["td_unblocked"]
    assert lens["flow"]["gan"]["markdown"].startswith("| block | group |")
    meta = json.loads((quick_run.run_dir / "meta.json").read_text())
    assert meta["blocks_seen"] == [gradient_lens.TARGET_BLOCK, gradient_lens.FAKE_BLOCK]


def test_summary_is_deterministic(tmp_path: pathlib.Path, seed: int) -> None:
    kw = {**gradient_lens.QUICK, "td_steps": 3, "rounds": 1}
    a, b = (run_experiment("gradient_lens", kw, seed=seed + 4, device="cpu", output_dir=tmp_path)
              for _ in range(2))
    assert (a.run_dir / "summary.json").read_bytes() == (b.run_dir / "summary.json").read_bytes()


def test_the_leak_s_prediction_follows_gamma(tmp_path: pathlib.Path, seed: int) -> None:
    # γ = 0: the target enters the loss times 0, so without the cut it gets a path of zeros
    kw = {**gradient_lens.QUICK, "td_steps": 2, "rounds": 1, "q_hidden": 8, "gan_hidden": 8,
          "gan_batch": 8, "batch": 8}
    for gamma, moves in ((0.0, False), (0.5, True)):
        run = run_experiment("gradient_lens", {**kw, "gamma": gamma}, seed=seed,
                             device="cpu", output_dir=tmp_path / str(gamma))
        found = gradient_lens.findings(run)
        assert found[0].verdict is True, found[0]
        assert (found[0].values["drift_u"] > 0) is moves
        assert [f.headline is not None for f in found].count(True) == 1
        assert found[0].headline is not None and found[0].headline.thresholds == (0.0,)


def test_the_blocks_are_the_only_cuts(seed: int) -> None:
    torch.manual_seed(seed)
    params = gradient_lens.Params(**gradient_lens.QUICK)
    agent = gradient_lens.Agent(params.obs_dim, params.n_actions, params.q_hidden)
    s = torch.randn(3, params.obs_dim)
    batch = {"s": s, "s2": s, "a": torch.zeros(3, dtype=torch.long), "r": torch.zeros(3),
             "done": torch.zeros(3)}
    assert gradient_path(gradient_lens.td_loss(agent, batch, 0.9), agent.target[0].weight) is None
    with disable_blocks(gradient_lens.TARGET_BLOCK):
        loss = gradient_lens.td_loss(agent, batch, 0.9)
    assert gradient_path(loss, agent.target[0].weight) is not None
    generator, discriminator = gradient_lens.make_gan(params)
    real, z = torch.randn(4, params.data_dim), torch.randn(4, params.latent_dim)
    assert gradient_path(gradient_lens.d_loss(generator, discriminator, real, z),
                         generator[0].weight) is None
    with disable_blocks(gradient_lens.FAKE_BLOCK):
        loss = gradient_lens.d_loss(generator, discriminator, real, z)
    assert gradient_path(loss, generator[0].weight) is not None


def test_shipped_config_matches_the_params_defaults() -> None:
    (config,) = [spec.config for spec in plan(CONFIGS / "gradient_lens.toml")]
    assert config.experiment == "gradient_lens"
    assert config.disable_blocks == ("gradient_lens.*",)
    assert config.params == gradient_lens.Params().model_dump()
