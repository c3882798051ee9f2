"""compare_gradients on cases with known answers, and the gradient-flow audit."""

from __future__ import annotations

import json
import math

import pytest
import torch

from toolkit import (
    assert_blocked,
    compare_gradients,
    count_graph_nodes,
    disable_blocks,
    has_gradient_path,
    stop_gradient,
)

# L(w) = ||w - sg(2w)||^2: blocked gradient 2(w - 2w) = -2w; unblocked d/dw (−w)^2 = 2w.


def _target_loss(w):
    return lambda: ((w - stop_gradient(2 * w, name="test.target")) ** 2).sum()


def test_known_answer_single_tensor():
    w = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64, requires_grad=True)
    cmp = compare_gradients(_target_loss(w), w)
    assert torch.equal(cmp.blocked["param"], -2 * w.detach())
    assert torch.equal(cmp.unblocked["param"], 2 * w.detach())
    p = cmp["param"]
    assert p.norm_blocked == pytest.approx(6.0) and p.norm_unblocked == pytest.approx(6.0)
    assert p.cosine == pytest.approx(-1.0)
    assert p.rel_diff == pytest.approx(2.0)  # ||-2w - 2w|| / ||-2w||
    assert p.max_abs_diff == pytest.approx(8.0)  # 4 * max|w|
    assert cmp.overall.rel_diff == pytest.approx(2.0)


def test_dict_params_reference_and_overall():
    a = torch.tensor([3.0], requires_grad=True)
    b = torch.tensor([4.0], requires_grad=True)

    def loss():
        # a: blocked gradient 2a*0 + 1 ... keep it simple: a * sg(a) + b
        return (a * stop_gradient(a, name="test.a")).sum() + (b * 1.0).sum()

    reference = {"a": torch.tensor([6.0]), "b": torch.tensor([1.0])}  # true gradient
    cmp = compare_gradients(loss, {"a": a, "b": b}, reference=reference)
    assert cmp["a"].norm_blocked == 3.0 and cmp["a"].norm_unblocked == 6.0
    assert cmp["b"].rel_diff == 0.0 and cmp["b"].cosine == 1.0
    assert cmp["a"].ref_rel_err_blocked == pytest.approx(0.5)
    assert cmp["a"].ref_rel_err_unblocked == 0.0
    # overall: blocked (3, 1), unblocked (6, 1), reference (6, 1)
    assert cmp.overall.norm_blocked == pytest.approx(math.sqrt(10))
    assert cmp.overall.ref_rel_err_blocked == pytest.approx(3 / math.sqrt(37))
    assert cmp.overall.cosine == pytest.approx(19 / (math.sqrt(10) * math.sqrt(37)))


def test_list_params_and_unreached_parameter_is_zero():
    a = torch.tensor([1.0], requires_grad=True)
    unused = torch.tensor([5.0], requires_grad=True)
    cmp = compare_gradients(lambda: (a * 2).sum(), [a, unused])
    assert torch.equal(cmp.blocked["1"], torch.zeros(1))
    assert cmp["1"].cosine == 1.0 and cmp["1"].rel_diff == 0.0  # both zero


def test_disable_patterns_select_blocks():
    w = torch.tensor([1.0], requires_grad=True)
    cmp = compare_gradients(_target_loss(w), w, disable=("other.*",))
    assert cmp.overall.rel_diff == 0.0  # the block was not disabled
    cmp_all = compare_gradients(lambda: (w * stop_gradient(w)).sum(), w, disable=())
    assert cmp_all.overall.rel_diff == pytest.approx(1.0)  # () disables unnamed blocks too
    cmp_named = compare_gradients(lambda: (w * stop_gradient(w)).sum(), w)
    assert cmp_named.overall.rel_diff == 0.0  # "*" leaves unnamed blocks alone


def test_zero_blocked_gradient_gives_infinite_relative_difference():
    w = torch.tensor([1.0], requires_grad=True)
    # blocked, the loss does not depend on w at all (and does not even require grad)
    cmp = compare_gradients(lambda: (stop_gradient(w, name="test.z") * 2).sum(), w)
    assert cmp.overall.norm_blocked == 0.0
    assert cmp.overall.rel_diff == math.inf and cmp.overall.cosine == 0.0
    assert cmp.to_dict()["overall"]["rel_diff"] is None


def test_to_dict_is_json_and_str_is_a_table():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    cmp = compare_gradients(_target_loss(w), {"w": w}, reference={"w": torch.zeros(2)})
    data = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert set(data) == {"disable", "overall", "parameters"}
    assert data["parameters"]["w"]["cosine"] == pytest.approx(-1.0)
    text = str(cmp)
    assert "cosine" in text and "rel diff" in text and "ref err b" in text
    assert text.splitlines()[3].startswith("w") and "(all)" in text
    # the switch is written as the call a user would type
    assert text.splitlines()[0] == "gradients blocked (b) vs inside disable_blocks('*') (u)"
    two = compare_gradients(_target_loss(w), w, disable=("test.*", "other"))
    assert str(two).splitlines()[0].endswith("inside disable_blocks('test.*', 'other') (u)")


def test_disable_state_restored_after_comparison():
    w = torch.tensor([1.0], requires_grad=True)
    compare_gradients(_target_loss(w), w)
    with disable_blocks("unrelated"):
        pass
    (g,) = torch.autograd.grad(_target_loss(w)(), w)
    assert g.item() == -2.0


def test_compare_gradients_errors():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="loss_fn\\(\\) must return a scalar tensor"):
        compare_gradients(lambda: w * 2, w)
    with pytest.raises(ValueError, match="params\\['0'\\] does not require grad"):
        compare_gradients(lambda: w.sum(), [torch.ones(2)])
    with pytest.raises(TypeError, match="params must be a tensor, a list of tensors or a dict"):
        compare_gradients(lambda: w.sum(), 3)
    with pytest.raises(TypeError, match="params\\['x'\\] must be a tensor"):
        compare_gradients(lambda: w.sum(), {"x": 1.0})
    with pytest.raises(ValueError, match="params is empty"):
        compare_gradients(lambda: w.sum(), [])
    with pytest.raises(TypeError, match="disable must be a sequence of patterns"):
        compare_gradients(lambda: w.sum(), w, disable="em.*")
    with pytest.raises(ValueError, match="reference must have the same keys"):
        compare_gradients(lambda: w.sum(), {"w": w}, reference={"v": torch.ones(2)})
    with pytest.raises(ValueError, match="reference\\['w'\\] must have shape \\(2,\\)"):
        compare_gradients(lambda: w.sum(), {"w": w}, reference={"w": torch.ones(3)})


# --- audit --------------------------------------------------------------------------------------


def test_has_gradient_path_leaf_and_non_leaf():
    x = torch.randn(3, requires_grad=True)
    y = x * 2  # non-leaf
    z = (y.exp() + 1).sum()
    assert has_gradient_path(z, x)
    assert has_gradient_path(z, y)
    assert has_gradient_path(y, y)
    blocked = (stop_gradient(y).exp() + x).sum()
    assert has_gradient_path(blocked, x)  # through the "+ x" branch
    assert not has_gradient_path(blocked, y)
    only_blocked = stop_gradient(y).exp().sum()
    assert not has_gradient_path(only_blocked, x)
    assert not has_gradient_path(z, torch.randn(3))  # does not require grad
    other = torch.randn(3, requires_grad=True)
    assert not has_gradient_path(z, other)


def test_has_gradient_path_structures_and_disabled_block():
    x = torch.randn(2, requires_grad=True)
    out = {"a": stop_gradient(x, name="audit.x").sum(), "b": [torch.ones(1)]}
    assert not has_gradient_path(out, x)
    with disable_blocks("audit.*"):
        out = {"a": stop_gradient(x, name="audit.x").sum()}
    assert has_gradient_path(out, x)
    with pytest.raises(TypeError, match="has_gradient_path: output must be a tensor"):
        has_gradient_path("loss", x)
    with pytest.raises(TypeError, match=r"has_gradient_path: tensor must be a torch\.Tensor"):
        has_gradient_path(x.sum(), 1.0)


def test_has_gradient_path_matches_autograd_on_a_random_graph(seed: int):
    torch.manual_seed(seed + 3)
    leaves = [torch.randn(2, requires_grad=True) for _ in range(4)]
    out = (leaves[0] * stop_gradient(leaves[1]) + leaves[2].exp()).sum() * stop_gradient(leaves[3]).sum()
    grads = torch.autograd.grad(out, leaves, allow_unused=True, retain_graph=True)
    for leaf, g in zip(leaves, grads):
        assert has_gradient_path(out, leaf) == (g is not None)


def test_assert_blocked_names_the_tensor():
    w = torch.randn(2, 3, requires_grad=True)
    assert_blocked(stop_gradient(w).sum(), w)
    with pytest.raises(AssertionError, match=r"'weights'.*not blocked"):
        assert_blocked((w * 2).sum(), w, name="weights")
    with pytest.raises(AssertionError, match=r"tensor of shape \(2, 3\) and dtype torch.float32"):
        assert_blocked((w * 2).sum(), w)


def test_count_graph_nodes_shrinks_with_the_block():
    x = torch.randn(5, requires_grad=True)

    def softmax_like():
        m = stop_gradient(x.max(), name="count.max")
        e = (x - m).exp()
        return (e / e.sum()).sum()

    blocked = count_graph_nodes(softmax_like())
    with disable_blocks("count.*"):
        unblocked = count_graph_nodes(softmax_like())
    assert unblocked == blocked + 1  # the Max node; AccumulateGrad is shared
    assert count_graph_nodes(torch.ones(1)) == 0
