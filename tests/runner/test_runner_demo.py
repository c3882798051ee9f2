"""The demonstration experiment (linear TD toward a blocked target) against closed forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from experiments import quadratic_target as qt
from toolkit.runner import run_experiment


@pytest.fixture(scope="module")
def problem() -> dict[str, torch.Tensor]:
    return qt.make_problem(6, 2, 0.8, generator=torch.Generator().manual_seed(1))


def test_problem_closed_forms_against_numpy(problem: dict[str, torch.Tensor]) -> None:
    P, r, phi, d = (problem[k].numpy() for k in ("P", "r", "phi", "d"))
    assert np.allclose(P.sum(1), 1) and np.allclose(d @ P, d) and d.min() > 0
    V = problem["V"].numpy()
    assert np.allclose(V, r + 0.8 * P @ V)  # Bellman equation
    # TD fixed point: the projected Bellman equation, Φᵀ D (r + γPΦw − Φw) = 0
    w_td = problem["w_td"].numpy()
    assert np.allclose(phi.T @ (d * (r + 0.8 * P @ phi @ w_td - phi @ w_td)), 0, atol=1e-12)
    # residual gradient: weighted least squares, solved independently with numpy's lstsq
    A = (np.eye(6) - 0.8 * P) @ phi
    sqrt_d = np.sqrt(d)[:, None]
    w_rg, *_ = np.linalg.lstsq(sqrt_d * A, sqrt_d[:, 0] * r, rcond=None)
    assert np.allclose(problem["w_rg"].numpy(), w_rg, atol=1e-12)
    w_proj, *_ = np.linalg.lstsq(sqrt_d * phi, sqrt_d[:, 0] * V, rcond=None)
    assert np.allclose(problem["w_proj"].numpy(), w_proj, atol=1e-12)


def test_autograd_gradients_match_closed_forms(problem: dict[str, torch.Tensor]) -> None:
    from toolkit import disable_blocks

    w = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    exact = qt.analytic_gradients(w.detach(), problem, 0.8)
    (g_blocked,) = torch.autograd.grad(qt.loss_fn(w, problem, 0.8), w)
    with disable_blocks("quadratic_target.*"):
        (g_unblocked,) = torch.autograd.grad(qt.loss_fn(w, problem, 0.8), w)
    torch.testing.assert_close(g_blocked, exact["blocked"], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_unblocked, exact["unblocked"], rtol=1e-12, atol=1e-14)
    assert not torch.allclose(g_blocked, g_unblocked)


def test_blocked_converges_to_td_unblocked_to_residual_gradient(tmp_path: Path) -> None:
    run = run_experiment("quadratic_target", {"n_steps": 400, "log_every": 50}, seed=0,
                         dtype="float64", disable_blocks=["quadratic_target.*"],
                         output_dir=tmp_path)
    s = run.summary
    assert s["blocked"]["dist_to_td_fixed_point"] < 1e-8
    assert s["unblocked"]["dist_to_rg_fixed_point"] < 1e-6
    assert s["blocked"]["value_error"] == pytest.approx(s["closed_form"]["value_error_td"])
    assert s["unblocked"]["value_error"] == pytest.approx(s["closed_form"]["value_error_rg"])
    assert s["blocked"]["grad_max_err_vs_closed_form"] < 1e-13
    assert s["unblocked"]["grad_max_err_vs_closed_form"] < 1e-13
    # the best value estimate in span(Φ) beats both fixed points
    assert s["closed_form"]["value_error_best"] <= min(s["closed_form"]["value_error_td"],
                                                       s["closed_form"]["value_error_rg"])
    assert run.meta["blocks_seen"] == ["quadratic_target.target"]
    figs = qt.figures(run)
    assert isinstance(figs["value_function"], Figure)
