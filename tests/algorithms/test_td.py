"""TD learning with and without the target block, against closed forms and the textbook."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import torch

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms import td

F64 = torch.float64


@pytest.fixture(scope="module")
def chain() -> td.MarkovRewardProcess:
    return td.random_chain(6, 2, 0.8, generator=torch.Generator().manual_seed(1))


def test_chain_closed_forms_against_numpy(chain: td.MarkovRewardProcess) -> None:
    P, r, phi, d = (getattr(chain, k).numpy() for k in ("P", "r", "phi", "d"))
    assert np.allclose(P.sum(1), 1) and np.allclose(d @ P, d) and d.min() > 0
    V = chain.true_values().numpy()
    assert np.allclose(V, r + 0.8 * P @ V)  # Bellman equation
    # TD fixed point: the projected Bellman equation Φᵀ D (r + γPΦw − Φw) = 0
    w_td = chain.td_fixed_point().numpy()
    assert np.allclose(phi.T @ (d * (r + 0.8 * P @ phi @ w_td - phi @ w_td)), 0, atol=1e-12)
    # residual gradient and the best fit: weighted least squares solved by numpy's lstsq
    A = (np.eye(6) - 0.8 * P) @ phi
    sqrt_d = np.sqrt(d)[:, None]
    w_rg, *_ = np.linalg.lstsq(sqrt_d * A, sqrt_d[:, 0] * r, rcond=None)
    np.testing.assert_allclose(chain.residual_gradient_fixed_point().numpy(), w_rg, atol=1e-12)
    w_proj, *_ = np.linalg.lstsq(sqrt_d * phi, sqrt_d[:, 0] * V, rcond=None)
    np.testing.assert_allclose(chain.best_weights().numpy(), w_proj, atol=1e-12)
    assert chain.value_error(torch.as_tensor(w_proj)) <= min(
        chain.value_error(chain.td_fixed_point()),
        chain.value_error(chain.residual_gradient_fixed_point()))


def test_the_block_is_recorded_and_switching_it_gives_the_residual_gradient(
        chain: td.MarkovRewardProcess) -> None:
    w = torch.tensor([0.3, -1.2], dtype=F64, requires_grad=True)
    exact = chain.gradients(w.detach())
    with record_blocks() as seen:
        (g_blocked,) = torch.autograd.grad(chain.loss(w), w)
    assert seen == [td.BLOCK] == ["td.target"]
    with disable_blocks("td.*"):
        (g_unblocked,) = torch.autograd.grad(chain.loss(w), w)
    torch.testing.assert_close(g_blocked, exact["blocked"], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_unblocked, exact["unblocked"], rtol=1e-12, atol=1e-14)
    assert (g_blocked - g_unblocked).norm() > 0.05 * g_blocked.norm()


def test_the_expected_gradients_are_affine_in_w_as_autograd_finds_them(
        chain: td.MarkovRewardProcess) -> None:
    # M w − b against autograd at two points; M is the derivative of the gradient in w
    for point in ([0.3, -1.2], [-2.0, 0.7]):
        w = torch.tensor(point, dtype=F64, requires_grad=True)
        (g_blocked,) = torch.autograd.grad(chain.loss(w), w)
        with disable_blocks("td.target"):
            (g_unblocked,) = torch.autograd.grad(chain.loss(w), w)
        for g, (m, b) in zip((g_blocked, g_unblocked), chain.expected_gradients().values()):
            torch.testing.assert_close(m @ w.detach() - b, g, rtol=1e-12, atol=1e-14)


def test_gradient_descent_reaches_each_fixed_point(chain: td.MarkovRewardProcess) -> None:
    w0 = torch.zeros(2, dtype=F64)
    blocked = td.gradient_descent(chain.loss, w0, lr=0.5, n_steps=400)
    with disable_blocks("td.target"):
        unblocked = td.gradient_descent(chain.loss, w0, lr=0.5, n_steps=400)
    assert blocked.shape == (401, 2) and not blocked.requires_grad
    torch.testing.assert_close(blocked[-1], chain.td_fixed_point(), rtol=0, atol=1e-9)
    torch.testing.assert_close(unblocked[-1], chain.residual_gradient_fixed_point(), rtol=0,
                               atol=1e-9)


def test_a_split_closed_forms_are_the_books_values() -> None:
    table = td.a_split()
    names = list(td.A_SPLIT_TRUE_VALUES)
    truth = torch.tensor([td.A_SPLIT_TRUE_VALUES[k] for k in names], dtype=F64)
    naive = torch.tensor([td.A_SPLIT_NAIVE_RESIDUAL_VALUES[k] for k in names], dtype=F64)
    assert table.names == tuple(names) == ("A", "B", "C")
    assert truth.tolist() == [0.5, 1.0, 0.0] and naive.tolist() == [0.5, 0.75, 0.25]
    torch.testing.assert_close(table.td_fixed_point(1.0), truth, rtol=0, atol=1e-12)
    torch.testing.assert_close(table.naive_residual_fixed_point(1.0), naive, rtol=0, atol=1e-12)
    # the mean squared TD error by hand: ¼[(V_B − V_A)² + (V_C − V_A)² + (1 − V_B)² + V_C²]
    v = torch.tensor([0.2, 0.7, 0.4], dtype=F64)
    by_hand = 0.25 * ((0.7 - 0.2) ** 2 + (0.4 - 0.2) ** 2 + (1 - 0.7) ** 2 + 0.4**2) / 2
    assert float(table.loss(v, 1.0)) == pytest.approx(by_hand, rel=1e-14)


def test_a_split_blocked_finds_the_true_values_unblocked_the_naive_residual_ones() -> None:
    table = td.a_split()
    v0 = torch.zeros(3, dtype=F64)
    blocked = td.gradient_descent(lambda v: table.loss(v, 1.0), v0, lr=1.0, n_steps=300)[-1]
    with disable_blocks("td.*"):
        unblocked = td.gradient_descent(lambda v: table.loss(v, 1.0), v0, lr=1.0,
                                        n_steps=300)[-1]
    torch.testing.assert_close(blocked, torch.tensor([0.5, 1.0, 0.0], dtype=F64), rtol=0,
                               atol=1e-9)
    torch.testing.assert_close(unblocked, torch.tensor([0.5, 0.75, 0.25], dtype=F64), rtol=0,
                               atol=1e-9)


def test_baird_setup_is_the_books() -> None:
    mrp, w0 = td.baird_counterexample()
    assert mrp.phi.shape == (7, 8) and mrp.gamma == 0.99
    assert w0.tolist() == [1, 1, 1, 1, 1, 1, 10, 1]
    w = torch.arange(1.0, 9.0, dtype=F64)
    v = mrp.phi @ w  # upper states 2 w_i + w_8, lower state w_7 + 2 w_8
    assert v.tolist() == [2 * i + 8 for i in range(1, 7)] + [7 + 16]
    assert torch.linalg.matrix_rank(mrp.phi) == 7  # 8 weights, 7 states
    torch.testing.assert_close(mrp.true_values(), torch.zeros(7, dtype=F64))


def test_baird_semi_gradient_diverges_residual_gradient_converges() -> None:
    mrp, w0 = td.baird_counterexample()
    # the expected semi-gradient iteration w ← w + α (−ΦᵀDAΦ... ) has a growing mode for every
    # α > 0: −Φᵀ D (I − γP) Φ has an eigenvalue with positive real part
    M = -(mrp.phi.T @ torch.diag(mrp.d) @ (torch.eye(7, dtype=F64) - 0.99 * mrp.P) @ mrp.phi)
    assert torch.linalg.eigvals(M).real.max() > 0.2
    blocked = td.gradient_descent(mrp.loss, w0, lr=0.01, n_steps=1000).norm(dim=1)
    with disable_blocks("td.*"):
        path = td.gradient_descent(mrp.loss, w0, lr=0.01, n_steps=1000)
    unblocked = path.norm(dim=1)
    assert blocked[0] == pytest.approx(107**0.5)
    assert (blocked[100:].diff() > 0).all() and blocked[-1] > 40 * blocked[0]
    # growing by a factor per sweep (exponentially), not drifting
    assert (blocked[-100:] / blocked[-101:-1]).min() > 1.002 and blocked[-1] / blocked[500] > 4
    assert unblocked[-1] < unblocked[0] and (unblocked[-1] - unblocked[-100]).abs() < 1e-3
    assert mrp.msbe(path[-1]) < 1e-3 < mrp.msbe(path[0])


def test_argument_errors(chain: td.MarkovRewardProcess) -> None:
    v = torch.zeros(3)
    with pytest.raises(ValueError, match=r"td_errors: gamma must be a number in \[0, 1\], got 1.5"):
        td.td_errors(v, v, v, 1.5)
    with pytest.raises(ValueError, match=r"td_errors: next_values must have the shape of values "
                                         r"\(3,\), got \(2,\)"):
        td.td_errors(v, v, torch.zeros(2), 0.9)
    with pytest.raises(ValueError, match=r"td_loss: weights must have the shape of values"):
        td.td_loss(v, v, v, 0.9, weights=torch.ones(4))
    with pytest.raises(ValueError, match="td_loss: weights must be >= 0, got a minimum of -1"):
        td.td_loss(v, v, v, 0.9, weights=torch.tensor([1.0, -1.0, 0.0]))
    with pytest.raises(ValueError, match=r"TransitionTable.loss: values must have shape \(3,\) "
                                         r"\(one per state: A, B, C\), got \(4,\)"):
        td.a_split().loss(torch.zeros(4, dtype=F64), 1.0)
    with pytest.raises(ValueError, match="random_chain: n_states must be an int >= 2, got 1"):
        td.random_chain(1, 1, 0.9, generator=torch.Generator())
    with pytest.raises(TypeError, match=r"random_chain: generator must be a torch\.Generator"):
        td.random_chain(3, 1, 0.9, generator=0)
    with pytest.raises(ValueError, match=r"random_chain: gamma must be a number in \[0, 1\)"):
        td.random_chain(3, 1, 1.0, generator=torch.Generator())
    with pytest.raises(ValueError, match="gradient_descent: lr must be a number > 0, got 0"):
        td.gradient_descent(chain.loss, torch.zeros(2, dtype=F64), lr=0, n_steps=1)
    with pytest.raises(TypeError, match=r"a_split: dtype must be a floating torch\.dtype"):
        td.a_split(dtype="float64")


def test_no_hand_made_cut_in_the_module() -> None:
    source = pathlib.Path(td.__file__).read_text()
    for word in (".detach(", "is_block_disabled", "set_grad_enabled"):
        assert word not in source
