"""The softmax_gradients experiment: pieces against closed forms, and a quick run end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pydantic
import pytest
import torch
from stop_gradient_experiments import softmax_gradients as exp

from toolkit.algorithms.softmax import naive_softmax
from toolkit.lab import Finding, run_experiment
from toolkit.lab.report import write_report

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_overflow_threshold_brackets_log_max(dtype):
    last_ok, first_bad = exp.overflow_threshold(dtype)
    # both are representable, and adjacent: the next value after last_ok is first_bad
    assert torch.tensor(first_bad, dtype=dtype).item() == first_bad
    assert torch.tensor(last_ok, dtype=dtype).item() == last_ok
    step = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(last_ok))
    assert first_bad - last_ok == pytest.approx(step, rel=1e-9)
    assert torch.isfinite(naive_softmax(torch.tensor([last_ok, 0.0], dtype=dtype))).all()
    assert not torch.isfinite(naive_softmax(torch.tensor([first_bad, 0.0], dtype=dtype))).all()
    log_max = math.log(torch.finfo(dtype).max)
    # exp overflows at log(max + ulp/2), a hair above log(max): the threshold sits within one
    # step of the dtype's spacing from log(finfo.max)
    assert last_ok <= log_max + 1e-12 and first_bad > log_max


def test_overflow_thresholds_known_values():
    assert exp.overflow_threshold(torch.float32)[1] == pytest.approx(88.7228, abs=1e-4)
    assert exp.overflow_threshold(torch.float16)[1] == pytest.approx(11.09, abs=0.01)


def test_make_inputs_tied_rows_have_exactly_n_tied_maxima(seed: int):
    inputs = exp.make_inputs(5, 12, 3, generator=torch.Generator().manual_seed(seed))
    tied = inputs["tied"]
    counts = (tied == tied.amax(1, keepdim=True)).sum(1)
    assert (counts == 3).all()
    assert (inputs["random"] == inputs["random"].amax(1, keepdim=True)).sum(1).eq(1).all()


@pytest.mark.parametrize("kind", ["random", "tied"])
def test_gradient_errors_float64_agree(kind, seed: int):
    inputs = exp.make_inputs(8, 16, 2, generator=torch.Generator().manual_seed(seed + 1))
    err = exp.gradient_errors(30 * inputs[kind], inputs["w"], ("softmax.*",))
    assert err["blocked_vs_unblocked"]["max_abs_diff"] <= 1e-14
    for v in ("blocked", "unblocked", "torch"):
        assert err[v]["finite"] and err[v]["max_abs_err"] <= 1e-14


def test_gradient_errors_low_precision_is_visible(seed: int):
    inputs = exp.make_inputs(8, 16, 2, generator=torch.Generator().manual_seed(seed + 1))
    err = exp.gradient_errors((3 * inputs["random"]).to(torch.bfloat16),
                              inputs["w"].to(torch.bfloat16), ("softmax.*",))
    assert 1e-5 < err["blocked"]["max_abs_err"] < 0.1


def test_quick_params_validate_and_errors():
    params = exp.Params(**exp.QUICK)
    assert params.scales == sorted(params.scales)
    with pytest.raises(pydantic.ValidationError, match="scales must be finite and > 0"):
        exp.Params(scales=[1.0, -2.0])
    with pytest.raises(pydantic.ValidationError, match="dtypes are listed twice"):
        exp.Params(dtypes=["float32", "float32"])
    with pytest.raises(pydantic.ValidationError, match="float8"):
        exp.Params(dtypes=["float8"])
    with pytest.raises(pydantic.ValidationError, match=r"n_tied \(9\) must be <= n_cols \(4\)"):
        exp.Params(n_tied=9, n_cols=4)
    with pytest.raises(pydantic.ValidationError, match="cost shapes must be positive"):
        exp.Params(cost_shapes=[(0, 5)])
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        exp.Params(n_steps=3)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, seed: int):
    out = tmp_path_factory.mktemp("softmax_runs")
    return run_experiment("softmax_gradients", exp.QUICK, device="cpu",
                          disable_blocks=["softmax.*"], output_dir=out, finish=write_report, seed=seed)


@pytest.mark.slow
def test_quick_run_end_to_end(quick_run):
    run = quick_run
    assert run.meta["status"] == "complete"
    s = run.summary
    diff = s["blocked_vs_unblocked"]["max_abs_diff"]
    assert diff["float64"]["random"] <= 1e-14 and diff["float64"]["tied"] <= 1e-14
    assert diff["float32"]["random"] <= 1e-5
    for dtype in ("float64", "float32", "bfloat16", "float16"):
        for v in ("blocked", "unblocked", "torch"):
            assert s[v]["grad_all_finite"][dtype] == {"random": True, "tied": True}
        assert s["stable"]["nonfinite_rows_any_scale"][dtype] == 0.0
    # computing float16/bfloat16 inputs in float32 (dtype=) is closer to the float64 gradient
    for dtype in ("float16", "bfloat16"):
        for kind in ("random", "tied"):
            assert (s["upcast"]["grad_max_abs_err_vs_float64"][dtype][kind]
                    < s["blocked"]["grad_max_abs_err_vs_float64"][dtype][kind])
    assert "float32" not in s["upcast"]["grad_max_abs_err_vs_float64"]
    assert s["naive"]["float32"]["threshold_first_failing"] == pytest.approx(88.7228, abs=1e-4)
    assert s["naive"]["float16"]["threshold_first_failing"] == pytest.approx(11.09, abs=0.01)
    for label in ("256x256", "8x5000"):
        assert s["blocked"][label]["graph_nodes"] < s["unblocked"][label]["graph_nodes"]
        assert s["torch"][label]["graph_nodes"] == 2
        assert run.costs["ratios"][label]["blocked_over_torch"] > 0
        assert run.costs["blocked"][label]["peak_bytes"] > 0
    keys = run.metric_keys()
    assert "blocked/grad_tied/float16_max_abs_err" in keys
    assert "blocked_vs_unblocked/grad_random/float32_max_abs_diff" in keys
    figures = {p.name for p in (run.run_dir / "figures").glob("*.png")}
    assert {"gradient_difference_vs_scale.png", "naive_vs_stable_failure.png",
            "cost_bars.png"} <= figures
    assert (run.run_dir / "report.html").stat().st_size > 0


@pytest.mark.slow
def test_findings_and_figures(quick_run, check_figures):
    items = exp.findings(quick_run)
    assert 3 <= len(items) <= 6 and all(isinstance(f, Finding) for f in items)
    assert [f.verdict for f in items[:-1]] == [True] * (len(items) - 1)
    assert items[-2].topic == "cost" and items[-2].seed_independent  # graph and bytes
    # the time ratio is measured, with its interval: no theory predicts a measurable saving
    assert items[-1].topic == "cost" and items[-1].timing is not None
    assert items[-1].timing.expect is None and items[-1].label == "measured"
    check_figures("softmax_gradients", exp.figures(quick_run))


@pytest.mark.slow
def test_summary_is_deterministic(quick_run, tmp_path, seed: int):
    again = run_experiment("softmax_gradients", exp.QUICK, device="cpu",
                           disable_blocks=["softmax.*"], output_dir=tmp_path, seed=seed)
    assert json.dumps(again.summary, sort_keys=True) == json.dumps(quick_run.summary,
                                                                   sort_keys=True)


def test_default_config_loads():
    from toolkit.lab.plan.config import plan

    (config,) = [spec.config for spec in plan(ROOT / "configs" / "softmax.toml")]
    params = exp.Params(**config.params)
    assert params.cost_shapes == [(4096, 4096), (64, 50000)]
    assert params.scales[0] == 1.0 and params.scales[-1] == 1e4


@pytest.mark.parametrize("n_cols", [2, 16, 1024])
@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16"])
def test_the_difference_bound_holds_for_the_softmax_length(n_cols: int, name: str, seed: int):
    """The threshold of the agreement finding is a first-order bound computed from n: the
    measured |blocked − unblocked| lies under it at every scale whose inputs are finite."""
    params = exp.Params(n_rows=8, n_cols=n_cols, n_tied=2, dtypes=[name], scales=[1.0, 1e3])
    inputs = exp.make_inputs(8, n_cols, 2, generator=torch.Generator().manual_seed(seed))
    bound = exp.difference_bounds(params, inputs["w"])[name]
    w = inputs["w"].to(exp.DTYPES[name])
    for kind in ("random", "tied"):
        for scale in params.scales:
            x = (scale * inputs[kind]).to(exp.DTYPES[name])
            diff = exp.gradient_errors(x, w, ("softmax.*",))["blocked_vs_unblocked"]
            assert diff["max_abs_diff"] is not None and diff["max_abs_diff"] <= bound


SMALL = {"n_rows": 8, "n_cols": 16, "failure_points": 5, "cost_shapes": [[64, 64]],
         "cost_repeat": 2}


def test_inside_their_range_every_prediction_is_made(tmp_path, seed: int):
    """Small inputs, and dtypes without float32 and float16: every prediction is made and
    holds, and the overflow sentence names the dtypes the run has."""
    for dtypes in (["float64", "float32", "bfloat16", "float16"], ["float64", "bfloat16"]):
        run = run_experiment("softmax_gradients", {**SMALL, "dtypes": dtypes}, device="cpu",
                             disable_blocks=["softmax.*"], output_dir=tmp_path, seed=seed)
        found = exp.findings(run)
        assert [f.holds for f in found if f.topic == "result"] == [True] * (len(found) - 2)
        assert not any(f.outside for f in found)
        naive = next(f for f in found if f.text.startswith("The naive form"))
        shown = [n for n in dtypes if n in ("float32", "float16")] or dtypes
        assert all(f"in {n} (log finfo.max" in naive.sentence for n in shown)


def test_scales_whose_inputs_overflow_are_outside_and_say_why(tmp_path, seed: int):
    """At s = 1e5 the float16 inputs s·u are inf: the stable form has nothing finite to work
    on, so the findings about every dtype become measurements that say so (no crash, no
    failed prediction); the float32 finding, whose inputs are finite, is still made."""
    params = {**SMALL, "scales": [1.0, 100.0, 1e5], "cost_shapes": []}
    run = run_experiment("softmax_gradients", params, device="cpu",
                         disable_blocks=["softmax.*"], output_dir=tmp_path, seed=seed)
    assert run.summary["inputs_overflow_at_scale"] == {
        "float64": None, "float32": None, "bfloat16": None, "float16": 1e5}
    found = exp.findings(run)
    agree, in32, naive = found
    for f in (agree, naive):
        assert f.label == "measured"
        assert "overflow in float16 from s = 1e+05; the predictions cover finite" in f.sentence
    assert in32.holds is True and not in32.outside
