"""Temporal-difference learning with the bootstrapped target behind the block ``"td.target"``.

TD(0) regresses a value estimate ``V(s)`` toward a target built from the estimate itself,

.. math::

    \\delta = r + \\gamma (1 - \\text{done})\\, \\mathrm{sg}(V(s')) - V(s), \\qquad
    L = \\tfrac12 \\sum_i \\mu_i \\, \\delta_i^2 ,

where ``μ`` weighs the transitions (the state distribution times the transition probability).
The target is a label, so its gradient is cut:

- **with the block** the update ``−∇L = Σ μ δ ∇V(s)`` is *semi-gradient* TD(0) (Sutton 1988),
  which converges to the TD fixed point on-policy with linear features (Tsitsiklis & Van Roy
  1997) and may diverge off-policy (Baird's counterexample, Sutton & Barto Example 11.1);
- **without it** (``disable_blocks("td.*")``) the update is the full gradient
  ``Σ μ δ (∇V(s) − γ∇V(s'))``: the *residual-gradient* algorithm (Baird 1995). With expected
  next values (``P V``) it minimises the mean squared Bellman error and converges wherever
  gradient descent does; with sampled next states it is the *naive* residual gradient, which
  minimises the mean squared TD error and finds wrong values in stochastic problems (the
  A-split, Sutton & Barto Example 11.2).

Three problems come with closed forms: :func:`random_chain` (a random ergodic chain with linear
features, a :class:`MarkovRewardProcess`), :func:`baird_counterexample` (another one) and
:func:`a_split` (tabular, a :class:`TransitionTable` of sampled transitions).

References:
    - R. S. Sutton, A. G. Barto. *Reinforcement Learning: An Introduction*, 2nd ed., 2018,
      §9.3, §11.2 (Example 11.1), §11.5 (Example 11.2),
      http://incompleteideas.net/book/the-book-2nd.html
    - R. S. Sutton. Learning to predict by the methods of temporal differences. Machine
      Learning 3, 1988, https://doi.org/10.1007/BF00115009
    - L. Baird. Residual algorithms: reinforcement learning with function approximation.
      ICML 1995, https://doi.org/10.1016/B978-1-55860-377-6.50013-X
    - J. N. Tsitsiklis, B. Van Roy. An analysis of temporal-difference learning with function
      approximation. IEEE TAC 42(5), 1997, https://doi.org/10.1109/9.580874
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from toolkit._utils.array_validation import check_dtype, check_tensor
from toolkit._utils.memory import sized_by
from toolkit._utils.param_validation import Callable_, Generator, Integer, Real, check, show_value
from toolkit.algorithms.divergence import Divergence, check_finite, check_step_fits, warn_divergence
from toolkit.core import stop_gradient

__all__ = ["A_SPLIT_NAIVE_RESIDUAL_VALUES", "A_SPLIT_TRUE_VALUES", "BLOCK", "MarkovRewardProcess",
           "TransitionTable", "a_split", "baird_counterexample", "gradient_descent",
           "random_chain", "td_errors", "td_loss"]

#: The module's one block: the bootstrapped target ``r + γ V(s')`` is a regression label, so
#: the update moves ``V(s)`` toward it and never moves the target toward ``V(s)``.
BLOCK = "td.target"

#: Sutton & Barto, Example 11.2 (γ = 1): the true values, which TD finds ...
A_SPLIT_TRUE_VALUES = {"A": 0.5, "B": 1.0, "C": 0.0}
#: ... and the minimiser of the mean squared TD error, which the naive residual gradient finds.
A_SPLIT_NAIVE_RESIDUAL_VALUES = {"A": 0.5, "B": 0.75, "C": 0.25}


def td_errors(values: torch.Tensor, rewards: torch.Tensor, next_values: torch.Tensor,
              gamma: float, *, dones: torch.Tensor | None = None) -> torch.Tensor:
    """TD errors ``δ = r + γ (1 − done) sg(V(s')) − V(s)``, the target behind :data:`BLOCK`.

    Args:
        values: ``V(s)``, shape ``(n,)`` (any shape; the others must match it).
        rewards: ``r``, same shape.
        next_values: ``V(s')`` (or the expected ``Σ_s' P_ss' V(s')``), same shape.
        gamma: discount ``γ`` in ``[0, 1]``.
        dones: 1 where ``s'`` is terminal (its value is not bootstrapped), else 0; optional.

    >>> v = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> delta = td_errors(v, torch.tensor([0.0, 1.0]), v.flip(0), 0.5)
    >>> delta.tolist(), torch.autograd.grad(delta.sum(), v)[0].tolist()
    ([0.0, -0.5], [-1.0, -1.0])
    """
    check("td_errors", "gamma", gamma, [Real(0, 1)])
    _check_shapes("td_errors", values, rewards, next_values, dones)
    # The bootstrapped target is a label: TD moves V(s) toward it, never it toward V(s).
    bootstrap = stop_gradient(next_values, name=BLOCK)
    if dones is not None:
        bootstrap = bootstrap * (1 - dones)
    return rewards + gamma * bootstrap - values


def td_loss(values: torch.Tensor, rewards: torch.Tensor, next_values: torch.Tensor,
            gamma: float, *, weights: torch.Tensor | None = None,
            dones: torch.Tensor | None = None) -> torch.Tensor:
    """``½ Σ_i μ_i δ_i²`` (``μ_i = 1/n`` by default): its gradient is semi-gradient TD with the
    block and the residual gradient without it. Arguments as in :func:`td_errors`; ``weights``
    are ``μ ≥ 0``, of the same shape.

    >>> v = torch.tensor([1.0, 2.0])
    >>> float(td_loss(v, torch.zeros(2), v.flip(0), 1.0))  # ½ · mean(1², 1²)
    0.5
    """
    delta = td_errors(values, rewards, next_values, gamma, dones=dones)
    if weights is None:
        return 0.5 * (delta**2).mean()
    check_tensor("td_loss", "weights", weights, allow_meta=values.device.type == "meta")
    if weights.shape != values.shape:
        raise ValueError(f"td_loss: weights must have the shape of values "
                         f"{tuple(values.shape)}, got {tuple(weights.shape)}")
    if bool((weights < 0).any()):
        raise ValueError(f"td_loss: weights must be >= 0, got a minimum of "
                         f"{float(weights.min()):g}")
    return 0.5 * (weights * delta**2).sum()


def _check_shapes(where: str, values: torch.Tensor, *others: torch.Tensor | None) -> None:
    check_tensor(where, "values", values)
    for arg, t in zip(("rewards", "next_values", "dones"), others):
        if t is not None or arg != "dones":  # dones alone is optional
            check_tensor(where, arg, t, floating=arg != "dones",
                         allow_meta=values.device.type == "meta")
        if t is not None and t.shape != values.shape:
            raise ValueError(f"{where}: {arg} must have the shape of values "
                             f"{tuple(values.shape)}, got {tuple(t.shape)}")


def gradient_descent(loss_fn: Callable[[torch.Tensor], torch.Tensor], w0: torch.Tensor, *,
                     lr: float, n_steps: int) -> torch.Tensor:
    """Iterates of ``w ← w − lr ∇ loss_fn(w)`` from ``w0``: shape ``(n_steps + 1, *w0.shape)``.

    With an expected (full-batch) TD loss these are Sutton & Barto's *expected updates*
    (semi-gradient DP with the block, eq. 11.9); the iterates are returned even when they
    diverge (grow without bound: on Baird's counterexample that is the finding).

    Overflow is another matter. At every step the loss and its gradient are checked before
    the update and the new iterate after it (one reduction, one synchronisation per update);
    on the first value that is not finite the loop stops, warns once
    (:class:`~toolkit.algorithms.divergence.DivergenceWarning`) and returns the finite iterates
    ``w_0 … w_m`` only (``m < n_steps``). The returned tensor's ``divergence`` attribute is then
    the :class:`~toolkit.algorithms.divergence.Divergence` with ``step = m``: the update from ``w_m`` was
    not applied (its loss or gradient is not finite) or gave a non-finite ``w_{m+1}``; it is
    ``None`` when every value stayed finite. ``w0`` must be finite. On a diverging TD problem
    the squared TD error overflows first: when ``|δ|`` passes about ``1e154`` in float64, long
    before the weights would reach ``1e308``.

    >>> w = gradient_descent(lambda w: (w**2).sum(), torch.tensor([1.0, -2.0]), lr=0.25,
    ...                      n_steps=2)
    >>> w.tolist(), w.divergence
    ([[1.0, -2.0], [0.5, -1.0], [0.25, -0.5]], None)
    """
    where = "gradient_descent"
    check(where, "loss_fn", loss_fn, [Callable_])
    check(where, "lr", lr, [Real(0, closed="neither")])
    check(where, "n_steps", n_steps, [Integer(0)])
    check_tensor(where, "w0", w0)
    check_step_fits(where, w0.dtype, lr=lr)
    if check_finite([("w0", w0)]) is not None:
        raise ValueError(f"{where}: w0 must be finite, got inf or nan")
    w = w0.clone().requires_grad_(True)
    out = [w0.clone()]
    for step in range(n_steps):
        loss = loss_fn(w)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(f"{where}: loss_fn must return a scalar tensor, got "
                            f"{show_value(loss)}")
        (grad,) = torch.autograd.grad(loss, w)
        with torch.no_grad():  # values: the check and the update record no graph
            # one check per update: the iterate the previous update made, this one's loss and
            # gradient (not applied when they are not finite)
            divergence = _non_finite(step, ("weights", w), ("loss", loss), ("gradient", grad))
            if divergence is not None:
                break
            w -= lr * grad
            out.append(w.clone())
    else:
        divergence = _non_finite(n_steps, ("weights", w))  # the last iterate
    if divergence is not None and divergence.applied:
        out.pop()  # the non-finite iterate
    iterates = torch.stack(out)
    iterates.divergence = divergence  # type: ignore[attr-defined]
    return iterates


def _non_finite(step: int, *named: tuple[str, torch.Tensor]) -> Divergence | None:
    """Where :func:`gradient_descent` diverged at update ``step`` (``named[0]``: the weights
    the previous update made), warned once; ``None`` when all values are finite. The tensors
    are small: one reduction over all of them, the names looked up only on failure."""
    if bool(torch.isfinite(torch.cat([t.reshape(-1) for _, t in named])).all()):
        return None
    bad = str(check_finite(named))
    applied = bad == "weights"
    divergence = Divergence("gradient_descent", bad, step - 1 if applied else step, None,
                            applied)
    warn_divergence(divergence)
    return divergence


def _solve(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Least-squares (minimum-norm) solution of ``A x = b``, in float64 on the CPU."""
    x = torch.linalg.lstsq(A.cpu().double(), b.cpu().double()[:, None], driver="gelsd")
    return x.solution[:, 0].to(A)


@dataclass(frozen=True)
class MarkovRewardProcess:
    """A Markov reward process with linear features and a state weighting, and its closed forms.

    Attributes (``n`` states, ``k`` features):
        P: transition matrix ``(n, n)`` (rows sum to 1, or less where episodes end);
        r: expected reward on leaving each state ``(n,)``;
        phi: features ``Φ`` ``(n, k)``, so that ``V_w = Φ w``;
        d: state weighting ``(n,)`` (on-policy: the stationary distribution);
        gamma: discount.

    The expected TD loss is ``½ Σ_s d_s (Φw − r − γ P sg(Φw))²_s`` (:meth:`loss`). With
    ``A = (I − γP)Φ`` and ``D = diag(d)``:

    - semi-gradient ``Φᵀ D (Φw − r − γPΦw)``, zero at ``w_TD = (Φᵀ D A)⁻¹ Φᵀ D r``;
    - full gradient ``Aᵀ D (Φw − r − γPΦw)``, zero at ``w_RG = (Aᵀ D A)⁻¹ Aᵀ D r``;
    - the best estimate in the span, ``w_proj = (Φᵀ D Φ)⁻¹ Φᵀ D V`` with ``V = (I − γP)⁻¹ r``.

    Singular systems are solved in the least-squares sense (minimum-norm solutions).
    """

    P: torch.Tensor
    r: torch.Tensor
    phi: torch.Tensor
    d: torch.Tensor
    gamma: float

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """The expected TD loss at weights ``w`` ``(k,)``, the target behind :data:`BLOCK`."""
        values = self.phi @ w
        return td_loss(values, self.r, self.P @ values, self.gamma, weights=self.d)

    def true_values(self) -> torch.Tensor:
        """``V = (I − γP)⁻¹ r`` ``(n,)``."""
        return torch.linalg.solve(self._eye() - self.gamma * self.P, self.r)

    def expected_gradients(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"blocked": (ΦᵀDA, ΦᵀDr), "unblocked": (AᵀDA, AᵀDr)}``, ``A = (I − γP)Φ``: each
        expected gradient as ``M w − b`` (the semi-gradient and the residual gradient). Its
        fixed point solves ``M w = b``; a full-batch step ``w ← w − lr·(M w − b)`` contracts
        by the spectral radius of ``I − lr·M``."""
        A, D = self._a(), torch.diag(self.d)
        return {"blocked": (self.phi.T @ D @ A, self.phi.T @ D @ self.r),
                "unblocked": (A.T @ D @ A, A.T @ D @ self.r)}

    def td_fixed_point(self) -> torch.Tensor:
        """``w_TD`` ``(k,)``: where the semi-gradient vanishes."""
        return _solve(*self.expected_gradients()["blocked"])

    def residual_gradient_fixed_point(self) -> torch.Tensor:
        """``w_RG`` ``(k,)``: the minimiser of the mean squared Bellman error."""
        return _solve(*self.expected_gradients()["unblocked"])

    def best_weights(self) -> torch.Tensor:
        """``w_proj`` ``(k,)``: the d-weighted least-squares fit of the true values."""
        D = torch.diag(self.d)
        return _solve(self.phi.T @ D @ self.phi, self.phi.T @ D @ self.true_values())

    def gradients(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        """Closed forms ``{"blocked": semi-gradient, "unblocked": full gradient}`` at ``w``."""
        residual = self.phi @ w - self.r - self.gamma * self.P @ (self.phi @ w)
        return {"blocked": self.phi.T @ (self.d * residual),
                "unblocked": self._a().T @ (self.d * residual)}

    def value_error(self, w: torch.Tensor) -> float:
        """``‖Φw − V‖_D``, the d-weighted RMS error of the value estimate."""
        diff = self.phi @ w - self.true_values()
        return float((self.d * diff**2).sum().sqrt())

    def msbe(self, w: torch.Tensor) -> float:
        """Mean squared Bellman error ``Σ_s d_s (r + γPΦw − Φw)²_s``."""
        residual = self.r + self.gamma * self.P @ (self.phi @ w) - self.phi @ w
        return float((self.d * residual**2).sum())

    def _eye(self) -> torch.Tensor:
        return torch.eye(len(self.r), dtype=self.r.dtype, device=self.r.device)

    def _a(self) -> torch.Tensor:
        return (self._eye() - self.gamma * self.P) @ self.phi


@sized_by("n_states", "n_features")
def random_chain(n_states: int, n_features: int, gamma: float, *,
                 generator: torch.Generator, dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> MarkovRewardProcess:
    """A random ergodic chain with random linear features, weighted on-policy.

    ``P = uniform(0, 1) + 0.05`` row-normalised, ``r, Φ ~ N(0, 1)``, ``d`` the stationary
    distribution of ``P``; drawn in float64 from ``generator`` (CPU), then cast.

    >>> chain = random_chain(5, 2, 0.9, generator=torch.Generator().manual_seed(0))
    >>> chain.phi.shape, round(float(chain.d.sum()), 12)
    (torch.Size([5, 2]), 1.0)
    """
    check("random_chain", "n_states", n_states, [Integer(2)])
    check("random_chain", "n_features", n_features, [Integer(1)])
    check("random_chain", "gamma", gamma, [Real(0, 1, closed="left")])
    check("random_chain", "generator", generator, [Generator])
    check_dtype("random_chain", dtype)
    g, f64 = generator, torch.float64
    P = torch.rand(n_states, n_states, generator=g, dtype=f64) + 0.05
    P = P / P.sum(1, keepdim=True)
    r = torch.randn(n_states, generator=g, dtype=f64)
    phi = torch.randn(n_states, n_features, generator=g, dtype=f64)
    evals, evecs = torch.linalg.eig(P.T)  # stationary: left eigenvector for eigenvalue 1
    d = evecs[:, torch.argmin((evals - 1).abs())].real
    d = d / d.sum()
    kw = {"dtype": dtype, "device": device}
    return MarkovRewardProcess(P.to(**kw), r.to(**kw), phi.to(**kw), d.to(**kw), float(gamma))


def baird_counterexample(gamma: float = 0.99, *, dtype: torch.dtype = torch.float64,
                         device: torch.device | str | None = None
                         ) -> tuple[MarkovRewardProcess, torch.Tensor]:
    """Baird's counterexample (Sutton & Barto, Example 11.1, Figure 11.1) and its ``w₀``.

    Seven states, eight weights: the six upper states have ``V = 2 w_i + w_8``, the lower one
    ``V = w_7 + 2 w_8``. The target policy always takes the solid action to the lower state,
    every reward is 0 (so the true values are 0), and the updates weigh the states uniformly
    (the behaviour policy's distribution). Returns the process and
    ``w₀ = (1, 1, 1, 1, 1, 1, 10, 1)``. Expected semi-gradient TD (semi-gradient DP, eq. 11.9)
    diverges from ``w₀`` for any positive step size; the residual gradient converges.
    """
    check("baird_counterexample", "gamma", gamma, [Real(0, 1)])
    check_dtype("baird_counterexample", dtype)
    kw = {"dtype": dtype, "device": device}
    phi = torch.zeros(7, 8, **kw)
    phi[torch.arange(6), torch.arange(6)] = 2.0
    phi[:6, 7] = 1.0
    phi[6, 6], phi[6, 7] = 1.0, 2.0
    P = torch.zeros(7, 7, **kw)
    P[:, 6] = 1.0
    w0 = torch.tensor([1, 1, 1, 1, 1, 1, 10, 1], **kw)
    return MarkovRewardProcess(P, torch.zeros(7, **kw), phi, torch.full((7,), 1 / 7, **kw),
                               float(gamma)), w0


@dataclass(frozen=True)
class TransitionTable:
    """Sampled transitions ``(s, r, s', done)`` with probabilities ``μ``, for tabular values.

    ``states``, ``next_states`` (int64), ``rewards``, ``dones``, ``probs``: shape ``(m,)``;
    ``names``: the names of the ``n`` non-terminal states. Where ``done = 1`` the next state is
    terminal (value 0) and ``next_states`` holds any valid index (its value is multiplied by 0).
    """

    states: torch.Tensor
    next_states: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    probs: torch.Tensor
    names: tuple[str, ...]

    def loss(self, values: torch.Tensor, gamma: float) -> torch.Tensor:
        """``½ Σ μ δ²`` for the table of values ``(n,)``, the target behind :data:`BLOCK`."""
        if values.ndim != 1 or values.shape[0] != len(self.names):
            raise ValueError(f"TransitionTable.loss: values must have shape ({len(self.names)},) "
                             f"(one per state: {', '.join(self.names)}), got "
                             f"{tuple(values.shape)}")
        return td_loss(values[self.states], self.rewards, values[self.next_states], gamma,
                       weights=self.probs, dones=self.dones)

    def td_fixed_point(self, gamma: float) -> torch.Tensor:
        """Values where the expected semi-gradient ``Σ μ δ e_s`` vanishes (a linear system)."""
        M, b = self._system(gamma)
        E = self._onehot(self.states)
        return _solve(E.T @ (self.probs[:, None] * M), E.T @ (self.probs * b))

    def naive_residual_fixed_point(self, gamma: float) -> torch.Tensor:
        """Values minimising the mean squared TD error ``Σ μ δ²`` (weighted least squares)."""
        M, b = self._system(gamma)
        sq = self.probs.sqrt()
        return _solve(sq[:, None] * M, sq * b)

    def _onehot(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(idx, len(self.names)).to(self.rewards.dtype)

    def _system(self, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        # δ = b − M V with M = e_s − γ (1 − done) e_s' and b = r
        M = self._onehot(self.states) - gamma * (1 - self.dones)[:, None] * self._onehot(
            self.next_states)
        return M, self.rewards


def a_split(*, dtype: torch.dtype = torch.float64,
            device: torch.device | str | None = None) -> TransitionTable:
    """The A-split (Sutton & Barto, Example 11.2) as four sampled transitions.

    A goes to B or C with probability ½ and reward 0; B ends with reward 1, C with reward 0.
    Each transition has weight ¼ (A is visited once per episode, then B or C once). With γ = 1
    TD finds the true values :data:`A_SPLIT_TRUE_VALUES`; the naive residual gradient (the
    gradient of the squared sample TD error) finds :data:`A_SPLIT_NAIVE_RESIDUAL_VALUES`.

    >>> table = a_split()
    >>> [round(v, 12) + 0.0 for v in table.td_fixed_point(1.0).tolist()]
    [0.5, 1.0, 0.0]
    >>> [round(v, 12) for v in table.naive_residual_fixed_point(1.0).tolist()]
    [0.5, 0.75, 0.25]
    """
    check_dtype("a_split", dtype)
    kw = {"dtype": dtype, "device": device}
    A, B, C = 0, 1, 2
    return TransitionTable(states=torch.tensor([A, A, B, C], device=device),
                           next_states=torch.tensor([B, C, A, A], device=device),
                           rewards=torch.tensor([0.0, 0.0, 1.0, 0.0], **kw),
                           dones=torch.tensor([0.0, 0.0, 1.0, 1.0], **kw),
                           probs=torch.full((4,), 0.25, **kw), names=("A", "B", "C"))
