"""DiCE's magic box with and without its stop-gradient, against exact derivatives.

A two-step categorical policy (:class:`toolkit.algorithms.dice.TwoStepProblem`: a first action,
a second one conditioned on it, a random cost after each) has an objective ``J(θ)`` that can be
enumerated, so its exact gradient and Hessian come from autograd of the expectation. The DiCE
objective ``L_⊡ = Σ_t ⊡(Σ_{t'≤t} log p_t') c_t`` with ``⊡(τ) = exp(τ − sg(τ))`` (the ``sg`` is the
block ``"dice.magic_box"``) is differentiated twice:

- **in expectation**: every trajectory weighted by its probability, held constant (the part the
  samples play): DiCE's gradient and Hessian equal the exact ones to rounding, the classic
  surrogate loss ``Σ log p · c`` gets the gradient right and the Hessian wrong;
- **by Monte Carlo** with ``N`` sampled trajectories: DiCE's errors shrink like ``1/√N``; the
  surrogate's Hessian error stops at its bias;
- **without the block** the magic box is the constant 1 and every derivative is exactly zero.

References:
    Foerster et al. (2018), DiCE: The infinitely differentiable Monte-Carlo estimator, ICML,
    https://arxiv.org/abs/1802.05098 ; Schulman et al. (2015), Gradient estimation using
    stochastic computation graphs, https://arxiv.org/abs/1506.05254
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from pydantic import Field

from toolkit import disable_blocks
from toolkit.algorithms.dice import (
    BLOCK,
    TwoStepProblem,
    derivatives,
    dice_objective,
    surrogate_objective,
    two_step_problem,
)
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    TimeRatio,
    fmt,
)
from toolkit.lab.measure import race
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import variant_style

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = ("DiCE: gradient and Hessian of the magic-box objective with and without its "
               "stop-gradient, and of the classic surrogate, against exact ones")
STORY = Story(
    compares="the gradient and Hessian of the DiCE objective with and without the magic box's "
             "stop-gradient, and of the classic surrogate loss, against the exact derivatives of "
             "an enumerable two-step policy",
    block=f"{BLOCK}: ⊡(τ) = exp(τ − stop_gradient(τ))",
    prediction="blocked: the exact gradient and Hessian in expectation, Monte-Carlo errors "
               "falling like 1/√N; unblocked: ⊡ = 1 and every derivative vanishes; the "
               "surrogate: the right gradient, a wrong Hessian",
)
#: The precision the comparison is defined in (the showcase runs it in this dtype).
DTYPE = "float64"


class Params(ExperimentParams):
    n_actions: int = Field(3, ge=2, description="actions at each of the two steps")
    sample_sizes: list[int] = Field(
        default_factory=lambda: [10, 100, 1000, 10_000, 100_000],
        description="Monte-Carlo sample sizes N (trajectories per estimate)")
    repeats: int = Field(20, ge=2, description="independent estimates per sample size")
    timing_repeat: int = Field(
        9, ge=1, description="interleaved rounds timing each derivative computation (6 or more "
                             "give a 95 % interval of the median ratio)")


QUICK: dict[str, Any] = {"sample_sizes": [10, 100, 1000, 10_000], "repeats": 8,
                         "timing_repeat": 7}


# --- data: the problem and its sampled trajectories -----------------------------------------------


def make_problem(params: Params, ctx: RunContext
                 ) -> tuple[TwoStepProblem, torch.Tensor, dict[int, list[torch.Tensor]]]:
    """The two-step problem, its parameters θ and, per sample size N, ``repeats`` sets of N
    sampled trajectories (shared by every estimator)."""
    problem, theta = two_step_problem(params.n_actions, generator=ctx.generator,
                                      dtype=ctx.dtype, device=ctx.device)
    samples = {n: [problem.sample(theta, n, generator=ctx.generator)
                   for _ in range(params.repeats)] for n in sorted(set(params.sample_sizes))}
    return problem, theta, samples


# --- the comparison -------------------------------------------------------------------------------


def run(params: Params, ctx: RunContext) -> None:
    problem, theta, samples = make_problem(params, ctx)
    exact = derivatives(problem.exact_objective, theta)
    ns = list(samples)

    def estimate(objective: Callable[..., torch.Tensor]) -> dict[str, Any]:
        return estimate_errors(problem, theta, exact, samples, objective)

    runs = ctx.compare(lambda: estimate(dice_objective),
                       on_result=lambda variant, out: log(ctx, ns, variant, out))
    surrogate = estimate(surrogate_objective)
    log(ctx, ns, "surrogate", surrogate)
    mc = {v: r["monte_carlo"] for v, r in (*runs.items(), ("surrogate", surrogate))}
    ctx.summary(
        dice={k: runs[BLOCKED]["expectation"][k] for k in ("grad_rel_err", "hessian_rel_err")},
        surrogate={k: surrogate["expectation"][k] for k in ("grad_rel_err", "hessian_rel_err")},
        blocked=runs[BLOCKED]["expectation"] | {"value": runs[BLOCKED]["value"]},
        unblocked=runs[UNBLOCKED]["expectation"] | {"value": runs[UNBLOCKED]["value"]},
        exact={"objective": float(problem.exact_objective(theta)),
               "grad_norm": float(exact[0].norm()), "hessian_norm": float(exact[1].norm())},
        monte_carlo={"n_samples": ns, "repeats": params.repeats, **mc,
                     "slope": {"grad": _slope(ns, mc[BLOCKED]["grad_rel_err"]),
                               "hessian": _slope(ns, mc[BLOCKED]["hessian_rel_err"])},
                     "slope_se": {k: _slope_se(ns, params.repeats, runs[BLOCKED]["cv2"][key])
                                  for k, key in (("grad", "grad_rel_err"),
                                                 ("hessian", "hessian_rel_err"))}},
    )
    ctx.save_artifact("monte_carlo", {"n_samples": torch.tensor(ns)} | {
        f"{v}_{k}": torch.tensor(vals) for v, d in mc.items() for k, vals in d.items()})
    ctx.costs(**time_derivatives(problem, theta, samples[ns[-1]][0], params, ctx))


def estimate_errors(problem: TwoStepProblem, theta: torch.Tensor,
                    exact: tuple[torch.Tensor, torch.Tensor],
                    samples: dict[int, list[torch.Tensor]],
                    objective: Callable[..., torch.Tensor]) -> dict[str, Any]:
    """Errors of ``objective``'s gradient and Hessian against ``exact``: in expectation, and
    by Monte Carlo (root mean square over the repeats, per N, and ``cv2``: the squared
    coefficient of variation of the squared errors over the repeats, per N, which sets how
    precisely the root mean square is known); the objective's value."""
    out: dict[str, Any] = {"expectation": _errors(
        derivatives(_expectation(problem, theta, objective), theta), exact)}
    out["value"] = float(_expectation(problem, theta, objective)(theta))
    rms: dict[str, list[float]] = {"grad_rel_err": [], "hessian_rel_err": []}
    cv2: dict[str, list[float]] = {"grad_rel_err": [], "hessian_rel_err": []}
    for actions in samples.values():
        errs = [_errors(derivatives(_sampled(problem, a, objective), theta), exact)
                for a in actions]
        for key in rms:  # root mean square over the repeats
            squares = np.array([e[key] ** 2 for e in errs])
            rms[key].append(math.sqrt(squares.mean()))
            cv2[key].append(float(squares.var(ddof=1) / squares.mean() ** 2)
                            if squares.mean() > 0 else 0.0)
    out["monte_carlo"], out["cv2"] = rms, cv2
    return out


def log(ctx: RunContext, ns: list[int], variant: str, out: dict[str, Any]) -> None:
    """The errors in expectation (step 0) and by Monte Carlo (step N)."""
    ctx.log(0, **{f"{variant}/expectation/{k}": v for k, v in out["expectation"].items()})
    for i, n in enumerate(ns):
        ctx.log(n, **{f"{variant}/monte_carlo/{k}": v[i] for k, v in out["monte_carlo"].items()})


def time_derivatives(problem: TwoStepProblem, theta: torch.Tensor, actions: torch.Tensor,
                     params: Params, ctx: RunContext) -> dict[str, Any]:
    """What one gradient + Hessian from the trajectories ``actions`` costs, blocked, unblocked
    and with the surrogate, in interleaved rounds (drifting load hits every contender alike)."""
    blocked_fn = _sampled(problem, actions, dice_objective)
    surrogate_fn = _sampled(problem, actions, surrogate_objective)

    def unblocked() -> Any:
        with disable_blocks(*ctx.disable_patterns):
            return derivatives(blocked_fn, theta)

    timed = race({BLOCKED: lambda: derivatives(blocked_fn, theta), UNBLOCKED: unblocked,
                  "surrogate": lambda: derivatives(surrogate_fn, theta)},
                 rounds=params.timing_repeat, device=ctx.device)
    return {"derivatives_seconds": {"n_samples": len(actions),
                                    **{name: timed.median(name) for name in timed.names}},
            "dice_over_surrogate_rounds": list(timed.ratio(BLOCKED, "surrogate").rounds)}


def _expectation(problem: TwoStepProblem, theta: torch.Tensor,
                 objective: Callable[..., torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``θ ↦ Σ_τ p(τ) objective(τ; θ)`` with ``p(τ)`` at ``theta`` held constant."""
    traj = problem.trajectories()
    weights = problem.probabilities(theta)
    return lambda t: (weights * objective(problem.log_probs(t, traj), problem.costs(traj))).sum()


def _sampled(problem: TwoStepProblem, actions: torch.Tensor,
             objective: Callable[..., torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``θ ↦ mean_i objective(τ_i; θ)`` over sampled trajectories ``actions`` ``(N, 2)``."""
    costs = problem.costs(actions)
    return lambda t: objective(problem.log_probs(t, actions), costs).mean()


def _errors(estimate: tuple[torch.Tensor, torch.Tensor],
            exact: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    rel = lambda a, b: float((a - b).norm() / b.norm())  # noqa: E731
    return {"grad_rel_err": rel(estimate[0], exact[0]),
            "hessian_rel_err": rel(estimate[1], exact[1]),
            "grad_norm": float(estimate[0].norm()), "hessian_norm": float(estimate[1].norm())}


def _slope_se(ns: list[int], repeats: int, cv2: list[float]) -> float | None:
    """The standard error of :func:`_slope`'s fit: ``log RMS`` at each N is the log of a
    mean of ``repeats`` squared errors, known to ``½·cv/√repeats`` (the delta method; ``cv``
    pooled over the N); a least-squares slope over ``x = log N`` carries that divided by
    ``√Σ(x − x̄)²``. ``None`` with fewer than two sample sizes."""
    x = np.log(np.asarray(ns, dtype=np.float64))
    spread = float(((x - x.mean()) ** 2).sum())
    if len(ns) < 2 or spread == 0:
        return None
    return 0.5 * math.sqrt(float(np.mean(cv2)) / repeats) / math.sqrt(spread)


def _slope(ns: list[int], errors: list[float]) -> float:
    """Least-squares slope of log(error) against log(N)."""
    x = torch.tensor([math.log(n) for n in ns], dtype=torch.float64)
    y = torch.tensor([math.log(max(e, 1e-300)) for e in errors], dtype=torch.float64)
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x * x).sum())


# --- findings -------------------------------------------------------------------------------------


DICE = ("the DiCE property E[∇ⁿ ⊡(τ)·c] = ∇ⁿ E[c] for every n (Foerster et al. 2018, "
        "Theorem 1)")
#: Rounding is read as a thousand units of the run's dtype: its errors here are one or two.
ROUNDING_ULPS = 1e3
#: Monte-Carlo slopes: predicted −0.5 within this many standard errors of the fit (and no
#: closer than ``SLOPE_FLOOR``: the delta method's second-order terms).
SLOPE_SES, SLOPE_FLOOR = 4.0, 0.15
#: The fewest repeats whose spread gives the slope's standard error (with two sample sizes:
#: six degrees of freedom).
MIN_REPEATS = 4


def _dtype_eps(run: RunResults) -> tuple[str, float]:
    name = str(run.config.get("dtype") or DTYPE)
    return name, float(torch.finfo(getattr(torch, name)).eps)


def _rounding_outside(dtype: str, eps: float) -> str:
    """Why a run's precision is outside the range of the "to rounding" predictions: in
    float16 or bfloat16 a thousand units of rounding reach the effects the verdicts separate
    (the surrogate's Hessian error, the Monte-Carlo errors); empty in float32 and float64."""
    if ROUNDING_ULPS * eps <= 1e-3:
        return ""
    return (f"in {dtype} one unit of rounding is {fmt(eps)}, as large as the errors the "
            f"verdict tells apart; exactness to rounding is read in float32 or float64.")


def _slope_outside(ns: list[int], repeats: int, se: dict[str, Any]) -> str:
    """Why a run cannot test the 1/√N slope: it needs two sample sizes or more, and at least
    :data:`MIN_REPEATS` repeats to know the slope's sampling error from their spread."""
    if len(ns) < 2 or any(v is None for v in se.values()):
        return (f"a slope needs two sample sizes or more; this run has {len(ns)} "
                f"({', '.join(map(str, ns))}).")
    if repeats < MIN_REPEATS:
        return (f"the slope's sampling error is read from the spread over the repeats, which "
                f"needs {MIN_REPEATS} or more; this run has {repeats}.")
    return ""


def findings(run: RunResults) -> list[Finding]:
    """Four or five sentences with their numbers and verdicts. Tolerances follow the run's
    dtype (:data:`ROUNDING_ULPS` units of rounding) and the Monte-Carlo slope's own sampling
    error (:func:`_slope_se`); a run whose dtype or sample sizes cannot decide a verdict makes
    a measurement that says why."""
    s = run.summary
    d, sur, u, mc = s["dice"], s["surrogate"], s[UNBLOCKED], s["monte_carlo"]
    ns, repeats = mc["n_samples"], mc["repeats"]
    slope, se = mc["slope"], mc.get("slope_se", {"grad": 0.0, "hessian": 0.0})
    dtype, eps = _dtype_eps(run)
    tol = ROUNDING_ULPS * eps
    rounding = _rounding_outside(dtype, eps)
    slope_tol = {k: max(SLOPE_FLOOR, SLOPE_SES * v) if v is not None else SLOPE_FLOOR
                 for k, v in se.items()}
    exact = s["exact"]["objective"]
    value_tol = 10 * run.params.get("n_actions", 3) ** 2 * eps * max(1.0, abs(exact))
    out = [
        Finding("In expectation (every trajectory weighted by its probability, held constant) "
                "the DiCE gradient and Hessian equal the exact ones: relative errors {g} and "
                "{h} (rounding in {dtype}: expected ≤ {tol}).",
                d["grad_rel_err"] <= tol and d["hessian_rel_err"] <= tol, basis=DICE,
                values={"g": d["grad_rel_err"], "h": d["hessian_rel_err"], "tol": tol,
                        "dtype": dtype}, outside=rounding),
        Finding("The classic surrogate Σ log p · c gets the gradient right (relative error {g}) "
                "and the Hessian wrong (relative error {h}: it misses E[c ∇log p ∇log pᵀ]).",
                sur["grad_rel_err"] <= tol and sur["hessian_rel_err"] >= 0.1,
                basis="the score-function surrogate's second derivative drops the term "
                      "E[c ∇log p ∇log pᵀ] (Foerster et al. 2018, §3)",
                values={"g": sur["grad_rel_err"], "h": sur["hessian_rel_err"]},
                outside=rounding),
        Finding(f"By Monte Carlo the DiCE errors shrink like 1/√N: from N = {ns[0]} to {ns[-1]} "
                "the gradient's falls from {g0} to {g1} and the Hessian's from {h0} to {h1} "
                "(log-log slopes {sg} and {sh}; predicted −0.5 within {tg} and {th}, four "
                f"standard errors of each fit from the spread over the {repeats} repeats), "
                "while the surrogate's Hessian error stays at {sur}.",
                all(abs(slope[k] + 0.5) <= slope_tol[k] for k in ("grad", "hessian"))
                and mc["surrogate"]["hessian_rel_err"][-1] >= 0.1,
                basis="the estimators are unbiased means of N independent terms, so the mean "
                      "squared error is Var/N exactly and its root falls like N^(−1/2)",
                values={"g0": mc[BLOCKED]["grad_rel_err"][0],
                        "g1": mc[BLOCKED]["grad_rel_err"][-1],
                        "h0": mc[BLOCKED]["hessian_rel_err"][0],
                        "h1": mc[BLOCKED]["hessian_rel_err"][-1],
                        "sg": slope["grad"], "sh": slope["hessian"],
                        "tg": slope_tol["grad"], "th": slope_tol["hessian"],
                        "sur": mc["surrogate"]["hessian_rel_err"][-1]},
                outside=rounding or _slope_outside(ns, repeats, se)),
        Finding("Without the block the magic box is the constant 1: the objective keeps its "
                "value ({value}, exact {exact}) but the gradient and Hessian norms are {gn} and "
                "{hn} (exact: {egn} and {ehn}; with the block {bgn} and {bhn}).",
                u["grad_norm"] == 0 and u["hessian_norm"] == 0
                and abs(u["value"] - exact) <= value_tol,
                basis="exp(τ − τ) = 1 identically once the cut is gone, and a constant has no "
                      "derivative (the value: a sum of n_actions² terms, to its rounding)",
                values={"value": u["value"], "exact": exact,
                        "gn": u["grad_norm"], "hn": u["hessian_norm"],
                        "egn": s["exact"]["grad_norm"], "ehn": s["exact"]["hessian_norm"],
                        "bgn": s[BLOCKED]["grad_norm"], "bhn": s[BLOCKED]["hessian_norm"]},
                headline=Headline("norm of the objective's gradient", blocked="bgn",
                                  unblocked="gn", thresholds=(0.0,),
                                  reading="without the block every derivative vanishes: "
                                          "0")),
    ]
    return out + _cost_findings(run.costs)


def _cost_findings(costs: dict[str, Any]) -> list[Finding]:
    cost, rounds = costs.get("derivatives_seconds", {}), costs.get("dice_over_surrogate_rounds")
    if not ({BLOCKED, UNBLOCKED, "surrogate"} <= set(cost) and rounds):
        return []
    return [Finding(
        f"A gradient and Hessian from N = {cost['n_samples']} samples take {{b:s}} with "
        "DiCE, {u:s} without its block and {s:s} with the surrogate (medians); DiCE over "
        "the surrogate: {timing}.", topic="cost",
        values={"b": cost[BLOCKED], "u": cost[UNBLOCKED], "s": cost["surrogate"]},
        timing=TimeRatio(tuple(rounds)))]


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Monte-Carlo error against N (log-log) for the gradient and the Hessian."""
    repeats = run.summary["monte_carlo"]["repeats"]
    return {"monte_carlo_error": (
        _error_figure(run),
        f"Relative error ‖estimate − exact‖ / ‖exact‖ of the gradient (left) and the "
        f"Hessian (right) from N sampled trajectories: the root mean square over {repeats} "
        f"independent estimates per N. DiCE's errors fall like 1/√N (dotted slope); "
        f"without its block the magic box is 1 and both estimates are 0 (error 1); the "
        f"classic surrogate's gradient is DiCE's (open squares on the blue line) but its "
        f"Hessian misses a term and stays wrong.")}


#: The estimators drawn, their legend entries and their markers (the surrogate under DiCE,
#: where the gradients coincide).
_CURVES = {BLOCKED: ("DiCE (blocked)", {"marker": "o", "markersize": 4}),
           UNBLOCKED: ("DiCE without the block (magic box = 1)",
                         {"marker": "o", "markersize": 4}),
           "surrogate": ("surrogate Σ log p · c (its gradient is DiCE's)",
                         {"zorder": 1.9, "marker": "s", "markersize": 7, "mfc": "none"})}


def _error_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import draw_spread, legend_below, subplots

    seeds = [r.artifact("monte_carlo") for r in run.replicates]  # every seed: a band
    ns = seeds[0]["n_samples"].astype(float)
    fig, axes = subplots(1, 2, figsize=(9.0, 3.8), sharey=True)
    others: list[str] = []
    for ax, key, title in zip(axes, ("grad_rel_err", "hessian_rel_err"), ("gradient", "Hessian")):
        for variant, (label, marks) in _CURVES.items():
            draw_spread(ax, ns, [d[f"{variant}_{key}"] for d in seeds], label=label,
                        **(variant_style(variant, others) | marks))
        first = float(np.mean([d[f"blocked_{key}"][0] for d in seeds]))
        ax.plot(ns, first * np.sqrt(ns[0] / ns), label="1/√N slope", **variant_style("reference"))
        ax.set(xscale="log", yscale="log", xlabel="samples N")
        ax.set_title(f"{title}: relative error", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(f"RMS over {run.summary['monte_carlo']['repeats']} estimates")
    legend_below(fig, axes, ncols=2)
    return fig

