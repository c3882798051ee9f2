"""Regression toward a blocked target: linear TD(0) with and without stop_gradient.

A value function ``V_w = Φ w`` is fitted to its own bootstrapped target with the quadratic loss

    L(w) = ½ Σ_s d_s (φ_sᵀ w − stop_gradient(r_s + γ Σ_s' P_ss' φ_s'ᵀ w))²

on a random ergodic Markov chain (transition matrix ``P``, rewards ``r``, stationary
distribution ``d``, features ``Φ``), by full-batch gradient descent (expected updates).

- **Blocked** (the target is a constant): the update is expected semi-gradient TD(0),
  ``w ← w − α Φᵀ D (Φw − r − γPΦw)``, which converges to the TD fixed point
  ``w_TD = (Φᵀ D (I − γP) Φ)⁻¹ Φᵀ D r`` (Tsitsiklis & Van Roy 1997).
- **Unblocked** (the gradient also flows into the target): ordinary gradient descent on the
  mean squared Bellman error, Baird's residual-gradient algorithm, which converges to
  ``w_RG = argmin_w ‖(I − γP)Φw − r‖²_D`` — a different, usually worse value estimate.

Both fixed points, the true values ``V = (I − γP)⁻¹ r`` and both gradients have closed forms,
so each step checks the autograd gradients against them.

References:
    Sutton & Barto, *Reinforcement Learning: An Introduction*, 2nd ed., §9.3 and §11.5
    (semi-gradient TD vs residual gradient), http://incompleteideas.net/book/the-book-2nd.html
    Tsitsiklis & Van Roy (1997), An analysis of temporal-difference learning with function
    approximation, IEEE TAC 42(5), https://doi.org/10.1109/9.580874
    Baird (1995), Residual algorithms, ICML, https://doi.org/10.1016/B978-1-55860-377-6.50013-X
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

from toolkit import compare_gradients, stop_gradient
from toolkit.runner import ExperimentParams, RunContext, RunResults

DESCRIPTION = "linear TD(0): regression toward a blocked bootstrap target vs residual gradient"
#: The precision the comparison is defined in (the showcase runs it in this dtype).
DTYPE = "float64"


class Params(ExperimentParams):
    n_states: int = Field(8, ge=2, description="number of states of the random Markov chain")
    n_features: int = Field(3, ge=1, description="number of features (< n_states: approximation)")
    gamma: float = Field(0.9, ge=0.0, lt=1.0, description="discount factor")
    lr: float = Field(0.5, gt=0.0, description="gradient-descent step size")
    n_steps: int = Field(300, ge=1, description="number of full-batch gradient steps")
    log_every: int = Field(5, ge=1, description="log metrics every this many steps")


QUICK: dict[str, Any] = {"n_steps": 100, "log_every": 5}


def make_problem(n_states: int, n_features: int, gamma: float, *, generator: torch.Generator,
                 dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """Random ergodic chain ``P`` (n, n), rewards ``r`` (n,), features ``Φ`` (n, k), its stationary
    distribution ``d`` (n,) and the closed forms ``V``, ``w_td``, ``w_rg``, ``w_proj``."""
    g = generator
    P = torch.rand(n_states, n_states, generator=g, dtype=torch.float64) + 0.05
    P = P / P.sum(1, keepdim=True)
    r = torch.randn(n_states, generator=g, dtype=torch.float64)
    phi = torch.randn(n_states, n_features, generator=g, dtype=torch.float64)
    # stationary distribution: left eigenvector of P for eigenvalue 1
    evals, evecs = torch.linalg.eig(P.T)
    d = evecs[:, torch.argmin((evals - 1).abs())].real
    d = d / d.sum()
    D = torch.diag(d)
    eye = torch.eye(n_states, dtype=torch.float64)
    V = torch.linalg.solve(eye - gamma * P, r)
    A = (eye - gamma * P) @ phi
    w_td = torch.linalg.solve(phi.T @ D @ A, phi.T @ D @ r)
    w_rg = torch.linalg.solve(A.T @ D @ A, A.T @ D @ r)
    w_proj = torch.linalg.solve(phi.T @ D @ phi, phi.T @ D @ V)
    out = {"P": P, "r": r, "phi": phi, "d": d, "V": V, "w_td": w_td, "w_rg": w_rg,
           "w_proj": w_proj}
    return {k: v.to(dtype) for k, v in out.items()}


def loss_fn(w: torch.Tensor, prob: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
    """½ Σ d (Φw − target)², the target blocked by the named ``quadratic_target.target``."""
    values = prob["phi"] @ w
    # The bootstrap target r + γ P Φ w is a regression label: TD treats it as a constant.
    target = stop_gradient(prob["r"] + gamma * prob["P"] @ values, name="quadratic_target.target")
    return 0.5 * (prob["d"] * (values - target) ** 2).sum()


@torch.no_grad()
def _value_error(w: torch.Tensor, prob: dict[str, torch.Tensor]) -> float:
    """‖Φw − V‖_D, the D-weighted RMS error of the value estimate."""
    diff = (prob["phi"] @ w - prob["V"]).double()
    return float((prob["d"].double() * diff**2).sum().sqrt())


def train(prob: dict[str, torch.Tensor], params: Params, dtype: torch.dtype
          ) -> list[dict[str, Any]]:
    """Gradient descent from w = 0; returns the logged rows and the final weights."""
    w = torch.zeros(params.n_features, dtype=dtype, requires_grad=True)
    rows: list[dict[str, Any]] = []
    for step in range(params.n_steps + 1):
        loss = loss_fn(w, prob, params.gamma)
        if step % params.log_every == 0 or step == params.n_steps:
            with torch.no_grad():
                bellman = prob["r"] + params.gamma * prob["P"] @ (prob["phi"] @ w) - prob["phi"] @ w
                rows.append({"step": step, "train/msbe": float((prob["d"] * bellman**2).sum()),
                             "value/error": _value_error(w, prob),
                             "weights/dist_td": float((w - prob["w_td"]).norm()),
                             "weights/dist_rg": float((w - prob["w_rg"]).norm()),
                             "w": w.tolist()})
        if step == params.n_steps:
            break
        (grad,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= params.lr * grad
    return rows


def analytic_gradients(w: torch.Tensor, prob: dict[str, torch.Tensor], gamma: float
                       ) -> dict[str, torch.Tensor]:
    """Closed forms: semi-gradient Φᵀ D (Φw − r − γPΦw) and full gradient ((I − γP)Φ)ᵀ D (…)."""
    phi, P, d = prob["phi"], prob["P"], prob["d"]
    residual = phi @ w - prob["r"] - gamma * P @ (phi @ w)
    semi = phi.T @ (d * residual)
    eye = torch.eye(len(d), dtype=phi.dtype)
    full = ((eye - gamma * P) @ phi).T @ (d * residual)
    return {"blocked": semi, "unblocked": full}


def run(params: Params, ctx: RunContext) -> None:
    prob = make_problem(params.n_states, params.n_features, params.gamma,
                        generator=ctx.generator, dtype=ctx.dtype)
    with ctx.timer("train"):
        runs = ctx.compare(lambda: train(prob, params, ctx.dtype))
    for variant, rows in runs.items():
        for row in rows:
            ctx.log(row["step"], **{f"{variant}/{k}": v for k, v in row.items()
                                    if k not in ("step", "w")})
    # Gradients with and without the block along the blocked trajectory, checked against the
    # closed forms. Errors are relative to the closed-form gradient's norm at w = 0, so that
    # they stay meaningful when the gradient vanishes at convergence.
    max_ref_err = {"blocked": 0.0, "unblocked": 0.0}
    scale = {k: float(g.norm()) or 1.0 for k, g in
             analytic_gradients(torch.zeros(params.n_features, dtype=ctx.dtype), prob,
                                params.gamma).items()}
    for row in runs["blocked"]:
        w = torch.tensor(row["w"], dtype=ctx.dtype, requires_grad=True)
        with torch.no_grad():
            exact = analytic_gradients(w, prob, params.gamma)
        cmp = compare_gradients(lambda w=w: loss_fn(w, prob, params.gamma), {"w": w},
                                disable=ctx.disable_patterns)
        blocked_err = float((cmp.blocked["w"] - exact["blocked"]).norm()) / scale["blocked"]
        unblocked_err = float((cmp.unblocked["w"] - exact["unblocked"]).norm()) / scale["unblocked"]
        max_ref_err["blocked"] = max(max_ref_err["blocked"], blocked_err)
        max_ref_err["unblocked"] = max(max_ref_err["unblocked"], unblocked_err)
        # at the blocked iterate: norms of both gradients (the blocked one vanishes at the TD
        # fixed point, the full gradient of the same loss does not) and their cosine
        ctx.log(row["step"], **{"blocked/grad/cosine_vs_unblocked": cmp.overall.cosine,
                                "blocked/grad/norm": cmp.overall.norm_blocked,
                                "unblocked/grad/norm": cmp.overall.norm_unblocked,
                                "blocked/grad/ref_rel_err": blocked_err,
                                "unblocked/grad/ref_rel_err": unblocked_err})

    final = {v: rows[-1] for v, rows in runs.items()}
    w_proj = prob["w_proj"]
    ctx.summary(
        blocked={"value_error": final["blocked"]["value/error"],
                 "msbe": final["blocked"]["train/msbe"],
                 "dist_to_td_fixed_point": final["blocked"]["weights/dist_td"],
                 "grad_max_err_vs_closed_form": max_ref_err["blocked"]},
        unblocked={"value_error": final["unblocked"]["value/error"],
                   "msbe": final["unblocked"]["train/msbe"],
                   "dist_to_rg_fixed_point": final["unblocked"]["weights/dist_rg"],
                   "grad_max_err_vs_closed_form": max_ref_err["unblocked"]},
        closed_form={"value_error_td": _value_error(prob["w_td"], prob),
                     "value_error_rg": _value_error(prob["w_rg"], prob),
                     "value_error_best": _value_error(w_proj, prob)},
    )
    ctx.save_artifact("values", {
        "true": prob["V"], "td": prob["phi"] @ prob["w_td"], "rg": prob["phi"] @ prob["w_rg"],
        "best": prob["phi"] @ w_proj, "d": prob["d"],
        "blocked": prob["phi"] @ torch.tensor(final["blocked"]["w"], dtype=ctx.dtype),
        "unblocked": prob["phi"] @ torch.tensor(final["unblocked"]["w"], dtype=ctx.dtype)})


def figures(run: RunResults) -> dict[str, Any]:
    """The learned value functions against the true one and both closed-form fixed points."""
    import matplotlib.pyplot as plt
    import numpy as np

    values = run.artifact("values")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    states = np.arange(len(values["true"]))
    ax.plot(states, values["true"], "k-o", label="true V")
    ax.plot(states, values["best"], "k:", label="best in span(Φ)")
    ax.plot(states, values["td"], "C0--", label="TD fixed point")
    ax.plot(states, values["rg"], "C1--", label="residual-gradient fixed point")
    ax.plot(states, values["blocked"], "C0o", mfc="none", label="blocked (learned)")
    ax.plot(states, values["unblocked"], "C1s", mfc="none", label="unblocked (learned)")
    ax.set_xlabel("state")
    ax.set_ylabel("value")
    ax.set_title("value function: blocked target (TD) vs unblocked (residual gradient)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return {"value_function": fig}
