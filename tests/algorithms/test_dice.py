"""DiCE's magic box against the exact derivatives of an enumerable expectation."""

from __future__ import annotations

import itertools
import math
import pathlib

import pytest
import torch

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms import dice

F64 = torch.float64


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _expected(problem: dice.TwoStepProblem, theta: torch.Tensor, fn):
    traj = problem.trajectories()
    weights = problem.probabilities(theta)
    return lambda t: (weights * fn(problem.log_probs(t, traj), problem.costs(traj))).sum()


@pytest.fixture(scope="module", params=[0, 1, 2])
def problem(request) -> tuple[dice.TwoStepProblem, torch.Tensor]:
    return dice.two_step_problem(3, generator=torch.Generator().manual_seed(request.param))


def test_magic_box_is_one_with_the_derivatives_of_exp() -> None:
    theta = torch.tensor([0.3, -0.7], dtype=F64)

    def f(t: torch.Tensor) -> torch.Tensor:  # τ(θ) = θ₀² θ₁, times a constant cost 2.5
        return dice.magic_box(t[0] ** 2 * t[1]) * 2.5

    g, H = dice.derivatives(f, theta)
    t0, t1 = theta.tolist()
    grad_tau = torch.tensor([2 * t0 * t1, t0**2], dtype=F64)
    hess_tau = torch.tensor([[2 * t1, 2 * t0], [2 * t0, 0.0]], dtype=F64)
    assert float(dice.magic_box(torch.tensor(123.0))) == 1.0
    torch.testing.assert_close(g, 2.5 * grad_tau, rtol=1e-14, atol=0)
    torch.testing.assert_close(H, 2.5 * (hess_tau + torch.outer(grad_tau, grad_tau)),
                               rtol=1e-14, atol=1e-15)


def test_exact_objective_against_a_python_loop(problem) -> None:
    prob, theta = problem
    n = prob.n_actions
    p1 = torch.softmax(theta[:n], 0)
    p2 = torch.softmax(theta[n:].reshape(n, n), 1)
    total = sum(float(p1[i] * p2[i, j] * (prob.rewards1[i] + prob.rewards2[i, j]))
                for i, j in itertools.product(range(n), repeat=2))
    assert float(prob.exact_objective(theta)) == pytest.approx(total, rel=1e-13)
    assert float(prob.probabilities(theta).sum()) == pytest.approx(1.0, rel=1e-14)


def test_dice_in_expectation_gives_the_exact_gradient_and_hessian(problem) -> None:
    prob, theta = problem
    g, H = dice.derivatives(prob.exact_objective, theta)
    objective = _expected(prob, theta, dice.dice_objective)
    with record_blocks() as seen:
        g_dice, H_dice = dice.derivatives(objective, theta)
    assert seen == [dice.BLOCK] == ["dice.magic_box"]
    assert float(objective(theta)) == pytest.approx(float(prob.exact_objective(theta)), rel=1e-12)
    assert _rel(g_dice, g) < 1e-8 and _rel(H_dice, H) < 1e-8


def test_surrogate_gets_the_gradient_right_and_misses_the_score_outer_product(problem) -> None:
    prob, theta = problem
    g, H = dice.derivatives(prob.exact_objective, theta)
    g_sur, H_sur = dice.derivatives(_expected(prob, theta, dice.surrogate_objective), theta)
    assert _rel(g_sur, g) < 1e-8
    assert _rel(H_sur, H) >= 0.1
    # the missing term, by hand: Σ_τ p(τ) Σ_t c_t ∇S_t ∇S_tᵀ with S_t = Σ_{t'≤t} log p_t'
    traj, p = prob.trajectories(), prob.probabilities(theta)
    costs = prob.costs(traj)
    missing = torch.zeros_like(H)
    for k in range(len(traj)):
        for t in range(2):
            dS = _score(prob, theta, traj[k:k + 1], t)
            missing += p[k] * costs[k, t] * torch.outer(dS, dS)
    torch.testing.assert_close(H - H_sur, missing, rtol=1e-10, atol=1e-12)


def _score(prob: dice.TwoStepProblem, theta: torch.Tensor, actions: torch.Tensor,
           t: int) -> torch.Tensor:
    th = theta.clone().requires_grad_(True)
    (dS,) = torch.autograd.grad(prob.log_probs(th, actions)[0, :t + 1].sum(), th)
    return dS


def test_without_the_block_every_derivative_vanishes(problem) -> None:
    prob, theta = problem
    objective = _expected(prob, theta, dice.dice_objective)
    with disable_blocks("dice.*"):
        g, H = dice.derivatives(objective, theta)
        value = float(objective(theta))
    assert value == pytest.approx(float(prob.exact_objective(theta)), rel=1e-12)
    assert g.abs().max() == 0 and H.abs().max() == 0


def test_monte_carlo_error_shrinks_like_one_over_sqrt_n(seed: int) -> None:
    prob, theta = dice.two_step_problem(3, generator=torch.Generator().manual_seed(seed))
    g, H = dice.derivatives(prob.exact_objective, theta)
    gen = torch.Generator().manual_seed(seed + 1)
    rms = {}
    for n in (200, 20_000):
        errors = []
        for _ in range(8):
            a = prob.sample(theta, n, generator=gen)
            g_mc, H_mc = dice.derivatives(
                lambda t, a=a: dice.dice_objective(prob.log_probs(t, a), prob.costs(a)).mean(),
                theta)
            errors.append([_rel(g_mc, g), _rel(H_mc, H)])
        rms[n] = torch.tensor(errors, dtype=F64).pow(2).mean(0).sqrt()
    ratio = rms[200] / rms[20_000]  # 1/√N predicts √100 = 10
    assert ((ratio > 10 / 2.5) & (ratio < 10 * 2.5)).all(), ratio


def test_sampling_follows_the_policy(seed: int) -> None:
    prob, theta = dice.two_step_problem(2, generator=torch.Generator().manual_seed(seed + 3))
    a = prob.sample(theta, 40_000, generator=torch.Generator().manual_seed(seed))
    traj = prob.trajectories()
    freq = torch.stack([(a == row).all(1).to(F64).mean() for row in traj])
    p = prob.probabilities(theta)
    # each frequency within 5 standard errors
    assert ((freq - p).abs() < 5 * (p * (1 - p) / 40_000).sqrt()).all()


def test_argument_errors(seed: int) -> None:
    prob, theta = dice.two_step_problem(2, generator=torch.Generator().manual_seed(seed))
    with pytest.raises(ValueError, match=r"dice_objective: log_probs and costs must have the "
                                         r"same shape \(\.\.\., T\), got \(3, 2\) and \(3,\)"):
        dice.dice_objective(torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(TypeError, match=r"surrogate_objective: log_probs must be a "
                                        r"torch.Tensor, got list \[0.0\]"):
        dice.surrogate_objective([0.0], torch.zeros(1))
    with pytest.raises(ValueError, match="surrogate_objective: costs must not require grad"):
        dice.surrogate_objective(torch.zeros(2), torch.zeros(2, requires_grad=True))
    with pytest.raises(ValueError, match=r"derivatives: objective must return a scalar tensor, "
                                         r"got Tensor of shape \(2,\)"):
        dice.derivatives(lambda t: t * 2, torch.zeros(2))
    with pytest.raises(ValueError, match=r"TwoStepProblem: theta must have shape \(6,\), got "
                                         r"\(5,\)"):
        prob.exact_objective(torch.zeros(5, dtype=F64))
    with pytest.raises(ValueError, match=r"TwoStepProblem\.sample: n_samples must be an int >= 1"):
        prob.sample(theta, 0, generator=torch.Generator())
    with pytest.raises(ValueError, match="two_step_problem: n_actions must be an int >= 2, got 1"):
        dice.two_step_problem(1, generator=torch.Generator())


def test_constant_objective_has_zero_derivatives() -> None:
    g, H = dice.derivatives(lambda t: torch.tensor(1.0, dtype=F64), torch.zeros(3, dtype=F64))
    assert g.tolist() == [0.0] * 3 and H.shape == (3, 3) and H.abs().max() == 0
    assert not math.isnan(float(H.sum()))


def test_no_hand_made_cut_in_the_module() -> None:
    source = pathlib.Path(dice.__file__).read_text()
    for word in (".detach(", "is_block_disabled", "set_grad_enabled"):
        assert word not in source
