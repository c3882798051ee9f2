"""TD learning with the bootstrapped target blocked (semi-gradient TD) and not (residual gradient).

Three problems with closed forms, each fitted by expected (full-batch) gradient updates on the
TD loss ``½ Σ μ (V(s) − r − γ sg(V(s')))²`` of :mod:`toolkit.algorithms.td`, with the target
behind the block ``"td.target"`` and inside ``disable_blocks("td.*")``:

- **A-split** (Sutton & Barto, Example 11.2; tabular, γ = 1): TD finds the true values
  A = ½, B = 1, C = 0; the naive residual gradient (the gradient of the squared *sample* TD
  error) finds A = ½, B = ¾, C = ¼.
- **Baird's counterexample** (Example 11.1; 7 states, 8 weights, γ = 0.99, α = 0.01,
  w₀ = (1, 1, 1, 1, 1, 1, 10, 1), expected updates): semi-gradient TD (semi-gradient DP)
  diverges, the residual gradient converges. The block is not free.
- **a random chain** (8 states, 3 linear features, on-policy): each variant reaches its closed-form
  fixed point, ``w_TD`` with the block and ``w_RG`` without it; the autograd gradients are checked
  against both closed forms at every logged step.

References:
    Sutton & Barto, *Reinforcement Learning: An Introduction*, 2nd ed., 2018, §9.3, §11.2,
    §11.5, http://incompleteideas.net/book/the-book-2nd.html ;
    Baird (1995), https://doi.org/10.1016/B978-1-55860-377-6.50013-X ;
    Tsitsiklis & Van Roy (1997), https://doi.org/10.1109/9.580874
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from pydantic import Field

from toolkit import compare_gradients, disable_blocks
from toolkit.algorithms.td import (
    A_SPLIT_NAIVE_RESIDUAL_VALUES,
    A_SPLIT_TRUE_VALUES,
    BLOCK,
    a_split,
    baird_counterexample,
    gradient_descent,
    random_chain,
)
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    fmt,
)
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS
from toolkit.lab.style import place_legend, variant_style

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = ("TD learning: the bootstrapped target blocked (semi-gradient TD) vs not (residual "
               "gradient) on the A-split, Baird's counterexample and a random chain")
STORY = Story(
    compares="expected TD(0) updates with the bootstrapped target blocked (semi-gradient TD) and "
             "unblocked (residual gradient) on three problems with closed forms",
    block=f"{BLOCK}: δ = r + γ stop_gradient(V(s')) − V(s)",
    prediction="blocked: the true A-split values (½, 1, 0) but divergence on Baird's "
               "counterexample; unblocked: the wrong A-split values (½, ¾, ¼) but convergence "
               "on Baird's counterexample",
)
#: The precision the comparison is defined in (the showcase runs it in this dtype).
DTYPE = "float64"


class Params(ExperimentParams):
    n_states: int = Field(8, ge=2, description="random chain: number of states")
    n_features: int = Field(3, ge=1, description="random chain: number of linear features")
    gamma: float = Field(0.9, ge=0.0, lt=1.0, description="random chain: discount factor")
    lr: float = Field(0.5, gt=0.0, description="random chain: gradient step size")
    chain_steps: int | None = Field(
        None, ge=1, le=1_000_000,
        description="random chain: full-batch gradient steps; None: as many as both variants "
                    "need to shrink their distance to the fixed point by 1e-10")
    a_split_lr: float = Field(1.0, gt=0.0, description="A-split: gradient step size")
    a_split_steps: int = Field(200, ge=1, le=1_000_000, description="A-split: full-batch gradient steps")
    baird_alpha: float = Field(0.01, gt=0.0, description="Baird: step size α (book: 0.01)")
    baird_gamma: float = Field(0.99, ge=0.0, le=1.0, description="Baird: discount γ (book: 0.99)")
    baird_sweeps: int = Field(1000, ge=1, le=1_000_000, description="Baird: expected-update sweeps (book: 1000)")
    log_every: int = Field(5, ge=1, description="log metrics every this many steps or sweeps")


QUICK: dict[str, Any] = {"log_every": 10}
STATES = tuple(A_SPLIT_TRUE_VALUES)


# --- data: three problems with closed forms -------------------------------------------------------


def make_problems(params: Params, ctx: RunContext) -> tuple[Any, tuple[Any, torch.Tensor], Any]:
    """The A-split table (tabular, four sampled transitions), Baird's counterexample with the
    book's initial weights, and a random chain drawn from ``ctx.generator``."""
    kw = {"dtype": ctx.dtype, "device": ctx.device}
    return (a_split(**kw), baird_counterexample(params.baird_gamma, **kw),
            random_chain(params.n_states, params.n_features, params.gamma,
                         generator=ctx.generator, **kw))


# --- the comparison: each problem fitted with the target blocked and not --------------------------


def run(params: Params, ctx: RunContext) -> None:
    kw, every = {"dtype": ctx.dtype, "device": ctx.device}, params.log_every
    table, (mrp, w0), chain = make_problems(params, ctx)
    w_td, w_rg = chain.td_fixed_point(), chain.residual_gradient_fixed_point()
    a_runs = descend(ctx, lambda v: table.loss(v, 1.0), torch.zeros(len(STATES), **kw),
                     params.a_split_lr, params.a_split_steps, every,
                     lambda w: {f"a_split/V_{s}": w[i] for i, s in enumerate(STATES)})
    b_runs = descend(ctx, mrp.loss, w0, params.baird_alpha, params.baird_sweeps, every,
                     lambda w: {"baird/weight_norm": w.norm(), "baird/msbe": mrp.msbe(w)})
    steps = params.chain_steps or steps_to_converge(chain, params.lr)
    c_runs = descend(ctx, chain.loss, torch.zeros(params.n_features, **kw), params.lr, steps, every,
                     lambda w: {"chain/value_error": chain.value_error(w),
                                "chain/msbe": chain.msbe(w), "chain/dist_td": (w - w_td).norm(),
                                "chain/dist_rg": (w - w_rg).norm()})
    grad_err = check_gradients(chain, c_runs[BLOCKED][0], steps, params.log_every, ctx)
    a_pred = predicted_paths(ctx, lambda v: table.loss(v, 1.0), torch.zeros(len(STATES), **kw),
                             params.a_split_lr, params.a_split_steps)
    b_pred = predicted_paths(ctx, mrp.loss, w0, params.baird_alpha, params.baird_sweeps)
    c_pred = predicted_paths(ctx, chain.loss, torch.zeros(params.n_features, **kw), params.lr,
                             steps)
    truth = {BLOCKED: torch.tensor(list(A_SPLIT_TRUE_VALUES.values()), dtype=torch.float64),
             UNBLOCKED: torch.tensor(list(A_SPLIT_NAIVE_RESIDUAL_VALUES.values()),
                                     dtype=torch.float64)}
    ctx.summary(
        a_split={**a_split_summary(a_runs), "predicted_err_vs_book": {
            v: _size(a_pred[v][-1] - truth[v], "max") for v in a_pred}},
        baird={**baird_summary(mrp, b_runs), "predicted": {
            v: {"final_weight_norm": _size(path[-1]),
                "last_100_sweeps_change": _size(path[1] - path[0])}
            for v, path in b_pred.items()}},
        chain={"steps": steps, **chain_summary(chain, c_runs, grad_err, w_td, w_rg),
               "predicted_dist": {BLOCKED: _size(c_pred[BLOCKED][-1] - w_td.double().cpu()),
                                  UNBLOCKED: _size(c_pred[UNBLOCKED][-1]
                                                   - w_rg.double().cpu())}})
    ctx.costs(seconds_per_update={  # per update made (fewer than asked after an overflow)
        case: {v: out[1] / max(len(out[0]) - 1, 1) for v, out in runs.items()}
        for case, runs in (("a_split", a_runs), ("baird", b_runs), ("chain", c_runs))})
    ctx.save_artifact("a_split", {f"{v}": out[0] for v, out in a_runs.items()})
    ctx.save_artifact("baird", {f"{v}": out[0] for v, out in b_runs.items()})
    ctx.save_artifact("chain", {
        "true": chain.true_values(), "td": chain.phi @ w_td, "rg": chain.phi @ w_rg,
        "best": chain.phi @ chain.best_weights(), "d": chain.d,
        **{v: chain.phi @ out[0][-1] for v, out in c_runs.items()}})


def steps_to_converge(chain: Any, lr: float, shrink: float = 1e-10) -> int:
    """Full-batch steps after which both variants are ``shrink`` times closer to their fixed
    point: the semi-gradient iteration is ``w ← w − lr·(ΦᵀDAw − ΦᵀDr)`` and the residual
    gradient's ``w ← w − lr·(AᵀDAw − AᵀDr)`` (``A = (I − γP)Φ``), each contracting by its
    matrix's spectral radius ρ per step, so ``log(shrink) / log(ρ)`` steps. The drawn chain
    decides ρ: over seeds 0-99 of the default chain, 60 to 1,818 steps."""
    matrices = {k: m for k, (m, _) in chain.expected_gradients().items()}
    eye = torch.eye(chain.phi.shape[1], dtype=chain.phi.dtype, device=chain.phi.device)
    needed = []
    for name, variant in (("semi-gradient", BLOCKED), ("residual gradient", UNBLOCKED)):
        rho = float(torch.linalg.eigvals((eye - lr * matrices[variant]).cpu()).abs().max())
        if not rho < 1:
            raise ValueError(f"td_learning: with lr = {lr} the random chain's {name} iteration "
                             f"does not contract (spectral radius {rho:.4g}); lower lr, or set "
                             f"chain_steps to run a fixed number of steps")
        needed.append(math.ceil(math.log(shrink) / math.log(rho)))
    return min(max(needed), 1_000_000)


def descend(ctx: RunContext, loss: Callable[[torch.Tensor], torch.Tensor], w0: torch.Tensor,
            lr: float, n_steps: int, every: int,
            metrics: Callable[[torch.Tensor], dict[str, Any]]
            ) -> dict[str, tuple[torch.Tensor, float]]:
    """Gradient descent on ``loss`` from ``w0`` with the target blocked and not
    (``ctx.compare``): each variant's iterates and seconds, its ``metrics(w)`` logged at every
    ``every``-th step as soon as it has run."""
    def log(variant: str, out: tuple[torch.Tensor, float]) -> None:
        for step in _logged(n_steps, every, out[0]):
            ctx.log(step, **{f"{variant}/{k}": v for k, v in metrics(out[0][step]).items()})

    def fit() -> tuple[torch.Tensor, float]:
        start = time.perf_counter()
        path = gradient_descent(loss, w0, lr=lr, n_steps=n_steps)
        return path, time.perf_counter() - start

    return ctx.compare(fit, on_result=log)


def _size(x: torch.Tensor, norm: str = "2") -> float:
    """``x``'s 2-norm (or largest absolute entry), ``inf`` for a path predicted to overflow
    (whose entries are ``inf`` or ``nan``)."""
    value = float(x.abs().max() if norm == "max" else x.norm())
    return value if math.isfinite(value) else math.inf


def predicted_paths(ctx: RunContext, loss: Callable[[torch.Tensor], torch.Tensor],
                    w0: torch.Tensor, lr: float, n_steps: int) -> dict[str, torch.Tensor]:
    """Where ``n_steps`` of gradient descent on ``loss`` must end, with the target blocked and
    not, in float64 on the CPU, without taking the steps. Both updates are affine in ``w``
    (the squared TD error of a linear value function, its target cut or not): ``g(w) = Hw −
    c``. ``H``'s columns are read off the update itself, ``g(w₀ + eᵢ) − g(w₀)`` (exact for an
    affine map; autograd's second derivative would not see through the cut target), so one
    step is ``w ← (I − lr·H)w + lr·c`` and ``n`` steps its ``n``-th power (by squaring).
    Returns each variant's ``[w_{n−100}, w_n]`` (``[w_0, w_n]`` for fewer steps)."""
    w0 = w0.detach().to("cpu", torch.float64)
    k = w0.numel()
    out = {}
    for variant, switch in ((BLOCKED, contextlib.nullcontext),
                            (UNBLOCKED, lambda: disable_blocks(*ctx.disable_patterns))):
        def grad(w: torch.Tensor, switch: Callable[[], Any] = switch) -> torch.Tensor:
            w = w.to(ctx.device, ctx.dtype).clone().requires_grad_(True)
            with switch():
                return torch.autograd.grad(loss(w), w)[0].to("cpu", torch.float64)
        g0 = grad(w0)
        H = torch.stack([grad(w0 + e) - g0 for e in torch.eye(k, dtype=torch.float64)], 1)
        step = torch.eye(k + 1, dtype=torch.float64)
        step[:k, :k] -= lr * H
        step[:k, k] = -lr * (g0 - H @ w0)
        start = torch.cat([w0, torch.ones(1, dtype=torch.float64)])
        out[variant] = torch.stack([torch.linalg.matrix_power(step, n) @ start
                                    for n in (max(n_steps - 100, 0), n_steps)])[:, :k]
    return out


def check_gradients(chain: Any, path: torch.Tensor, steps: int, every: int, ctx: RunContext
                    ) -> dict[str, float]:
    """Autograd gradients with and without the block at the blocked iterates, against the
    closed forms; errors relative to the closed-form gradient's norm at w = 0."""
    scale = {k: float(g.norm()) or 1.0 for k, g in chain.gradients(torch.zeros_like(path[0]))
             .items()}
    worst = {BLOCKED: 0.0, UNBLOCKED: 0.0}
    for step in _logged(steps, every, path):
        w = path[step].clone().requires_grad_(True)
        exact = chain.gradients(path[step])
        cmp = compare_gradients(lambda w=w: chain.loss(w), {"w": w},
                                disable=ctx.disable_patterns)
        errors = {BLOCKED: float((cmp.blocked["w"] - exact[BLOCKED]).norm()),
                  UNBLOCKED: float((cmp.unblocked["w"] - exact[UNBLOCKED]).norm())}
        for v in worst:
            worst[v] = max(worst[v], errors[v] / scale[v])
        ctx.log(step, **{f"{BLOCKED}/chain_grad/cosine_vs_unblocked": cmp.overall.cosine,
                         f"{BLOCKED}/chain_grad/norm": cmp.overall.norm_blocked,
                         f"{UNBLOCKED}/chain_grad/norm": cmp.overall.norm_unblocked})
    return worst


def a_split_summary(runs: dict[str, tuple[torch.Tensor, float]]) -> dict[str, Any]:
    """Final values per variant against the book's values for its update."""
    final = {v: dict(zip(STATES, out[0][-1].tolist())) for v, out in runs.items()}
    truth = {BLOCKED: A_SPLIT_TRUE_VALUES, UNBLOCKED: A_SPLIT_NAIVE_RESIDUAL_VALUES}
    return {v: {"values": final[v],
                "max_err_vs_book": max(abs(final[v][s] - truth[v][s]) for s in STATES),
                **_diverged_at(runs[v][0])} for v in final} | {
        "book": {"td": A_SPLIT_TRUE_VALUES, "naive_residual": A_SPLIT_NAIVE_RESIDUAL_VALUES}}


def baird_summary(mrp: Any, runs: dict[str, tuple[torch.Tensor, float]]) -> dict[str, Any]:
    """Weight norms at the start and the end, the last 100 sweeps' change, the final error."""
    out = {}
    for v, (w, _) in runs.items():
        out[v] = {"initial_weight_norm": w[0].norm(), "final_weight_norm": w[-1].norm(),
                  "final_msbe": mrp.msbe(w[-1]),
                  "final_value_rms": (mrp.phi @ w[-1]).pow(2).mean().sqrt(),
                  "last_100_sweeps_change": (w[-1] - w[-101 if len(w) > 100 else 0]).norm(),
                  **_diverged_at(w)}
    return out


def chain_summary(chain: Any, runs: dict[str, tuple[torch.Tensor, float]],
                  grad_err: dict[str, float], w_td: torch.Tensor, w_rg: torch.Tensor
                  ) -> dict[str, Any]:
    """Each variant's errors and distance to its own closed-form fixed point."""
    fixed = {BLOCKED: ("dist_to_td_fixed_point", w_td),
             UNBLOCKED: ("dist_to_rg_fixed_point", w_rg)}
    out = {}
    for v, (name, w_star) in fixed.items():
        w = runs[v][0][-1]
        out[v] = {"value_error": chain.value_error(w), "msbe": chain.msbe(w),
                  name: (w - w_star).norm(), "grad_max_err_vs_closed_form": grad_err[v],
                  **_diverged_at(runs[v][0])}
    out["closed_form"] = {"value_error_td": chain.value_error(fixed[BLOCKED][1]),
                          "value_error_rg": chain.value_error(fixed[UNBLOCKED][1]),
                          "value_error_best": chain.value_error(chain.best_weights())}
    return out


def _logged(n_steps: int, every: int, path: torch.Tensor | None = None) -> list[int]:
    """The logged steps: every ``every``-th and the last; with ``path`` (iterates that stop at
    an overflow, see :func:`_diverged_at`), the last finite iterate instead of later ones."""
    steps = sorted({*range(0, n_steps + 1, every), n_steps})
    if path is None or len(path) == n_steps + 1:
        return steps
    return sorted({*(s for s in steps if s < len(path)), len(path) - 1})


def _diverged_at(path: torch.Tensor) -> dict[str, Any]:
    """``{"diverged_at": record}`` when gradient descent stopped at a non-finite value (an
    overflow, not the growth it measures), else nothing: the iterates end there."""
    divergence = getattr(path, "divergence", None)
    return {} if divergence is None else {"diverged_at": divergence.as_dict()}


# --- findings -------------------------------------------------------------------------------------


def _values(prefix: str, values: dict[str, float]) -> tuple[str, dict[str, float]]:
    """``"A = {p_A}, B = {p_B}, C = {p_C}"`` and the values it names."""
    return (", ".join(f"{s} = {{{prefix}_{s}}}" for s in STATES),
            {f"{prefix}_{s}": values[s] for s in STATES})


BOOK = "Sutton & Barto (2018), Example 11.2, in closed form"
BAIRD = "Baird (1995); Sutton & Barto (2018), Example 11.1 and §11.5"


def findings(run: RunResults) -> list[Finding]:
    """Five or six sentences with their numbers and verdicts, from ``summary.json`` and
    ``costs.json``. Each prediction is about where an iteration ends; where the run's
    parameters stop it short of that (the update's closed form says where ``n`` steps end,
    :func:`predicted_paths`), the finding is a measurement that says so."""
    params = run.params
    eps = float(torch.finfo(getattr(torch, run.config.get("dtype") or "float32")).eps)
    out = [*_a_split_findings(run.summary["a_split"], params, max(1e-6, 100 * eps)),
           *_baird_findings(run.summary["baird"], params), _chain_finding(run, eps)]
    cost = run.costs.get("seconds_per_update", {}).get("baird", {})
    if {BLOCKED, UNBLOCKED} <= set(cost):
        out.append(Finding("An expected update on Baird's counterexample takes {b:s} blocked "
                           "and {u:s} unblocked (the unblocked graph also runs through the "
                           "target; one timing of the whole fit each).", None, "cost",
                           values={"b": cost[BLOCKED], "u": cost[UNBLOCKED]}))
    return out


def _short_of(predicted: float | None, tol: float, what: str) -> str:
    """Why a run is outside a prediction's range: the closed form of its own steps ends
    ``predicted`` away, not within ``tol``; empty when it ends well within (a tenth)."""
    if predicted is None or predicted < tol / 10:
        return ""
    where = "short of" if predicted >= tol else "too near for rounding to decide"
    return (f"{what} end, by the update's closed form, {fmt(predicted)} away, {where} the "
            f"{fmt(tol)} the verdict reads; more steps reach it.")


def _a_split_findings(a: dict[str, Any], params: dict[str, Any], tol: float) -> list[Finding]:
    found_b, values_b = _values("v", a[BLOCKED]["values"])
    found_u, values_u = _values("v", a[UNBLOCKED]["values"])
    predicted = a.get("predicted_err_vs_book", {})
    steps = (f"{params.get('a_split_steps', 200)} steps of lr "
             f"{fmt(params.get('a_split_lr', 1.0))}")
    return [
        Finding(f"A-split: with the block TD finds {found_b}, the true values (book: A = 0.5, "
                "B = 1, C = 0; largest difference {err}).", a[BLOCKED]["max_err_vs_book"] < tol,
                basis=BOOK, values={**values_b, "err": a[BLOCKED]["max_err_vs_book"]},
                seed_independent=True,
                outside=_short_of(predicted.get(BLOCKED), tol, f"TD's {steps}")),
        Finding(f"A-split: without it the naive residual gradient finds {found_u} (book: "
                "A = 0.5, B = 0.75, C = 0.25; largest difference {err}).",
                a[UNBLOCKED]["max_err_vs_book"] < tol,
                basis=BOOK, values={**values_u, "err": a[UNBLOCKED]["max_err_vs_book"]},
                seed_independent=True,
                outside=_short_of(predicted.get(UNBLOCKED), tol,
                                  f"the residual gradient's {steps}"))]


def _baird_outside(b: dict[str, Any], n: int, alpha: float) -> str:
    """Why Baird's predictions cannot be read in ``n`` sweeps: the expected updates' closed
    form grows semi-gradient TD less than 20-fold, or leaves the residual gradient still
    moving by more than 0.005 over the last 100 sweeps (twice the verdict's margins)."""
    predicted = b.get("predicted")
    if not predicted:
        return ""
    growth = predicted[BLOCKED]["final_weight_norm"] / b[BLOCKED]["initial_weight_norm"]
    change = predicted[UNBLOCKED]["last_100_sweeps_change"]
    if growth >= 20 and predicted[BLOCKED]["last_100_sweeps_change"] >= 2 and change <= 5e-3:
        return ""
    return (f"in {n} sweeps of α = {fmt(alpha)} the expected updates' closed form grows "
            f"semi-gradient TD's weights {fmt(growth)}-fold (the verdict reads more than "
            f"10-fold) and leaves the residual gradient moving {fmt(change)} over the last "
            f"100 sweeps (read as under 0.01); the book's 1000 sweeps reach both.")


def _baird_findings(b: dict[str, Any], params: dict[str, Any]) -> list[Finding]:
    n = params.get("baird_sweeps", 1000)
    outside = _baird_outside(b, n, params.get("baird_alpha", 0.01))
    ab, au = b[BLOCKED], b[UNBLOCKED]
    stop = ab.get("diverged_at")  # the loop stopped where its squared TD error overflowed
    overflow = (f" (its {stop['quantity']} overflowed to inf at sweep {stop['step']}, where the "
                f"run stopped)") if stop else ""
    diverges = ab["final_weight_norm"] > 10 * ab["initial_weight_norm"]
    return [
        Finding(f"Baird's counterexample: with the block semi-gradient TD diverges, the weight "
                f"norm growing from {{w0}} to {{w1}} in {n} sweeps{overflow}; without it the residual "
                f"gradient converges to a norm of {{u1}} (change over the last 100 sweeps "
                f"{{du}}, mean squared Bellman error {{msbe}}).",
                diverges and ab["last_100_sweeps_change"] > 1.0
                and au["last_100_sweeps_change"] < 1e-2,
                basis=BAIRD, values={"w0": ab["initial_weight_norm"],
                                     "w1": ab["final_weight_norm"],
                                     "u1": au["final_weight_norm"],
                                     "du": au["last_100_sweeps_change"],
                                     "msbe": au["final_msbe"]},
                seed_independent=True, outside=outside,
                headline=Headline("weight norm after the sweeps", "w1", "u1",
                                  thresholds=(10 * ab["initial_weight_norm"],), log=True,
                                  reading="semi-gradient TD (blocked) diverges on Baird's "
                                          "example")),
        Finding(f"The block is not free: the cut that gives TD the true A-split values makes it "
                f"diverge on Baird's counterexample, while the residual gradient is stable but "
                f"slow: its value estimates are still {{rms}} (RMS) from the true values 0 "
                f"after {n} sweeps.",
                diverges and au["final_weight_norm"] < au["initial_weight_norm"],
                basis=BAIRD, values={"rms": au["final_value_rms"]}, seed_independent=True,
                outside=outside)]


def _chain_finding(run: RunResults, eps: float) -> Finding:
    c = run.summary["chain"]
    steps = c.get("steps", run.params.get("chain_steps") or 300)
    last = {key: float(run.metric(key)[1][-1])
            for key in (f"{BLOCKED}/chain/dist_rg", f"{UNBLOCKED}/chain/dist_td")}
    grad_err = max(c[BLOCKED]["grad_max_err_vs_closed_form"],
                   c[UNBLOCKED]["grad_max_err_vs_closed_form"])
    d_td, d_rg = c[BLOCKED]["dist_to_td_fixed_point"], c[UNBLOCKED]["dist_to_rg_fixed_point"]
    # ‖w_TD − w_RG‖, within d_td (or d_rg) of what each run logged last
    gap = min(last[f"{BLOCKED}/chain/dist_rg"], last[f"{UNBLOCKED}/chain/dist_td"])
    predicted = c.get("predicted_dist")
    outside = _short_of(max(predicted.values()) if predicted else None, 1e-3 * gap,
                        f"{steps} steps of lr {fmt(run.params.get('lr', 0.5))} (chain_steps; "
                        f"unset, the run goes on until both converge)")
    grad_tol = max(1e-10, 1e3 * eps)  # rounding of the dtype's closed-form products
    return Finding(
        "Random chain: autograd matches both closed-form gradients, the semi-gradient "
        "and the residual gradient, to {g}; after {steps} steps TD is {d_td} from "
        "w_TD and the residual gradient {d_rg} from w_RG, fixed points {gap} "
        "apart; value error {ve_b} blocked vs {ve_u} unblocked (best in the span "
        "{best}).",
        grad_err < grad_tol and max(d_td, d_rg) < 1e-3 * gap,
        basis="the expected TD update converges to w_TD (Tsitsiklis & Van Roy 1997) "
              "and the residual gradient to the minimiser of the Bellman error, w_RG "
              "(Sutton & Barto 2018, §11.5)",
        values={"g": grad_err, "steps": steps, "d_td": d_td, "d_rg": d_rg, "gap": gap,
                "ve_b": c[BLOCKED]["value_error"], "ve_u": c[UNBLOCKED]["value_error"],
                "best": c["closed_form"]["value_error_best"]},
        outside=outside)


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """A-split values and Baird's weight norm (the headline), then the random chain."""
    return {
        "a_split_values": (
            _a_split_figure(run),
            "Learned values of the A-split states after training with γ = 1: the blocked TD "
            "update finds the true values (dark grey lines: A = 0.5, B = 1, C = 0), the "
            "unblocked residual gradient the values Sutton & Barto derive for it (B = 0.75, "
            "C = 0.25)."),
        "baird_weight_norm": (
            _baird_figure(run),
            "Norm of the weight vector on Baird's seven-state star, sweep by sweep of expected "
            "updates: semi-gradient TD (blocked) diverges exponentially, the residual gradient "
            "(unblocked) converges, slowly, to weights whose values are all near 0."),
        "chain_values": (
            _chain_figure(run),
            "Values of the random chain's states: the true values, the best fit the features "
            "allow, and each variant's fixed point in closed form (lines) with what training "
            "learned (open markers, on their fixed points): TD's fixed point is not the best "
            "fit, and the residual gradient's is another point again."),
    }


def _a_split_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import subplots, variant_bars

    values = run.summary["a_split"]
    fig, ax = subplots(figsize=(6.4, 3.6))
    bars = variant_bars(ax, [f"state {k}" for k in STATES],
                        {v: [values[v]["values"][k] for k in STATES] for v in VARIANTS},
                        labels={BLOCKED: "blocked (TD)",
                                UNBLOCKED: "unblocked (naive residual gradient)"},
                        width=0.36, step=0.38)
    for container in bars.values():
        for bar, val in zip(container, container.datavalues):  # inside tall bars: off the
            inside = val > 0.15                                  # true-value lines
            ax.annotate(fmt(val), (bar.get_x() + bar.get_width() / 2, val), fontsize=9,
                        xytext=(0, -3 if inside else 3), textcoords="offset points", ha="center",
                        va="top" if inside else "bottom", color="white" if inside else "black")
    for j, k in enumerate(STATES):
        ax.hlines(A_SPLIT_TRUE_VALUES[k], j - 0.45, j + 0.45, lw=1.2, linestyles="-",
                  colors=variant_style("reference")["color"],
                  label="true value" if j == 0 else None)
    ax.set(ylabel="learned value", ylim=(0, 1.45))
    ax.set_title("A-split (Sutton & Barto, Example 11.2), γ = 1")
    place_legend(ax, fontsize=9, ncols=3, frameon=False)
    return fig


def _baird_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import step_axes, subplots

    baird = run.artifact("baird")
    fig, ax = subplots(figsize=(6.4, 3.6))
    for v, label in ((BLOCKED, "blocked (semi-gradient TD)"),
                     (UNBLOCKED, "unblocked (residual gradient)")):
        norms = np.linalg.norm(baird[v], axis=1)
        ax.plot(np.arange(len(norms)), norms, label=label, **variant_style(v))
    ax.set_yscale("log")
    ax.set_xlim(0, len(norms) - 1)
    step_axes(ax, "Baird's counterexample (Example 11.1), expected updates", "sweep",
              ylabel="weight norm ‖w‖", title_size=None, grid=False)
    place_legend(ax, fontsize=9)
    return fig


def _chain_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import step_axes, subplots

    values = run.artifact("chain")
    fig, ax = subplots(figsize=(8.4, 3.6))
    states = np.arange(len(values["true"]))
    ref = variant_style("reference")["color"]
    ax.plot(states, values["true"], marker="D", color=ref, label="true V")
    ax.plot(states, values["best"], linestyle=":", color=ref, label="best in span(Φ)")
    for v, key, name in ((BLOCKED, "td", "TD fixed point (blocked)"),
                         (UNBLOCKED, "rg", "residual-gradient fixed point (unblocked)")):
        style = variant_style(v)
        ax.plot(states, values[key], color=style["color"], linestyle=style["linestyle"],
                lw=1, label=name)
        ax.plot(states, values[v], "o" if v == BLOCKED else "s", mfc="none", ms=7,
                color=style["color"], label=f"{v}, learned")
    # each seed draws its own chain: one seed's is drawn (the findings cover every seed)
    step_axes(ax, f"random chain of seed {run.seed}: learned values vs both fixed points",
              "state", ylabel="value", title_size=None, grid=False)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig

