"""DiCE, the infinitely differentiable Monte-Carlo estimator: the magic box behind ``"dice.magic_box"``.

For a stochastic computation graph with stochastic nodes ``a_1, …, a_T`` (log-probabilities
``log p_t = log p(a_t | a_<t; θ)``) and costs ``c_t`` that depend on ``a_≤t``, Foerster et al.
(2018) define the magic box and the DiCE objective

.. math::

    ⊡(τ) = \\exp(τ - \\mathrm{sg}(τ)), \\qquad
    L_⊡ = \\sum_t ⊡\\Big(\\sum_{t' \\le t} \\log p_{t'}\\Big)\\, c_t .

``⊡(τ)`` evaluates to 1, and ``∇⊡(τ) = ⊡(τ) ∇τ``: every derivative of ``L_⊡`` of every order
is an unbiased estimate of the same derivative of ``E[Σ c_t]``, because differentiating
``⊡`` reproduces the score-function terms that each order needs
(``∇² E[c] = E[c (∇² log p + ∇log p ∇log pᵀ)]``).

- **with the block** ``L_⊡`` has the value of the return and the right derivatives;
- **without it** (``disable_blocks("dice.*")``) the magic box is ``exp(τ − τ) = 1``, a constant:
  every derivative of ``L_⊡`` is exactly zero.

The classic surrogate loss ``L_SL = Σ_t c_t Σ_{t' ≤ t} log p_{t'} + Σ_t c_t`` (Schulman et al.
2015) has the right gradient in expectation but the wrong Hessian: it misses
``E[c ∇log p ∇log pᵀ]`` (:func:`surrogate_objective`).

:class:`TwoStepProblem` is a small graph whose expectation can be enumerated exactly: a first
categorical action, a second one conditioned on it, a cost after each.

References:
    - J. Foerster, G. Farquhar, M. Al-Shedivat, T. Rocktäschel, E. P. Xing, S. Whiteson.
      DiCE: The infinitely differentiable Monte-Carlo estimator. ICML 2018,
      https://arxiv.org/abs/1802.05098
    - J. Schulman, N. Heess, T. Weber, P. Abbeel. Gradient estimation using stochastic
      computation graphs. NeurIPS 2015, https://arxiv.org/abs/1506.05254
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from toolkit._utils.array_validation import as_tensor, check_dtype, check_tensor
from toolkit._utils.memory import sized_by
from toolkit._utils.param_validation import Callable_, Generator, Integer, check
from toolkit.core import stop_gradient

__all__ = ["BLOCK", "TwoStepProblem", "derivatives", "dice_objective", "magic_box",
           "surrogate_objective", "two_step_problem"]

#: The module's one block: the ``sg(τ)`` of the magic box. It makes ``⊡(τ)`` evaluate to 1
#: while its derivatives are those of ``exp(τ)``; without the cut the box is the constant 1.
BLOCK = "dice.magic_box"


def magic_box(tau: torch.Tensor) -> torch.Tensor:
    """``⊡(τ) = exp(τ − sg(τ))``: 1 going forward, ``∇⊡(τ) = ⊡(τ) ∇τ`` going backward.

    >>> tau = torch.tensor(0.7, requires_grad=True)
    >>> box = magic_box(tau)
    >>> box, torch.autograd.grad(box, tau)[0]
    (tensor(1., grad_fn=<ExpBackward0>), tensor(1.))
    """
    check_tensor("magic_box", "tau", tau)
    # The cut keeps the box's value at 1 while its derivatives are those of exp(τ).
    return torch.exp(tau - stop_gradient(tau, name=BLOCK))


def _check_pair(where: str, log_probs: torch.Tensor, costs: torch.Tensor) -> None:
    check_tensor(where, "log_probs", log_probs)
    check_tensor(where, "costs", costs, like=log_probs, like_name="log_probs")
    if log_probs.ndim == 0 or log_probs.shape != costs.shape:
        raise ValueError(f"{where}: log_probs and costs must have the same shape (..., T), got "
                         f"{tuple(log_probs.shape)} and {tuple(costs.shape)}")


def dice_objective(log_probs: torch.Tensor, costs: torch.Tensor) -> torch.Tensor:
    """``L_⊡ = Σ_t ⊡(Σ_{t'≤t} log p_{t'}) c_t`` per sample.

    Args:
        log_probs: ``log p(a_t | a_<t; θ)``, shape ``(..., T)`` (time last).
        costs: ``c_t``, shape ``(..., T)``; cost ``t`` depends on the actions up to ``t``. Costs
            may depend on ``θ`` too (their pathwise derivative is kept).

    Returns:
        Shape ``(...)``: average it over samples for the estimator of ``E[Σ_t c_t]``.
    """
    _check_pair("dice_objective", log_probs, costs)
    return (magic_box(log_probs.cumsum(-1)) * costs).sum(-1)


def surrogate_objective(log_probs: torch.Tensor, costs: torch.Tensor) -> torch.Tensor:
    """The classic surrogate loss ``L_SL = Σ_t c_t Σ_{t'≤t} log p_{t'} + Σ_t c_t`` per sample.

    Its gradient is an unbiased estimate of ``∇E[Σ c]``; its Hessian is not (it lacks
    ``E[c ∇log p ∇log pᵀ]``). Costs must not depend on ``θ`` (they are the score function's
    weights); shapes as in :func:`dice_objective`.
    """
    _check_pair("surrogate_objective", log_probs, costs)
    if costs.requires_grad:
        raise ValueError("surrogate_objective: costs must not require grad (the surrogate "
                         "treats them as constants); use dice_objective for costs that depend "
                         "on the parameters")
    return (log_probs.cumsum(-1) * costs).sum(-1) + costs.sum(-1)


def derivatives(objective: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient ``(k,)`` and Hessian ``(k, k)`` of a scalar ``objective(θ)`` at ``θ`` ``(k,)``.

    Reverse over reverse: the gradient with ``create_graph=True``, then one row of the Hessian
    per parameter. A derivative that does not depend on ``θ`` is returned as zeros.

    >>> g, H = derivatives(lambda t: (t**3).sum(), torch.tensor([1.0, 2.0]))
    >>> g.tolist(), H.tolist()
    ([3.0, 12.0], [[6.0, 0.0], [0.0, 12.0]])
    """
    check("derivatives", "objective", objective, [Callable_])
    theta = as_tensor(theta, where="derivatives", arg="theta", ndim=1, min_rows=1)
    theta = theta.clone().requires_grad_(True)
    value = objective(theta)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError(f"derivatives: objective must return a scalar tensor, got "
                         f"{type(value).__name__} of shape {tuple(getattr(value, 'shape', ()))}")
    if not value.requires_grad:  # e.g. a constant objective
        zeros = torch.zeros_like(theta)
        return zeros.requires_grad_(False), torch.zeros(len(theta), len(theta)).to(zeros)
    (grad,) = torch.autograd.grad(value.reshape(()), theta, create_graph=True,
                                  materialize_grads=True)
    rows = []
    for i in range(len(theta)):
        if grad.requires_grad:
            (row,) = torch.autograd.grad(grad[i], theta, retain_graph=True,
                                         materialize_grads=True)
        else:
            row = torch.zeros_like(theta)
        rows.append(row)
    with torch.no_grad():
        return grad.clone(), torch.stack(rows)


@dataclass(frozen=True)
class TwoStepProblem:
    """Two categorical actions in sequence, a cost after each; its expectation is enumerable.

    ``θ = (ℓ₁ (n,), ℓ₂ (n, n) flattened)``: ``π₁ = softmax(ℓ₁)``, ``π₂(· | a₁) =
    softmax(ℓ₂[a₁])``; costs ``c₁ = r₁[a₁]`` ``(n,)`` and ``c₂ = r₂[a₁, a₂]`` ``(n, n)``. The
    objective is ``J(θ) = Σ_{a₁, a₂} π₁(a₁) π₂(a₂ | a₁) (r₁[a₁] + r₂[a₁, a₂])``.
    """

    rewards1: torch.Tensor
    rewards2: torch.Tensor

    @property
    def n_actions(self) -> int:
        return int(self.rewards1.shape[0])

    @property
    def n_params(self) -> int:
        return self.n_actions * (self.n_actions + 1)

    def _logits(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if theta.shape != (self.n_params,):
            raise ValueError(f"TwoStepProblem: theta must have shape ({self.n_params},), got "
                             f"{tuple(theta.shape)}")
        n = self.n_actions
        return theta[:n], theta[n:].reshape(n, n)

    def exact_objective(self, theta: torch.Tensor) -> torch.Tensor:
        """``J(θ)`` by enumeration, differentiable in ``θ`` to any order."""
        l1, l2 = self._logits(theta)
        p1, p2 = l1.softmax(-1), l2.softmax(-1)
        return (p1 * self.rewards1).sum() + (p1[:, None] * p2 * self.rewards2).sum()

    def log_probs(self, theta: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``[log π₁(a₁), log π₂(a₂ | a₁)]`` for actions ``(m, 2)`` (int64): shape ``(m, 2)``."""
        l1, l2 = self._logits(theta)
        a1, a2 = actions[:, 0], actions[:, 1]
        return torch.stack([F.log_softmax(l1, -1)[a1], F.log_softmax(l2, -1)[a1, a2]], -1)

    def costs(self, actions: torch.Tensor) -> torch.Tensor:
        """``[r₁[a₁], r₂[a₁, a₂]]`` for actions ``(m, 2)``: shape ``(m, 2)``."""
        return torch.stack([self.rewards1[actions[:, 0]],
                            self.rewards2[actions[:, 0], actions[:, 1]]], -1)

    def trajectories(self) -> torch.Tensor:
        """Every action pair, shape ``(n², 2)``."""
        idx = torch.arange(self.n_actions, device=self.rewards1.device)
        return torch.cartesian_prod(idx, idx)

    def probabilities(self, theta: torch.Tensor) -> torch.Tensor:
        """``p(τ)`` of every trajectory ``(n²,)``, as constants: the weights of an expectation
        (they play the part of the samples, which carry no gradient)."""
        with torch.no_grad():  # evaluation only: the sampling distribution's weights
            return self.log_probs(theta, self.trajectories()).sum(-1).exp()

    def sample(self, theta: torch.Tensor, n_samples: int, *, generator: torch.Generator
               ) -> torch.Tensor:
        """``n_samples`` trajectories drawn from the policy, shape ``(n_samples, 2)``."""
        check("TwoStepProblem.sample", "n_samples", n_samples, [Integer(1)])
        check("TwoStepProblem.sample", "generator", generator, [Generator])
        with torch.no_grad():  # sampling: the actions carry no gradient
            l1, l2 = self._logits(theta)
            a1 = torch.multinomial(l1.softmax(-1).cpu(), n_samples, replacement=True,
                                   generator=generator)
            u = torch.rand(n_samples, 1, generator=generator, dtype=theta.dtype)
            cdf = l2.softmax(-1).cpu()[a1].cumsum(-1)
            a2 = (u > cdf).sum(-1).clamp(max=self.n_actions - 1)
        return torch.stack([a1, a2], -1).to(theta.device)


@sized_by("n_actions")
def two_step_problem(n_actions: int = 3, *, generator: torch.Generator,
                     dtype: torch.dtype = torch.float64,
                     device: torch.device | str | None = None
                     ) -> tuple[TwoStepProblem, torch.Tensor]:
    """A random :class:`TwoStepProblem` (costs ``N(0, 1)``) and parameters ``θ ~ N(0, 1)``.

    >>> problem, theta = two_step_problem(2, generator=torch.Generator().manual_seed(0))
    >>> theta.shape, problem.trajectories().tolist()
    (torch.Size([6]), [[0, 0], [0, 1], [1, 0], [1, 1]])
    """
    check("two_step_problem", "n_actions", n_actions, [Integer(2)])
    check("two_step_problem", "generator", generator, [Generator])
    check_dtype("two_step_problem", dtype)
    n, f64 = n_actions, torch.float64
    r1 = torch.randn(n, generator=generator, dtype=f64)
    r2 = torch.randn(n, n, generator=generator, dtype=f64)
    theta = torch.randn(n * (n + 1), generator=generator, dtype=f64)
    kw = {"dtype": dtype, "device": device}
    return TwoStepProblem(r1.to(**kw), r2.to(**kw)), theta.to(**kw)
