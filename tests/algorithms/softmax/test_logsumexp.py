"""logsumexp with scipy's weights b and return_sign, against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import torch

from toolkit.algorithms.softmax import logsumexp

INF = math.inf


# ------------------------------------------------------------------------------------------
# logsumexp weights b: scipy semantics


def lse_atol(x: np.ndarray, b: np.ndarray, axis) -> np.ndarray:
    """The absolute error a float64 log Σ b·eˣ can carry, whatever the summation order: a few
    ulp of max|x| (the shift) plus a few ulp times the sum's condition number
    Σ|b|eˣ / |Σ b eˣ| (signed weights can cancel, and the log turns the sum's relative error
    into an absolute one). Near-cancelling draws get a wider tolerance; others keep 1e-12."""
    m = np.max(x, axis=axis, keepdims=True)
    e = np.broadcast_to(b, np.broadcast_shapes(b.shape, x.shape)) * np.exp(x - m)
    with np.errstate(divide="ignore", invalid="ignore"):  # an exact zero sum: log is -inf
        cond = np.abs(e).sum(axis=axis) / np.abs(e.sum(axis=axis))
    cond = np.where(np.isfinite(cond), cond, 0.0)
    eps = np.finfo(np.float64).eps
    return 8 * eps * (cond + np.abs(m).max())


def assert_close_to(actual: np.ndarray, expected: np.ndarray, atol: np.ndarray) -> None:
    ok = np.isclose(actual, expected, rtol=1e-12, atol=atol, equal_nan=True)
    assert ok.all(), f"{actual[~ok]} != {expected[~ok]} (atol {atol[~ok]})"


@pytest.mark.parametrize("b", [
    [1.0, 2.0, 0.5, 3.0],               # positive weights
    [1.0, -1.0, 0.5, 0.0],              # signed, with a zero weight
    [[1.0], [-1.0], [2.0]],             # broadcast along rows
    [-1.0, -2.0, -0.5, -3.0],           # all negative: negative sum
])
@pytest.mark.parametrize("return_sign", [False, True])
def test_logsumexp_b_matches_scipy(b, return_sign):
    x = 3 * torch.randn(3, 4, dtype=torch.float64)
    bt = torch.tensor(b, dtype=torch.float64)
    ours = logsumexp(x, -1, b=bt, return_sign=return_sign)
    theirs = scipy.special.logsumexp(x.numpy(), axis=-1, b=bt.numpy(), return_sign=return_sign)
    atol = lse_atol(x.numpy(), bt.numpy(), -1)
    if return_sign:
        assert_close_to(ours[0].numpy(), theirs[0], atol)
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1])
    else:
        assert_close_to(ours.numpy(), theirs, atol)


def test_logsumexp_b_broadcast_shape_and_dim_tuple():
    x = torch.randn(4, 1, 5, dtype=torch.float64)
    b = torch.rand(3, 1, dtype=torch.float64) + 0.1
    out = logsumexp(x, (0, 2), b=b)
    assert out.shape == (3,)
    np.testing.assert_allclose(out.numpy(), scipy.special.logsumexp(
        x.numpy(), axis=(0, 2), b=b.numpy()), rtol=1e-12,
        atol=8 * np.finfo(np.float64).eps * float(x.abs().max() + 1))


def test_logsumexp_b_zero_excludes_inf_and_nan_like_scipy():
    x = torch.tensor([[INF, 1.0, 2.0], [math.nan, 1.0, 2.0]], dtype=torch.float64)
    b = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
    expected = scipy.special.logsumexp(x.numpy(), axis=1, b=b.numpy())
    np.testing.assert_allclose(logsumexp(x, 1, b=b).numpy(), expected)
    assert np.isfinite(expected).all()


def test_logsumexp_exact_cancellation_gives_minus_inf_and_sign_zero():
    x = torch.tensor([2.0, 2.0], dtype=torch.float64)
    out, sign = logsumexp(x, b=torch.tensor([1.0, -1.0], dtype=torch.float64), return_sign=True)
    assert out.item() == -INF and sign.item() == 0.0


def test_logsumexp_b_gradient_closed_form():
    x = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    b = (torch.rand(2, 5, dtype=torch.float64) + 0.2).requires_grad_()
    gx, gb = torch.autograd.grad(logsumexp(x, -1, b=b).sum(), (x, b))
    total = (b * x.exp()).sum(-1, keepdim=True)
    torch.testing.assert_close(gx, (b * x.exp() / total).detach())
    torch.testing.assert_close(gb, (x.exp() / total).detach())


def test_logsumexp_plus_inf_rows():
    x = torch.tensor([[INF, 0.0], [INF, INF], [1.0, 2.0]], dtype=torch.float64)
    out = logsumexp(x, 1)
    torch.testing.assert_close(out, torch.logsumexp(x, 1))
    b = torch.tensor([[-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    ours_val, ours_sign = logsumexp(x, 1, b=b, return_sign=True)
    assert ours_val[0].item() == INF and ours_sign[0].item() == -1.0  # -inf term dominates
    assert math.isnan(ours_val[1].item())  # inf - inf
    assert math.isnan(logsumexp(x, 1, b=b)[0].item())  # negative without return_sign
    np.testing.assert_allclose(ours_val[2].item(), scipy.special.logsumexp([1.0, 2.0]))


