"""The gradient-flow lens: gradient_path, assert_no_gradient and gradient_flow."""

from __future__ import annotations

import doctest
import json
import math

import pytest
import torch
from torch import nn

import toolkit.lens.flow as lens_module
from toolkit import as_constant, disable_blocks, stop_gradient
from toolkit.lens import (
    GradientLeakError,
    assert_no_gradient,
    gradient_flow,
    gradient_path,
    trace_cuts,
)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_doctests():
    result = doctest.testmod(lens_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


# --- gradient_path ----------------------------------------------------------------------------------


def test_path_to_a_leaf_names_every_node():
    w = torch.ones(3, requires_grad=True)
    assert gradient_path((w.exp() * 2).sum(), w) == ["Sum", "Mul", "Exp", "AccumulateGrad"]
    assert gradient_path((w.exp() * 2).sum(), w, name="w") == ["Sum", "Mul", "Exp", "w"]


@pytest.mark.parametrize("cut", [
    lambda w: w.detach(),
    lambda w: stop_gradient(w, name="test.cut"),
    lambda w: as_constant(lambda: 2 * w, name="test.cut"),
])
def test_no_path_through_a_cut(cut):
    w = torch.ones(3, requires_grad=True)
    v = torch.ones(3, requires_grad=True)
    loss = (cut(w) * v).sum()
    assert gradient_path(loss, w) is None
    assert gradient_path(loss, v) == ["Sum", "Mul", "AccumulateGrad"]


def test_no_path_to_tensors_without_grad_or_unrelated_or_from_a_constant_loss():
    w = torch.ones(3, requires_grad=True)
    frozen = torch.ones(3)
    unrelated = torch.ones(3, requires_grad=True)
    loss = (w * frozen).sum()
    assert gradient_path(loss, frozen) is None
    assert gradient_path(loss, unrelated) is None
    assert gradient_path(torch.ones(3).sum(), w) is None  # loss has no grad_fn
    with torch.no_grad():
        assert gradient_path((w * 2).sum(), w) is None


def test_non_leaf_targets_end_at_their_grad_fn():
    w = torch.ones(3, requires_grad=True)
    h = w * 2
    loss = h.exp().sum()
    assert gradient_path(loss, h) == ["Sum", "Exp", "Mul"]
    assert gradient_path(loss, h, name="h") == ["Sum", "Exp", "Mul (h)"]
    assert gradient_path(stop_gradient(h).exp().sum(), h) is None
    assert gradient_path(loss, loss) == ["Sum"]  # the loss itself
    assert gradient_path(w, w) == []


def test_non_leaf_target_of_a_multi_output_node_is_matched_by_output():
    w = torch.ones(3, requires_grad=True)
    a, b = (w * 1).split([1, 2])
    loss = b.sum()
    assert a.grad_fn is b.grad_fn
    assert gradient_path(loss, a) is None  # autograd gives a no gradient either
    assert gradient_path(loss, b) == ["Sum", "SplitWithSizes"]


def test_the_shortest_of_several_paths():
    w = torch.ones(3, requires_grad=True)
    long = w
    for _ in range(10):
        long = long.sin()
    loss = (long + 3 * w).sum()
    assert gradient_path(loss, w) == ["Sum", "Add", "Mul", "AccumulateGrad"]


def test_marked_cuts_stop_the_search():
    w = torch.ones(3, requires_grad=True)
    v = torch.ones(3, requires_grad=True)
    with trace_cuts():
        loss = (v * stop_gradient(w * 2, name="test.cut")).sum()
    assert loss.grad_fn.next_functions  # the graph behind the cut is there
    assert gradient_path(loss, w) is None
    assert gradient_path(loss, v) == ["Sum", "Mul", "AccumulateGrad"]


def test_graph_with_thousands_of_nodes():
    w = torch.ones(2, requires_grad=True)
    frozen = torch.ones(2, requires_grad=True)
    h = w
    for _ in range(3000):
        h = h * 1.0001 + 0.0
    loss = (h * stop_gradient(frozen)).sum()
    path = gradient_path(loss, w)
    assert path is not None and len(path) == 2 + 2 * 3000 + 1
    assert path[:2] == ["Sum", "Mul"] and path[-1] == "AccumulateGrad"
    assert gradient_path(loss, frozen) is None
    assert_no_gradient(loss, {"frozen": frozen})


def test_gradient_path_errors():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"gradient_path: tensor must be a torch.Tensor, got list"):
        gradient_path(w.sum(), [w])
    with pytest.raises(TypeError, match=r"gradient_path: loss must be a tensor .* got float"):
        gradient_path(1.0, w)


# --- assert_no_gradient -----------------------------------------------------------------------------


def _net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_leak_names_every_parameter_by_module_path_with_its_path():
    target = _net()
    loss = target(torch.ones(5, 3)).sum()
    with pytest.raises(GradientLeakError, match=r"(?s)gradient reaches 4 of 4 parameters that "
                       r"must receive none \(the target network must stay frozen\):\n"
                       r".*  2\.bias: Sum -> Addmm -> 2\.bias\n"):
        assert_no_gradient(loss, target, why="the target network must stay frozen")
    with pytest.raises(AssertionError) as info:
        assert_no_gradient(loss, {"target": target})
    assert set(info.value.paths) == {"target.0.weight", "target.0.bias", "target.2.weight",
                                     "target.2.bias"}
    assert info.value.paths["target.0.weight"] == [
        "Sum", "Addmm", "Relu", "Addmm", "T", "target.0.weight"]
    assert "  target.0.weight: Sum -> Addmm -> Relu -> Addmm -> T -> target.0.weight" in str(
        info.value)


def test_leak_names_from_named_parameters_lists_and_tensors():
    lin = nn.Linear(2, 1)
    loss = nn.functional.linear(torch.ones(1, 2), stop_gradient(lin.weight), lin.bias).sum()
    with pytest.raises(GradientLeakError, match=r"1 of 2 parameters.*:\n  bias: Sum -> Addmm"):
        assert_no_gradient(loss, lin.named_parameters())
    with pytest.raises(GradientLeakError, match=r"1 of 2 parameters.*:\n  params\[1\]: "):
        assert_no_gradient(loss, [lin.weight, lin.bias])
    with pytest.raises(GradientLeakError, match=r"1 of 1 parameter that.*:\n  params: "):
        assert_no_gradient(loss, lin.bias)
    assert_no_gradient(loss, lin.weight)


def test_no_leak_passes_blocked_and_frozen():
    online, target = _net(), _net()
    s = torch.randn(5, 3)
    loss = (online(s) - as_constant(target, s, name="test.target")).pow(2).mean()
    assert_no_gradient(loss, target)
    frozen = _net().requires_grad_(False)
    assert_no_gradient(frozen(s).sum(), frozen)
    with disable_blocks("test.*"):
        loss = (online(s) - as_constant(target, s, name="test.target")).pow(2).mean()
    with pytest.raises(GradientLeakError, match=r"4 of 4 parameters"):
        assert_no_gradient(loss, target)


def test_assert_no_gradient_errors():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"assert_no_gradient: why must be a str, got int"):
        assert_no_gradient(w.sum(), w, why=3)
    with pytest.raises(TypeError, match=r"assert_no_gradient: params must be a tensor, a list "
                       r"or dict of tensors, an nn.Module or named_parameters\(\), got int"):
        assert_no_gradient(w.sum(), 3)
    with pytest.raises(ValueError, match=r"assert_no_gradient: params 'params' is empty"):
        assert_no_gradient(w.sum(), [])
    with pytest.raises(ValueError, match=r"assert_no_gradient: params 'params' is a ReLU with "
                       r"no parameters"):
        assert_no_gradient(w.sum(), nn.ReLU())


# --- gradient_flow -----------------------------------------------------------------------------------


def _td_problem():
    g = torch.Generator().manual_seed(0)
    n, d, k = 6, 3, 2
    prob = {"s": torch.randn(n, d, generator=g, dtype=torch.float64),
            "s2": torch.randn(n, d, generator=g, dtype=torch.float64),
            "r": torch.randn(n, generator=g, dtype=torch.float64),
            "a": torch.randint(0, k, (n,), generator=g)}
    W = torch.randn(d, k, generator=g, dtype=torch.float64, requires_grad=True)
    Wt = torch.randn(d, k, generator=g, dtype=torch.float64, requires_grad=True)
    return prob, W, Wt, 0.9


def _td_loss(prob, W, Wt, gamma):
    q = (prob["s"] @ W).gather(1, prob["a"][:, None]).squeeze(1)
    target = prob["r"] + gamma * as_constant(lambda: (prob["s2"] @ Wt).max(1).values,
                                             name="test.target")
    return ((q - target) ** 2).mean()


def test_gradient_flow_td_loss_against_hand_computed_gradients():
    prob, W, Wt, gamma = _td_problem()
    n = len(prob["r"])
    with torch.no_grad():  # hand-computed: L = mean (Q(s,a) − r − γ max_a' T(s',a'))²
        best = (prob["s2"] @ Wt).argmax(1)
        delta = (prob["s"] @ W).gather(1, prob["a"][:, None]).squeeze(1) - (
            prob["r"] + gamma * (prob["s2"] @ Wt).max(1).values)
        grad_W = torch.zeros_like(W)
        grad_Wt = torch.zeros_like(Wt)
        for i in range(n):
            grad_W[:, prob["a"][i]] += 2 / n * delta[i] * prob["s"][i]
            grad_Wt[:, best[i]] -= 2 / n * gamma * delta[i] * prob["s2"][i]
    flow = gradient_flow(lambda: _td_loss(prob, W, Wt, gamma), {"online": W, "target": Wt})
    assert flow.blocks == ("test.target",) and flow.groups == ("online", "target")
    online, target = flow.row("test.target", "online"), flow.row("test.target", "target")
    assert online["norm_blocked"] == pytest.approx(float(grad_W.norm()), rel=1e-12)
    assert online["norm_unblocked"] == pytest.approx(float(grad_W.norm()), rel=1e-12)
    assert online["cosine"] == pytest.approx(1.0) and online["rel_diff"] == 0.0
    assert target["norm_blocked"] == 0.0
    assert target["norm_unblocked"] == pytest.approx(float(grad_Wt.norm()), rel=1e-12)
    assert target["norm_unblocked"] > 0.1
    assert target["cosine"] == 0.0 and math.isinf(target["rel_diff"])
    assert (target["reached_blocked"], target["reached_unblocked"]) == (False, True)
    torch.testing.assert_close(flow.gradients["online"], grad_W.reshape(-1), rtol=1e-12,
                               atol=1e-14)
    assert flow.loss == pytest.approx(float((delta**2).mean()))
    assert W.grad is None and Wt.grad is None  # .grad untouched


def test_each_block_is_disabled_in_turn_with_one_pass_per_block():
    w1 = torch.tensor([1.0, 2.0], requires_grad=True)
    w2 = torch.tensor([3.0], requires_grad=True)
    calls = []

    def loss_fn():
        calls.append(1)
        return ((w1 * stop_gradient(w1, name="test.one")).sum()
                + (w2 * stop_gradient(w2, name="test.two")).sum())

    flow = gradient_flow(loss_fn, {"first": [w1], "second": {"w2": w2}})
    assert len(calls) == 1 + 2
    assert flow.blocks == ("test.one", "test.two")
    assert [(r["block"], r["group"]) for r in flow.rows] == [
        ("test.one", "first"), ("test.one", "second"), ("test.two", "first"),
        ("test.two", "second")]
    assert flow.row("test.one", "first")["norm_unblocked"] == pytest.approx(2 * math.sqrt(5))
    assert flow.row("test.one", "second")["norm_unblocked"] == pytest.approx(3.0)
    assert flow.row("test.two", "first")["norm_unblocked"] == pytest.approx(math.sqrt(5))
    assert flow.row("test.two", "second")["norm_unblocked"] == pytest.approx(6.0)


def test_random_numbers_repeat_in_every_pass(seed: int):
    w = torch.ones(4, requires_grad=True)
    v = torch.ones(4, requires_grad=True)

    def loss_fn():
        mask = (torch.rand(4) > 0.5).double()  # dropout-like
        return (w * mask).sum() + (v * stop_gradient(v, name="test.v")).sum()

    torch.manual_seed(seed + 3)
    flow = gradient_flow(loss_fn, {"w": w, "v": v})
    after_flow = torch.rand(1)
    torch.manual_seed(seed + 3)
    loss_fn()
    assert torch.equal(torch.rand(1), after_flow)  # the stream advanced as for one call
    assert flow.row("test.v", "w")["rel_diff"] == 0.0


def test_no_block_ran_and_groups_without_grad():
    w = torch.ones(2, requires_grad=True)
    frozen = torch.ones(2)
    flow = gradient_flow(lambda: (w * frozen).sum(), {"w": w, "frozen": frozen})
    assert flow.rows == [] and flow.blocks == ()
    assert "no named block ran" in str(flow) and "no named block ran" in flow.to_markdown()
    flow = gradient_flow(lambda: (w * stop_gradient(frozen, name="test.f")).sum(),
                         {"frozen": frozen})
    row = flow.row("test.f", "frozen")
    assert (row["norm_blocked"], row["norm_unblocked"], row["cosine"]) == (0.0, 0.0, 1.0)
    assert not row["reached_unblocked"]


def test_table_str_markdown_and_json():
    prob, W, Wt, gamma = _td_problem()
    flow = gradient_flow(lambda: _td_loss(prob, W, Wt, gamma), {"online": W, "target": Wt})
    text = str(flow)
    assert "2 forward+backward passes" in text
    lines = text.splitlines()
    assert lines[1].split() == ["block", "group", "‖g‖", "blocked", "‖g‖", "unblocked", "cosine",
                                "rel", "diff", "reached", "(b/u)"]
    assert lines[-1].split()[:2] == ["test.target", "target"] and lines[-1].endswith("no/yes")
    md = flow.to_markdown().splitlines()
    assert len(md) == 4 and all(line.startswith("| ") and line.endswith(" |") for line in md)
    assert {line.count(" | ") for line in md} == {6}
    assert md[3].startswith("| `test.target` | target | 0 | ")
    data = json.loads(json.dumps(flow.to_dict(), allow_nan=False))
    assert data["rows"][1]["rel_diff"] is None and data["blocks"] == ["test.target"]
    with pytest.raises(KeyError, match=r"GradientFlow.row: no row for block 'x' and group 'online'"):
        flow.row("x", "online")


def test_gradient_flow_errors():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"gradient_flow: loss_fn must be callable, got Tensor"):
        gradient_flow(w.sum(), {"w": w})
    with pytest.raises(TypeError, match=r"gradient_flow: groups must be a dict name -> "
                       r"parameters, got list"):
        gradient_flow(lambda: w.sum(), [w])
    with pytest.raises(ValueError, match=r"gradient_flow: groups is empty"):
        gradient_flow(lambda: w.sum(), {})
    with pytest.raises(ValueError, match=r"gradient_flow: loss_fn\(\) must return a scalar "
                       r"tensor, got shape \(2,\)"):
        gradient_flow(lambda: w * 2, {"w": w})
    with pytest.raises(TypeError, match=r"gradient_flow: groups must be a tensor.*got str"):
        gradient_flow(lambda: w.sum(), {"w": "w"})


# --- CUDA -------------------------------------------------------------------------------------------


@cuda
def test_lens_on_cuda_models():
    online, target = _net().cuda(), _net().cuda()
    s = torch.randn(5, 3, device="cuda")

    def loss_fn():
        return (online(s) - as_constant(target, s, name="test.target")).pow(2).mean()

    assert_no_gradient(loss_fn(), target)
    with disable_blocks("test.*"):
        leaked = loss_fn()
    assert gradient_path(leaked, target[2].bias) == ["Mean", "Pow", "Sub", "Addmm", "AccumulateGrad"]
    with pytest.raises(GradientLeakError, match=r"4 of 4"):
        assert_no_gradient(leaked, target)
    flow = gradient_flow(loss_fn, {"online": online, "target": target})
    assert flow.row("test.target", "target")["norm_blocked"] == 0.0
    assert flow.row("test.target", "target")["norm_unblocked"] > 0.0
