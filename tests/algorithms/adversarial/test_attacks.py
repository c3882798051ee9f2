"""FGSM and PGD against closed forms, a reference loop and torchattacks; the block's theory."""

from __future__ import annotations

import ast
import copy
import doctest
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from adversarial_testutil import DISABLE, gen, tiny_batch, tiny_mlp, trained_digits_mlp
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import toolkit.algorithms.adversarial.attacks as attacks_module
from toolkit import (
    assert_blocked,
    compare_gradients,
    disable_blocks,
    has_gradient_path,
    record_blocks,
)
from toolkit.algorithms.adversarial import BLOCK, eval_mode, fgsm, pgd, predict
from toolkit.lens.gradients import count_graph_nodes

# --- the attacks ---------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(eps=st.floats(0.01, 0.5), alpha=st.floats(0.01, 0.3), steps=st.integers(1, 4),
       norm=st.sampled_from(["linf", "l2"]), random_start=st.booleans(),
       seed=st.integers(0, 1000))
def test_pgd_stays_in_the_ball_and_the_bounds(eps, alpha, steps, norm, random_start, seed):
    net = tiny_mlp()
    x, y = tiny_batch(seed=seed)
    x_adv = pgd(net, x, y, eps, alpha, steps, norm=norm, random_start=random_start,
                generator=gen(seed))
    assert x_adv.shape == x.shape and x_adv.dtype == x.dtype
    assert x_adv.min() >= 0 and x_adv.max() <= 1
    delta = x_adv - x
    size = delta.abs().amax(dim=1) if norm == "linf" else delta.norm(dim=1)
    assert (size <= eps * (1 + 1e-5) + 1e-6).all()


def test_fgsm_matches_the_closed_form_on_a_linear_model(seed: int):
    # For logits W x + b, ∇_x CE = Wᵀ (softmax(W x + b) − onehot(y)).
    torch.manual_seed(seed + 1)
    net = nn.Linear(5, 4).double()
    x, y = tiny_batch(n=7, d=5, k=4, dtype=torch.float64)
    p = torch.softmax(net(x), dim=1).detach()
    grad = (p - F.one_hot(y, 4).double()) @ net.weight.detach()
    expected = (x + 0.05 * grad.sign()).clamp(0, 1)
    torch.testing.assert_close(fgsm(net, x, y, 0.05), expected)
    expected_l2 = (x + 0.05 * grad / grad.norm(dim=1, keepdim=True)).clamp(0, 1)
    torch.testing.assert_close(fgsm(net, x, y, 0.05, norm="l2"), expected_l2)
    targeted = (x - 0.05 * grad.sign()).clamp(0, 1)
    torch.testing.assert_close(fgsm(net, x, y, 0.05, targeted=True), targeted)


def reference_pgd(model, x, y, eps, alpha, steps):
    """A straightforward L∞ PGD loop without random start (the textbook algorithm)."""
    x_adv = x.clone()
    for _ in range(steps):
        x_adv.requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        (g,) = torch.autograd.grad(loss, x_adv)
        x_adv = (x_adv.detach() + alpha * g.sign())
        x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0, 1)
    return x_adv


def test_pgd_without_random_start_matches_a_reference_loop():
    net = tiny_mlp(dtype=torch.float64)
    x, y = tiny_batch(dtype=torch.float64)
    ours = pgd(net, x, y, 0.2, 0.05, 7, random_start=False)
    torch.testing.assert_close(ours, reference_pgd(net, x, y, 0.2, 0.05, 7))


def test_l2_random_start_is_inside_the_ball_and_fills_it():
    net = nn.Identity()  # no step effect needed: look at the start only via steps with alpha≈0
    x = torch.full((2000, 3), 0.5, dtype=torch.float64)
    y = torch.zeros(2000, dtype=torch.long)
    x_adv = pgd(lambda v: torch.cat([v, -v], 1), x, y, 0.3, 1e-12, 1, norm="l2",
                generator=gen(3), use_eval_mode=False)
    r = (x_adv - x).norm(dim=1)
    assert (r <= 0.3 + 1e-9).all()
    # uniform in a 3-D ball: P(r <= t eps) = t^3, so the median radius is 0.3 * 0.5^(1/3)
    assert abs(float(r.median()) - 0.3 * 0.5 ** (1 / 3)) < 0.01
    del net


def test_targeted_attack_reaches_its_target_on_an_easy_model(seed: int):
    # Two well separated blobs and a linear classifier: a large-enough step crosses the boundary.
    from sklearn.datasets import make_blobs

    X, y = map(torch.as_tensor, make_blobs(200, centers=[[-2.0, 0.0], [2.0, 0.0]],
                                           cluster_std=0.3, random_state=seed))
    X = X.float()
    torch.manual_seed(seed)
    net = nn.Linear(2, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    for _ in range(100):
        opt.zero_grad()
        F.cross_entropy(net(X), y).backward()
        opt.step()
    assert float((net(X).argmax(1) == y).float().mean()) == 1.0
    target = 1 - y
    x_adv = pgd(net, X, target, eps=6.0, alpha=0.5, steps=30, targeted=True, bounds=None,
                generator=gen())
    assert bool((net(x_adv).argmax(1) == target).all())
    untargeted = pgd(net, X, y, eps=6.0, alpha=0.5, steps=30, bounds=None, generator=gen())
    assert bool((net(untargeted).argmax(1) != y).all())


@pytest.mark.parametrize("attack", ["fgsm", "pgd"])
def test_parameter_grad_is_untouched(attack):
    net = tiny_mlp()
    x, y = tiny_batch()
    net[0].weight.grad = torch.full_like(net[0].weight, 7.0)  # an existing gradient stays
    if attack == "fgsm":
        fgsm(net, x, y, 0.1)
    else:
        pgd(net, x, y, 0.1, 0.02, 5, restarts=2, generator=gen())
    assert bool((net[0].weight.grad == 7.0).all())
    assert all(p.grad is None for name, p in net.named_parameters() if name != "0.weight")


class ModeSpy(nn.Module):
    def __init__(self, fail: bool = False):
        super().__init__()
        self.net = tiny_mlp()
        self.dropout = nn.Dropout(0.5)
        self.fail = fail
        self.seen: list[bool] = []

    def forward(self, x):
        self.seen.append(self.training)
        if self.fail:
            raise RuntimeError("boom")
        return self.dropout(self.net(x))


def modes(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


def test_attacks_run_in_eval_mode_and_restore_mixed_modes():
    spy = ModeSpy()
    spy.train()
    spy.net[1].eval()  # a mixed configuration must come back as it was
    before = modes(spy)
    x, y = tiny_batch()
    pgd(spy, x, y, 0.1, 0.02, 3, generator=gen())
    assert spy.seen and not any(spy.seen)
    assert modes(spy) == before
    spy.seen.clear()
    pgd(spy, x, y, 0.1, 0.02, 3, generator=gen(), use_eval_mode=False)
    assert all(spy.seen)
    assert modes(spy) == before


def test_modes_are_restored_when_the_attack_raises():
    spy = ModeSpy(fail=True)
    spy.train()
    spy.dropout.eval()
    before = modes(spy)
    x, y = tiny_batch()
    with pytest.raises(RuntimeError, match="boom"):
        fgsm(spy, x, y, 0.1)
    assert modes(spy) == before
    with pytest.raises(RuntimeError, match="boom"), eval_mode(spy):
        spy(x)
    assert modes(spy) == before


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_restarts_are_never_worse_than_one_start(norm):
    net, X, y = trained_digits_mlp()
    eps = 0.1 if norm == "linf" else 0.8
    kw = {"eps": eps, "alpha": eps / 4, "steps": 5, "norm": norm}
    one = pgd(net, X, y, generator=gen(5), **kw)
    many = pgd(net, X, y, restarts=4, generator=gen(5), **kw)
    with torch.no_grad():
        loss_one = F.cross_entropy(net(one), y, reduction="none")
        loss_many = F.cross_entropy(net(many), y, reduction="none")
        fooled_one = net(one).argmax(1) != y
        fooled_many = net(many).argmax(1) != y
    assert bool((fooled_many | ~fooled_one).all())  # every success of one start is kept
    same = fooled_one == fooled_many
    assert bool((loss_many[same] >= loss_one[same] - 1e-6).all())
    assert int(fooled_many.sum()) > int(fooled_one.sum())  # and restarts find more here


def test_predict_is_the_argmax_in_eval_mode_without_a_graph():
    spy = ModeSpy()
    spy.train()
    spy.net[1].eval()
    before = modes(spy)
    x, _ = tiny_batch()
    pred = predict(spy, x)
    assert spy.seen == [False] and modes(spy) == before  # eval mode inside, modes restored
    with torch.no_grad():
        spy.eval()
        expected = spy(x).argmax(1)
    assert torch.equal(pred, expected) and pred.dtype == torch.long
    assert not pred.requires_grad
    assert torch.equal(predict(lambda v: torch.stack([v[:, 0], -v[:, 0]], 1), x),
                       (x[:, 0] < 0).long())  # a plain callable works too
    with pytest.raises(TypeError, match=r"predict: x must be a torch.Tensor, "
                                        r"got list"):
        predict(spy, [[0.0] * 6])


def test_same_generator_seed_gives_the_same_examples():
    net = tiny_mlp()
    x, y = tiny_batch()
    a = pgd(net, x, y, 0.1, 0.03, 3, restarts=2, generator=gen(9))
    b = pgd(net, x, y, 0.1, 0.03, 3, restarts=2, generator=gen(9))
    c = pgd(net, x, y, 0.1, 0.03, 3, restarts=2, generator=gen(10))
    assert torch.equal(a, b) and not torch.equal(a, c)


# --- the block -----------------------------------------------------------------------------


def adversarial_loss(net, x, y, norm, steps=4, restarts=1):
    eps = 0.1 if norm == "linf" else 0.5
    x_adv = pgd(net, x, y, eps, eps / 3, steps, norm=norm, restarts=restarts, generator=gen(1))
    return F.cross_entropy(net(x_adv), y)


def test_the_block_is_named_and_recorded():
    net = tiny_mlp()
    x, y = tiny_batch()
    with record_blocks() as names:
        pgd(net, x, y, 0.1, 0.02, 2, generator=gen())
        fgsm(net, x, y, 0.1)
    assert names == [BLOCK] == ["adversarial.examples"]
    with record_blocks() as names, disable_blocks(BLOCK):  # recorded when disabled, too
        fgsm(net, x, y, 0.1)
    assert names == [BLOCK]


def test_one_cut_in_the_package_source():
    # the only cut is as_constant(..., name=BLOCK); nothing cuts or reads the switch by hand
    package = Path(attacks_module.__file__).parent
    calls = []
    for path in sorted(package.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for forbidden in (".detach(", "is_block_disabled", "set_grad_enabled"):
            assert forbidden not in source, (path.name, forbidden)
        calls += [(path.name, node) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and getattr(node.func, "id", None)
                  in {"stop_gradient", "as_constant", "require_block"}]
    assert [(name, node.func.id) for name, node in calls] == [("attacks.py", "as_constant")]
    (name_kw,) = [kw.value for kw in calls[0][1].keywords if kw.arg == "name"]
    assert name_kw.id == "BLOCK"


@pytest.mark.parametrize("restarts", [1, 3])
def test_linf_sign_steps_add_no_gradient_but_l2_steps_do(restarts):
    # Inside disable_blocks(BLOCK) the parameter gradient also flows through the unrolled
    # attack: through sign steps that path carries exactly zero (sign has zero derivative), so
    # the gradient is unchanged; through L2 normalised steps it does not.
    net = tiny_mlp(dtype=torch.float64)
    x, y = tiny_batch(dtype=torch.float64)
    params = dict(net.named_parameters())
    linf = compare_gradients(lambda: adversarial_loss(net, x, y, "linf", restarts=restarts),
                             params, disable=(BLOCK,))
    assert linf.overall.rel_diff < 1e-12  # sign() has zero derivative: exactly the same
    l2 = compare_gradients(lambda: adversarial_loss(net, x, y, "l2", restarts=restarts),
                           params, disable=(BLOCK,))
    assert l2.overall.rel_diff > 1e-3
    assert 0.0 < l2.overall.cosine < 0.9999
    assert all(p.grad is None for p in net.parameters())


def test_unblocked_gradient_is_the_total_derivative_through_the_attack(seed: int):
    # θ ↦ L(θ, x_adv(θ)) with L2 steps, no projection active (large eps, no bounds): float64
    # finite differences of the whole unrolled attack must match the unblocked gradient.
    x, y = tiny_batch(n=4, d=3, k=2, dtype=torch.float64)
    torch.manual_seed(seed)
    W0 = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)

    def loss(W):
        model = lambda v: torch.tanh(v @ W.T)  # noqa: E731
        x_adv = pgd(model, x, y, 10.0, 0.3, 3, norm="l2", random_start=False, bounds=None)
        return F.cross_entropy(model(x_adv), y)

    with disable_blocks(*DISABLE):
        assert torch.autograd.gradcheck(loss, (W0,))
    # and with the block, x_adv is a constant: the gradient is ∂L/∂θ at fixed x_adv (Danskin)
    model = lambda v: torch.tanh(v @ W0.T)  # noqa: E731
    x_adv = pgd(model, x, y, 10.0, 0.3, 3, norm="l2", random_start=False, bounds=None)
    (g_blocked,) = torch.autograd.grad(loss(W0), W0)
    (g_fixed,) = torch.autograd.grad(F.cross_entropy(model(x_adv.clone()), y), W0)
    torch.testing.assert_close(g_blocked, g_fixed)


def test_audit_no_path_from_the_training_loss_into_the_attack_when_blocked():
    net = tiny_mlp()
    x, y = tiny_batch()
    clean_nodes = count_graph_nodes(F.cross_entropy(net(x), y))
    x_adv = pgd(net, x, y, 0.1, 0.03, 5, generator=gen())
    assert not x_adv.requires_grad
    for name, p in net.named_parameters():
        assert_blocked(x_adv, p, name)
    blocked_loss = F.cross_entropy(net(x_adv), y)
    assert count_graph_nodes(blocked_loss) == clean_nodes  # only the outer forward
    sizes = []
    for steps in (1, 5):
        with disable_blocks(*DISABLE):
            x_adv = pgd(net, x, y, 0.1, 0.03, steps, generator=gen())
        assert all(has_gradient_path(x_adv, p) for p in net.parameters())
        sizes.append(count_graph_nodes(F.cross_entropy(net(x_adv), y)))
    assert clean_nodes < sizes[0] < sizes[1]  # the unrolled attack grows with the steps


def test_unblocked_attack_under_no_grad_keeps_no_graph():
    net = tiny_mlp()
    x, y = tiny_batch()
    with disable_blocks(*DISABLE), torch.no_grad():
        x_adv = pgd(net, x, y, 0.1, 0.03, 3, generator=gen())
    assert not x_adv.requires_grad


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"eps": -0.1}, r"pgd: eps must be a number > 0, got -0.1"),
    ({"eps": 0.0}, r"pgd: eps must be a number > 0, got 0.0"),
    ({"alpha": 0}, r"pgd: alpha must be a number > 0, got 0"),
    ({"steps": 0}, r"pgd: steps must be an int >= 1, got 0"),
    ({"restarts": 0}, r"pgd: restarts must be an int >= 1, got 0"),
    ({"norm": "l1"}, r"pgd: norm must be one of 'linf', 'l2', got 'l1'"),
    ({"bounds": (1, 0)}, r"pgd: bounds must satisfy lo < hi, got \(1, 0\)"),
    ({"bounds": "ab"}, r"pgd: bounds must be None or a pair"),
    ({"x": torch.full((10, 6), 1.5)}, r"pgd: x must lie within bounds \(0.0, 1.0\), got "
                                      r"values in \[1.5, 1.5\]"),
    ({"y": torch.zeros(9, dtype=torch.long)}, r"pgd: y must have shape \(10,\) to match x of "
                                              r"shape \(10, 6\), got \(9,\)"),
    ({"y": torch.zeros(10, 1, dtype=torch.long)}, r"pgd: y must have shape \(10,\)"),
    ({"loss_fn": lambda z, t: F.cross_entropy(z, t)},
     r"pgd: loss_fn must return per-example losses of shape \(10,\) \(use reduction='none'\)"),
])
def test_pgd_rejects_bad_input(kwargs, match):
    net = tiny_mlp()
    x, y = tiny_batch()
    args = {"x": x, "y": y, "eps": 0.1, "alpha": 0.02, "steps": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        pgd(net, args.pop("x"), args.pop("y"), args.pop("eps"), args.pop("alpha"),
            args.pop("steps"), **args)


def test_fgsm_and_type_errors():
    net = tiny_mlp()
    x, y = tiny_batch()
    with pytest.raises(ValueError, match=r"fgsm: eps must be a number > 0, got -1"):
        fgsm(net, x, y, -1)
    with pytest.raises(ValueError, match=r"fgsm: x must lie within bounds"):
        fgsm(net, x - 1, y, 0.1)
    with pytest.raises(TypeError, match=r"pgd: eps must be a number > 0, got '0.1'"):
        pgd(net, x, y, "0.1", 0.1, 1)
    with pytest.raises(TypeError, match=r"pgd: x must be a floating-point tensor"):
        pgd(net, x.long(), y, 0.1, 0.1, 1)
    with pytest.raises(TypeError, match=r"pgd: generator must be None or a torch.Generator, got 0"):
        pgd(net, x, y, 0.1, 0.1, 1, generator=0)


# --- an independent attacker -------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("torchattacks") is None,
                    reason="torchattacks is not installed (pip install '.[bench]')")
def test_pgd_agrees_with_torchattacks(seed: int):
    import torchattacks

    net, X, y = trained_digits_mlp()
    eps, alpha, steps = 0.1, 0.01, 10
    # Same settings without random start: the iterates are identical. In float64: each step
    # takes sign() of an input gradient that the two implementations sum in their own orders,
    # and in float32 a component within rounding of zero may take either sign on another CPU
    # (under ATEN_CPU_CAPABILITY=default one of 25664 entries moved by 2 alpha); in float64 the
    # signs agree unless a component is within ~1e-16 of its summands' size.
    net64, X64 = copy.deepcopy(net).double(), X.double()
    ref = torchattacks.PGD(net64, eps=eps, alpha=alpha, steps=steps, random_start=False)(X64, y)
    ours = pgd(net64, X64, y, eps, alpha, steps, random_start=False)
    torch.testing.assert_close(ours, ref)
    # With random starts (from different generators) the robust accuracies agree within 0.02.
    torch.manual_seed(seed)
    ref = torchattacks.PGD(net, eps=eps, alpha=alpha, steps=steps, random_start=True)(X, y)
    ours = pgd(net, X, y, eps, alpha, steps, random_start=True, generator=gen(1))
    with torch.no_grad():
        acc_ref = float((net(ref).argmax(1) == y).float().mean())
        acc_ours = float((net(ours).argmax(1) == y).float().mean())
    assert abs(acc_ref - acc_ours) <= 0.02
    assert acc_ours < 0.7  # the attack does bite


def test_doctests():
    for module in (attacks_module, importlib.import_module("toolkit.algorithms.adversarial.training")):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_defaults_are_torchattacks_defaults():
    # PGD(model, eps=8/255, alpha=2/255, steps=10, random_start=True) and FGSM(model, eps=8/255)
    signature = inspect.signature(pgd).parameters
    assert (signature["eps"].default, signature["alpha"].default, signature["steps"].default,
            signature["random_start"].default) == (8 / 255, 2 / 255, 10, True)
    assert inspect.signature(fgsm).parameters["eps"].default == 8 / 255
    net = tiny_mlp(dtype=torch.float64)
    x, y = tiny_batch(dtype=torch.float64)
    torch.testing.assert_close(pgd(net, x, y, generator=gen(4)),
                               pgd(net, x, y, 8 / 255, 2 / 255, 10, generator=gen(4)))
    torch.testing.assert_close(fgsm(net, x, y), fgsm(net, x, y, 8 / 255))
    assert float((pgd(net, x, y, generator=gen(4)) - x).abs().max()) <= 8 / 255 + 1e-12


@pytest.mark.skipif(importlib.util.find_spec("torchattacks") is None,
                    reason="torchattacks is not installed (pip install '.[bench]')")
def test_defaults_match_the_installed_torchattacks():
    import torchattacks

    ours = inspect.signature(pgd).parameters
    theirs = inspect.signature(torchattacks.PGD.__init__).parameters
    for name in ("eps", "alpha", "steps", "random_start"):
        assert ours[name].default == theirs[name].default, name
    assert (inspect.signature(fgsm).parameters["eps"].default
            == inspect.signature(torchattacks.FGSM.__init__).parameters["eps"].default)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("attack", [pgd, fgsm])
def test_nan_and_inf_inputs_are_rejected(attack, bad):
    net = tiny_mlp()
    x, y = tiny_batch()
    x[3, 2] = bad
    name = attack.__name__
    with pytest.raises(ValueError, match=rf"{name}: x contains NaN or infinity; remove or impute"):
        attack(net, x, y, 0.1)
    with pytest.raises(ValueError, match=rf"{name}: eps must be a number > 0, got {bad}"):
        attack(net, tiny_batch()[0], y, bad)  # a non-finite radius, too


@pytest.mark.parametrize("attack", [pgd, fgsm])
def test_labels_out_of_range_are_rejected_at_the_first_model_call(attack):
    calls = []

    def model(v):
        calls.append(v.shape[0])
        return torch.stack([v[:, 0], v[:, 1], -v[:, 0]], 1)  # 3 logits

    x, _ = tiny_batch()
    name = attack.__name__
    with pytest.raises(ValueError, match=rf"{name}: y holds the label 3, but the model gives 3 "
                                         r"logits; labels must lie in \[0, 2\]"):
        attack(model, x, torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1, 2]), 0.1)
    assert calls == [10]  # found at the first call, before any loss or step
    calls.clear()
    with pytest.raises(ValueError, match=rf"{name}: y must hold class labels >= 0, got -1"):
        attack(model, x, torch.tensor([0, 1, 2, -1, 0, 1, 2, 0, 1, 2]), 0.1)
    assert calls == []  # negative labels need no model call
    # soft (float) targets with a custom loss are not class labels: no range check
    soft = torch.softmax(torch.randn(10, 3), 1)
    loss = lambda z, t: torch.nn.functional.cross_entropy(z, t, reduction="none")  # noqa: E731
    assert attack(model, x, soft, 0.1, loss_fn=loss).shape == x.shape
