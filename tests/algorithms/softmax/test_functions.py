"""Tests for toolkit.algorithms.softmax against torch, scipy, closed forms and gradcheck."""

from __future__ import annotations

import ast
import contextlib
import doctest
import inspect
import math

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import toolkit.algorithms.softmax.functions as softmax_module
from toolkit import (
    BlockNotSwitchableError,
    compare_gradients,
    disable_blocks,
    has_gradient_path,
    record_blocks,
)
from toolkit.algorithms.softmax import log_softmax, logsumexp, naive_softmax, stable_softmax
from toolkit.lens.gradients import count_graph_nodes

INF = math.inf
IMPLS = ["reference", "fused"]


def _graph_names(output: torch.Tensor) -> set[str]:
    names, stack, seen = set(), [output.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # kept alive: a freed node's id can be reused by another
        names.add(type(node).__name__)
        stack.extend(n for n, _ in node.next_functions)
    return names


def _tied(n_rows: int, n_cols: int, *, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    """Rows whose maximum is attained 2-4 times."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_rows, n_cols, generator=g, dtype=torch.float64)
    for i in range(n_rows):
        k = 2 + i % 3
        cols = torch.randperm(n_cols, generator=g)[:k]
        x[i, cols] = x[i].max() + 1.0
    return x.to(dtype)


# ------------------------------------------------------------------------------------------
# values against torch and scipy


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("ours, theirs", [(stable_softmax, torch.softmax),
                                          (log_softmax, torch.log_softmax)])
def test_matches_torch(ours, theirs, dim, dtype, impl):
    x = 5 * torch.randn(3, 4, 7, dtype=dtype)
    torch.testing.assert_close(ours(x, dim, impl=impl), theirs(x, dim))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dim", [(0, 2), (1, 2), (0, 1, 2), (-1, 0)])
def test_tuple_dims_match_scipy(dim, impl):
    x = 10 * torch.randn(3, 4, 5, dtype=torch.float64)
    expected = scipy.special.softmax(x.numpy(), axis=tuple(d % 3 for d in dim))
    np.testing.assert_allclose(stable_softmax(x, dim, impl=impl).numpy(), expected, rtol=1e-12)
    # log_softmax = x − logsumexp(x) is a difference of terms of size max|x|: near 0 only its
    # absolute error is bounded (a few ulp of max|x|), not its relative error
    atol = 8 * np.finfo(np.float64).eps * float(x.abs().max())
    np.testing.assert_allclose(log_softmax(x, dim, impl=impl).numpy(),
                               scipy.special.log_softmax(x.numpy(), axis=dim), rtol=1e-12,
                               atol=atol)
    np.testing.assert_allclose(logsumexp(x, dim).numpy(),
                               scipy.special.logsumexp(x.numpy(), axis=dim), rtol=1e-12,
                               atol=atol)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1, (0, 1)])
def test_logsumexp_matches_torch(dim, keepdim):
    x = 30 * torch.randn(4, 6, 3, dtype=torch.float64)
    torch.testing.assert_close(logsumexp(x, dim, keepdim=keepdim),
                               torch.logsumexp(x, dim, keepdim=keepdim))


def test_zero_dim_input():
    x = torch.tensor(3.0)
    assert stable_softmax(x, 0).item() == 1.0
    assert log_softmax(x, -1).item() == 0.0
    assert logsumexp(x, 0).item() == 3.0


def test_large_logits_do_not_overflow():
    x = torch.tensor([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4 - 2.0, -1e4 - 3.0]])
    y = stable_softmax(x)
    torch.testing.assert_close(y, torch.softmax(x.double(), -1).float())
    torch.testing.assert_close(logsumexp(x), torch.logsumexp(x.double(), -1).float())
    assert torch.isnan(naive_softmax(x)).any(-1).all()  # every row broken


def test_numpy_and_list_inputs():
    a = np.array([[0.5, -1.0, 2.0]])
    torch.testing.assert_close(stable_softmax(a), torch.softmax(torch.as_tensor(a), -1))
    torch.testing.assert_close(logsumexp([1.0, 2.0]),
                               torch.tensor(scipy.special.logsumexp([1.0, 2.0]),
                                            dtype=torch.float32))


# ------------------------------------------------------------------------------------------
# gradients: gradcheck, Jacobian, closed forms


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
@pytest.mark.parametrize("dim", [-1, (0, 2)])
def test_gradcheck_and_gradgradcheck(fn, dim, impl, seed: int):
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 3, 4, generator=torch.Generator().manual_seed(seed + 1)) > 0.3
    assert torch.autograd.gradcheck(lambda t: fn(t, dim, impl=impl), (x,))
    assert torch.autograd.gradgradcheck(lambda t: fn(t, dim, impl=impl), (x,))
    # with a mask, only the kept entries: masked outputs are constants (0 or -inf)
    assert torch.autograd.gradcheck(
        lambda t: torch.where(mask, fn(t, dim, where=mask, impl=impl), 0.0), (x,))


def test_gradcheck_logsumexp_with_weights():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = (torch.rand(3, 4, dtype=torch.float64) + 0.1).requires_grad_()
    assert torch.autograd.gradcheck(lambda t, w: logsumexp(t, -1, b=w), (x, b))
    assert torch.autograd.gradgradcheck(lambda t: logsumexp(t, (0, 1)), (x,))


@pytest.mark.parametrize("impl", IMPLS)
def test_jacobian_is_diag_minus_outer(impl):
    x = torch.randn(6, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda t: stable_softmax(t, impl=impl), x)
    y = torch.softmax(x, 0)
    torch.testing.assert_close(jac, torch.diag(y) - torch.outer(y, y), rtol=0, atol=1e-15)


@pytest.mark.parametrize("impl", IMPLS)
def test_vjp_matches_torch(impl):
    x = (20 * torch.randn(5, 9)).requires_grad_()
    g = torch.randn(5, 9)
    for ours, theirs in [(stable_softmax, torch.softmax), (log_softmax, torch.log_softmax)]:
        (ga,) = torch.autograd.grad(ours(x, 1, impl=impl), x, g)
        (gb,) = torch.autograd.grad(theirs(x, 1), x, g)
        torch.testing.assert_close(ga, gb)


# ------------------------------------------------------------------------------------------
# hypothesis properties

_rows = arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 6)),
               elements=st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False))


@settings(max_examples=40, deadline=None)
@given(_rows)
def test_property_sums_to_one_and_finite(a):
    x = torch.as_tensor(a)
    y = stable_softmax(x)
    assert torch.isfinite(y).all() and (y >= 0).all()
    torch.testing.assert_close(y.sum(-1), torch.ones(x.shape[0], dtype=x.dtype))
    assert torch.isfinite(log_softmax(x)).all()
    assert torch.isfinite(logsumexp(x)).all()
    x32 = x.float().requires_grad_()
    (g,) = torch.autograd.grad((stable_softmax(x32) * torch.arange(x.shape[1])).sum(), x32)
    assert torch.isfinite(g).all()


@settings(max_examples=40, deadline=None)
@given(_rows.filter(lambda a: np.abs(a).max() <= 1e3), st.floats(-1e3, 1e3))
def test_property_shift_invariance(a, c):
    x = torch.as_tensor(a)
    torch.testing.assert_close(stable_softmax(x + c), stable_softmax(x), rtol=0, atol=1e-9)
    torch.testing.assert_close(logsumexp(x + c), logsumexp(x) + c, rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(_rows, st.data())
def test_property_masked_rows(a, data):
    x = torch.as_tensor(a).requires_grad_()
    mask = torch.as_tensor(data.draw(arrays(np.bool_, a.shape)))
    y = stable_softmax(x, where=mask)
    assert (y[~mask] == 0).all()
    full = mask.any(-1)
    torch.testing.assert_close(y.sum(-1)[full], torch.ones(int(full.sum()), dtype=x.dtype))
    assert (y[~full] == 0).all()
    (g,) = torch.autograd.grad((y * torch.linspace(-1, 1, a.shape[1])).sum(), x)
    assert torch.isfinite(g).all() and (g[~mask] == 0).all()
    kept = torch.where(mask, x, -INF).detach()
    expected = torch.where(full[:, None], torch.softmax(kept, -1), 0.0)
    torch.testing.assert_close(y.detach(), expected.nan_to_num(0.0))


# ------------------------------------------------------------------------------------------
# where, inf, nan, dtype


@pytest.mark.parametrize("impl", IMPLS)
def test_where_masked_entries_and_fully_masked_row(impl):
    x = torch.tensor([[1.0, INF, 2.0], [math.nan, 3.0, -INF]], requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    y = stable_softmax(x, where=mask, impl=impl)
    torch.testing.assert_close(y.detach(), torch.tensor([[1 / (1 + math.e), 0.0, math.e / (1 + math.e)],
                                                         [0.0, 0.0, 0.0]]))
    (g,) = torch.autograd.grad((y * torch.tensor([1.0, 2.0, 3.0])).sum(), x)
    assert torch.isfinite(g).all()
    assert (g[1] == 0).all() and g[0, 1] == 0
    lsm = log_softmax(x, where=mask, impl=impl)
    assert (lsm[1] == -INF).all() and lsm[0, 1] == -INF
    out = logsumexp(x, where=mask)
    assert out[1].item() == -INF
    (g,) = torch.autograd.grad(out[0], x)
    assert torch.isfinite(g).all() and (g[1] == 0).all()


def test_where_broadcasts():
    x = torch.randn(4, 5)
    mask = torch.tensor([True, False, True, True, False])
    y = stable_softmax(x, where=mask)
    torch.testing.assert_close(y[:, mask], torch.softmax(x[:, mask], -1))
    torch.testing.assert_close(logsumexp(x, where=mask), torch.logsumexp(x[:, mask], -1))


@pytest.mark.parametrize("impl", IMPLS)
def test_all_minus_inf_row_gives_zeros_not_nan(impl):
    x = torch.tensor([[-INF, -INF], [0.0, -INF]], requires_grad=True)
    y = stable_softmax(x, impl=impl)
    torch.testing.assert_close(y.detach(), torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    (g,) = torch.autograd.grad((y * torch.tensor([1.0, 2.0])).sum(), x)
    assert torch.isfinite(g).all() and (g[0] == 0).all()
    assert logsumexp(x)[0].item() == -INF


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_plus_inf_makes_the_row_nan_like_torch(fn, impl):
    x = torch.tensor([[INF, 0.0, 1.0], [INF, INF, 0.0], [0.0, 1.0, 2.0]])
    y = fn(x, impl=impl)
    assert torch.isnan(y[:2]).all()
    assert torch.isfinite(y[2]).all()
    assert torch.isnan(torch.softmax(x, -1)[:2]).all()  # the behaviour we match


def test_nan_propagates_to_its_row():
    x = torch.tensor([[math.nan, 0.0], [1.0, 0.0]])
    assert torch.isnan(stable_softmax(x)[0]).all() and torch.isfinite(stable_softmax(x)[1]).all()
    assert torch.isnan(logsumexp(x)[0])


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
def test_dtype_upcast_like_torch(low):
    x = (8 * torch.randn(3, 50)).to(low)
    y = stable_softmax(x, dtype=torch.float32)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.softmax(x, -1, dtype=torch.float32))
    torch.testing.assert_close(log_softmax(x, dtype=torch.float32),
                               torch.log_softmax(x, -1, dtype=torch.float32))
    assert stable_softmax(x).dtype == low
    torch.testing.assert_close(stable_softmax(x).float(), y, rtol=0, atol=2e-2)
    assert stable_softmax(torch.arange(3), dtype=torch.float64).dtype == torch.float64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    x = torch.randn(8, 100, dtype=torch.float64)
    mask = torch.rand(8, 100) > 0.2
    torch.testing.assert_close(stable_softmax(x.cuda(), where=mask.cuda()).cpu(),
                               stable_softmax(x, where=mask))
    torch.testing.assert_close(logsumexp(x.cuda(), b=x.cuda().abs()).cpu(), logsumexp(x, b=x.abs()))


# ------------------------------------------------------------------------------------------
# naive softmax


def test_naive_matches_at_small_scale_and_fails_past_log_max():
    x = torch.randn(4, 8, dtype=torch.float64)
    torch.testing.assert_close(naive_softmax(x), torch.softmax(x, -1))
    log_max = math.log(torch.finfo(torch.float32).max)  # 88.7228...
    ok = torch.tensor([log_max - 0.01, 0.0])
    bad = torch.tensor([log_max + 0.01, 0.0])
    assert torch.isfinite(naive_softmax(ok)).all()
    assert not torch.isfinite(naive_softmax(bad)).all()
    assert torch.isfinite(stable_softmax(bad)).all()
    assert not torch.isfinite(naive_softmax(torch.tensor([12.0, 0.0], dtype=torch.float16))).all()
    assert torch.isfinite(naive_softmax(torch.tensor([11.0, 0.0], dtype=torch.float16))).all()


# ------------------------------------------------------------------------------------------
# the block: blocked vs unblocked gradients, audit, fused path


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("dim", [-1, (0, 1)])
@pytest.mark.parametrize("fn", [stable_softmax, log_softmax, logsumexp])
def test_blocked_equals_unblocked_float64(fn, dim, tied):
    x = (_tied(6, 9) if tied else 30 * torch.randn(6, 9, dtype=torch.float64)).requires_grad_()
    w = torch.randn(6, 9, dtype=torch.float64)
    reduced = fn is logsumexp

    def loss():
        out = fn(x, dim)
        return out.sum() if reduced else (w * out).sum()

    ref_x = x.detach().clone().requires_grad_()
    ref = {"softmax": torch.softmax, "log_softmax": torch.log_softmax}
    cmp = compare_gradients(loss, x, disable=("softmax.*",))
    assert cmp.overall.max_abs_diff <= 1e-12
    assert cmp.overall.norm_blocked > 0
    if dim == -1:
        torch_fn = torch.logsumexp if reduced else ref[fn.__name__.replace("stable_", "")]
        out = torch_fn(ref_x, -1)
        (g_ref,) = torch.autograd.grad(out.sum() if reduced else (w * out).sum(), ref_x)
        torch.testing.assert_close(cmp.blocked["param"], g_ref, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(cmp.unblocked["param"], g_ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("tied", [False, True])
def test_blocked_equals_unblocked_float32_few_ulp(tied):
    x = (_tied(16, 33, dtype=torch.float32) if tied else 5 * torch.randn(16, 33)).requires_grad_()
    w = torch.randn(16, 33)
    cmp = compare_gradients(lambda: (w * stable_softmax(x)).sum(), x, disable=("softmax.*",))
    g_b, g_u = cmp.blocked["param"], cmp.unblocked["param"]
    # the max branch adds -sum_j dz_j (zero in exact arithmetic) to the argmax entries; dz_j is
    # a difference of terms of size |w_j| y_j, so the rounding left over is a few ulp of
    # sum_j |w_j| y_j, the magnitude of what cancels
    y = torch.softmax(x.detach().double(), -1)
    scale = (w.double().abs() * y).sum(-1, keepdim=True).float()
    ulp = torch.finfo(torch.float32).eps * scale
    assert ((g_b - g_u).abs() <= 8 * ulp).all()
    assert (g_b - g_u).abs().max() > 0 or tied  # rounding shows up (it is not the same graph)


def test_unblocked_ties_split_the_max_gradient_but_it_cancels():
    # the max branch alone gets a gradient split among tied maxima; the total is unchanged
    x = torch.tensor([[2.0, 2.0, 0.0]], dtype=torch.float64, requires_grad=True)
    with disable_blocks("softmax.*"):
        _, m = softmax_module._shifted(x, (1,))
    (g_m,) = torch.autograd.grad(m.sum(), x)
    torch.testing.assert_close(g_m, torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64))


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax, logsumexp])
def test_audit_block_present_when_blocked_absent_when_disabled(fn):
    x = torch.randn(3, 5, requires_grad=True)
    with record_blocks() as names:
        blocked = fn(x)
    assert names == ["softmax.max"]
    with disable_blocks("softmax.*"):
        unblocked = fn(x)
    assert "AmaxBackward0" not in _graph_names(blocked)
    assert "AmaxBackward0" in _graph_names(unblocked)
    assert count_graph_nodes(blocked) < count_graph_nodes(unblocked)
    # the shifted max itself: no gradient path from z to m when blocked
    z, m = softmax_module._shifted(x, (1,))
    assert not m.requires_grad and not has_gradient_path(z, m)
    with disable_blocks("softmax.max"):
        z, m = softmax_module._shifted(x, (1,))
    assert has_gradient_path(z, m)


def test_blocked_graph_does_not_keep_the_input_alive():
    # the max's graph is not even recorded when the block is active: nothing saves x
    x = torch.randn(4, 6, requires_grad=True)
    saved: list[bool] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.data_ptr() == x.data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stable_softmax(x)
        assert not any(saved)
        with disable_blocks("softmax.*"):
            stable_softmax(x)
        assert any(saved)  # amax's backward needs x


def test_reference_graph_sizes():
    x = torch.randn(3, 5, requires_grad=True)
    # blocked: Sub, Exp, Sum, MaskedFill, Reciprocal, Mul + AccumulateGrad
    assert count_graph_nodes(stable_softmax(x)) == 7
    with disable_blocks("softmax.*"):
        # + Amax, MaskedFill on the max
        assert count_graph_nodes(stable_softmax(x)) == 9
    # log_softmax: Sub, Exp, Sum, MaskedFill, Log, Neg, Add + AccumulateGrad
    assert count_graph_nodes(log_softmax(x)) == 8


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_fused_equals_reference(fn, seed: int):
    x = (10 * _tied(7, 11)).requires_grad_()
    mask = torch.rand(7, 11, generator=torch.Generator().manual_seed(seed + 3)) > 0.25
    mask[2] = False
    w = torch.randn(7, 11, dtype=torch.float64)
    outs, grads = [], []
    for impl in IMPLS:
        out = fn(x, where=mask, impl=impl)
        loss = (w * torch.where(mask, out, 0.0)).sum()
        outs.append(out.detach())
        grads.append(torch.autograd.grad(loss, x)[0])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-15)
    # the fused path has no graph through the max: one node, and it refuses to run unblocked
    assert count_graph_nodes(fn(x, impl="fused")) == 2


@pytest.mark.parametrize("pattern", ["softmax.max", "softmax.*", None])
@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_fused_refuses_to_run_without_the_block(fn, pattern):
    x = torch.randn(3, 4, requires_grad=True)
    patterns = () if pattern is None else (pattern,)
    with record_blocks() as names, disable_blocks(*patterns), pytest.raises(
            BlockNotSwitchableError,
            match=rf"{fn.__name__}\(impl='fused'\): the block 'softmax.max' cannot be switched "
                  r"off here \(its analytic backward has no path through the max; use "
                  r"impl='reference'"):
        fn(x, impl="fused")
    assert names == ["softmax.max"]
    with disable_blocks(*patterns):  # the reference path runs without the block
        assert "AmaxBackward0" in _graph_names(fn(x, impl="reference"))


def test_does_not_modify_its_input():
    x = torch.randn(4, 6)
    before = x.clone()
    for impl in IMPLS:
        stable_softmax(x, impl=impl)
        log_softmax(x, impl=impl)
    logsumexp(x, b=torch.ones(6))
    assert torch.equal(x, before)


def test_single_named_block_and_no_hand_made_cut_in_module_source():
    assert softmax_module.BLOCK == "softmax.max"
    source = inspect.getsource(softmax_module)
    cuts = {"stop_gradient", "as_constant", "require_block"}
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
             and getattr(node.func, "id", getattr(node.func, "attr", None)) in cuts]
    # one cut (as_constant) and the fused paths' refusal (require_block), both on BLOCK
    assert sorted(c.func.id for c in calls) == ["as_constant", "require_block"]
    for call in calls:
        named = [kw.value for kw in call.keywords if kw.arg == "name"] or call.args[:1]
        assert [getattr(v, "id", None) for v in named] == ["BLOCK"]
    for forbidden in (".detach(", "is_block_disabled", "set_grad_enabled"):
        assert forbidden not in source


def test_doctests():
    result = doctest.testmod(softmax_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_torch_compile_fullgraph_blocked_and_unblocked():
    compiled = torch.compile(lambda t: stable_softmax(t, where=t > -2.0), backend="eager",
                             fullgraph=True)
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 7, dtype=torch.float64)
    expected = torch.autograd.grad((w * stable_softmax(x, where=x > -2.0)).sum(), x)[0]
    (g_b,) = torch.autograd.grad((w * compiled(x)).sum(), x)
    with disable_blocks("softmax.*"):
        out = compiled(x)
        assert "AmaxBackward0" in _graph_names(out)
        (g_u,) = torch.autograd.grad((w * out).sum(), x)
    assert "AmaxBackward0" not in _graph_names(compiled(x))
    torch.testing.assert_close(g_b, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_u, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("fn, theirs", [(stable_softmax, torch.softmax),
                                        (log_softmax, torch.log_softmax)])
def test_torch_func_transforms_blocked_and_unblocked(fn, theirs):
    # as_constant inside torch.func: reverse mode (grad, jacrev), forward mode (jvp) and vmap
    x = 4 * torch.randn(3, 6, dtype=torch.float64)
    w = torch.randn(3, 6, dtype=torch.float64)
    t = torch.randn(3, 6, dtype=torch.float64)
    expected = torch.func.grad(lambda v: (w * theirs(v, -1)).sum())(x)
    _, expected_jvp = torch.func.jvp(lambda v: theirs(v, -1), (x,), (t,))
    expected_jac = torch.func.jacrev(lambda v: theirs(v, -1))(x[0])
    for blocks in (contextlib.nullcontext(), disable_blocks("softmax.max")):
        with blocks:
            g = torch.func.grad(lambda v: (w * fn(v)).sum())(x)
            _, jvp = torch.func.jvp(fn, (x,), (t,))
            jac = torch.func.vmap(torch.func.jacrev(fn))(x)
        torch.testing.assert_close(g, expected, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(jvp, expected_jvp, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(jac[0], expected_jac, rtol=1e-12, atol=1e-14)
