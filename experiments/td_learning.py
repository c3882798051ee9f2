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

import time
from typing import Any

import torch
from pydantic import Field

from toolkit import compare_gradients
from toolkit.algorithms.td import (
    A_SPLIT_NAIVE_RESIDUAL_VALUES,
    A_SPLIT_TRUE_VALUES,
    BLOCK,
    a_split,
    baird_counterexample,
    gradient_descent,
    random_chain,
)
from toolkit.lab.runner import ExperimentParams, Finding, RunContext, RunResults, Story, fmt

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
    chain_steps: int = Field(300, ge=1, le=1_000_000, description="random chain: full-batch gradient steps")
    a_split_lr: float = Field(1.0, gt=0.0, description="A-split: gradient step size")
    a_split_steps: int = Field(200, ge=1, le=1_000_000, description="A-split: full-batch gradient steps")
    baird_alpha: float = Field(0.01, gt=0.0, description="Baird: step size α (book: 0.01)")
    baird_gamma: float = Field(0.99, ge=0.0, le=1.0, description="Baird: discount γ (book: 0.99)")
    baird_sweeps: int = Field(1000, ge=1, le=1_000_000, description="Baird: expected-update sweeps (book: 1000)")
    log_every: int = Field(5, ge=1, description="log metrics every this many steps or sweeps")


QUICK: dict[str, Any] = {"log_every": 10}
STATES = tuple(A_SPLIT_TRUE_VALUES)


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


def _timed(fn: Any) -> Any:
    def run() -> tuple[torch.Tensor, float]:
        start = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - start
    return run


def run(params: Params, ctx: RunContext) -> None:
    kw = {"dtype": ctx.dtype, "device": ctx.device}

    # --- A-split: tabular, γ = 1, four sampled transitions
    table = a_split(**kw)
    zeros = torch.zeros(len(STATES), **kw)

    def log_a_split(variant: str, out: tuple[torch.Tensor, float]) -> None:
        for step in _logged(params.a_split_steps, params.log_every, out[0]):
            ctx.log(step, **{f"{variant}/a_split/V_{s}": out[0][step, i]
                             for i, s in enumerate(STATES)})

    a_runs = ctx.compare(_timed(lambda: gradient_descent(
        lambda v: table.loss(v, 1.0), zeros, lr=params.a_split_lr,
        n_steps=params.a_split_steps)), on_result=log_a_split)

    # --- Baird's counterexample: expected updates, the book's setup
    mrp, w0 = baird_counterexample(params.baird_gamma, **kw)

    def log_baird(variant: str, out: tuple[torch.Tensor, float]) -> None:
        for step in _logged(params.baird_sweeps, params.log_every, out[0]):
            w = out[0][step]
            ctx.log(step, **{f"{variant}/baird/weight_norm": w.norm(),
                             f"{variant}/baird/msbe": mrp.msbe(w)})

    b_runs = ctx.compare(_timed(lambda: gradient_descent(
        mrp.loss, w0, lr=params.baird_alpha, n_steps=params.baird_sweeps)), on_result=log_baird)

    # --- random chain: both closed-form fixed points, gradients checked along the way
    chain = random_chain(params.n_states, params.n_features, params.gamma,
                         generator=ctx.generator, **kw)
    w_td, w_rg = chain.td_fixed_point(), chain.residual_gradient_fixed_point()

    def log_chain(variant: str, out: tuple[torch.Tensor, float]) -> None:
        for step in _logged(params.chain_steps, params.log_every, out[0]):
            w = out[0][step]
            ctx.log(step, **{f"{variant}/chain/value_error": chain.value_error(w),
                             f"{variant}/chain/msbe": chain.msbe(w),
                             f"{variant}/chain/dist_td": (w - w_td).norm(),
                             f"{variant}/chain/dist_rg": (w - w_rg).norm()})

    c_runs = ctx.compare(_timed(lambda: gradient_descent(
        chain.loss, torch.zeros(params.n_features, **kw), lr=params.lr,
        n_steps=params.chain_steps)), on_result=log_chain)
    grad_err = _check_gradients(chain, c_runs["blocked"][0], params, ctx)

    a_final = {v: dict(zip(STATES, out[0][-1].tolist())) for v, out in a_runs.items()}
    truth = {"blocked": A_SPLIT_TRUE_VALUES, "unblocked": A_SPLIT_NAIVE_RESIDUAL_VALUES}
    chain_w = {v: out[0][-1] for v, out in c_runs.items()}
    baird_w = {v: out[0] for v, out in b_runs.items()}
    ctx.summary(
        a_split={v: {"values": a_final[v],
                     "max_err_vs_book": max(abs(a_final[v][s] - truth[v][s]) for s in STATES),
                     **_diverged_at(a_runs[v][0])}
                 for v in a_final}
        | {"book": {"td": A_SPLIT_TRUE_VALUES, "naive_residual": A_SPLIT_NAIVE_RESIDUAL_VALUES}},
        baird={v: {"initial_weight_norm": w[0].norm(), "final_weight_norm": w[-1].norm(),
                   "final_msbe": mrp.msbe(w[-1]), "final_value_rms": (mrp.phi @ w[-1]).pow(2)
                   .mean().sqrt(), "last_100_sweeps_change": (w[-1] - w[-101 if len(w) > 100
                                                                        else 0]).norm(),
                   **_diverged_at(w)}
               for v, w in baird_w.items()},
        chain={"blocked": {"value_error": chain.value_error(chain_w["blocked"]),
                           "msbe": chain.msbe(chain_w["blocked"]),
                           "dist_to_td_fixed_point": (chain_w["blocked"] - w_td).norm(),
                           "grad_max_err_vs_closed_form": grad_err["blocked"],
                           **_diverged_at(c_runs["blocked"][0])},
               "unblocked": {"value_error": chain.value_error(chain_w["unblocked"]),
                             "msbe": chain.msbe(chain_w["unblocked"]),
                             "dist_to_rg_fixed_point": (chain_w["unblocked"] - w_rg).norm(),
                             "grad_max_err_vs_closed_form": grad_err["unblocked"],
                             **_diverged_at(c_runs["unblocked"][0])},
               "closed_form": {"value_error_td": chain.value_error(w_td),
                               "value_error_rg": chain.value_error(w_rg),
                               "value_error_best": chain.value_error(chain.best_weights())}},
    )
    ctx.costs(seconds_per_update={  # per update made (fewer than asked after an overflow)
        case: {v: out[1] / max(len(out[0]) - 1, 1) for v, out in runs.items()}
        for case, runs in (("a_split", a_runs), ("baird", b_runs), ("chain", c_runs))})
    ctx.save_artifact("a_split", {f"{v}": out[0] for v, out in a_runs.items()})
    ctx.save_artifact("baird", {f"{v}": out[0] for v, out in b_runs.items()})
    ctx.save_artifact("chain", {
        "true": chain.true_values(), "td": chain.phi @ w_td, "rg": chain.phi @ w_rg,
        "best": chain.phi @ chain.best_weights(), "d": chain.d,
        "blocked": chain.phi @ chain_w["blocked"], "unblocked": chain.phi @ chain_w["unblocked"]})


def _check_gradients(chain: Any, path: torch.Tensor, params: Params, ctx: RunContext
                     ) -> dict[str, float]:
    """Autograd gradients with and without the block at the blocked iterates, against the
    closed forms; errors relative to the closed-form gradient's norm at w = 0."""
    scale = {k: float(g.norm()) or 1.0 for k, g in chain.gradients(torch.zeros_like(path[0]))
             .items()}
    worst = {"blocked": 0.0, "unblocked": 0.0}
    for step in _logged(params.chain_steps, params.log_every, path):
        w = path[step].clone().requires_grad_(True)
        exact = chain.gradients(path[step])
        cmp = compare_gradients(lambda w=w: chain.loss(w), {"w": w},
                                disable=ctx.disable_patterns)
        errors = {"blocked": float((cmp.blocked["w"] - exact["blocked"]).norm()),
                  "unblocked": float((cmp.unblocked["w"] - exact["unblocked"]).norm())}
        for v in worst:
            worst[v] = max(worst[v], errors[v] / scale[v])
        ctx.log(step, **{"blocked/chain_grad/cosine_vs_unblocked": cmp.overall.cosine,
                         "blocked/chain_grad/norm": cmp.overall.norm_blocked,
                         "unblocked/chain_grad/norm": cmp.overall.norm_unblocked})
    return worst


# --- what the report shows -------------------------------------------------------------------


def _values(prefix: str, values: dict[str, float]) -> tuple[str, dict[str, float]]:
    """``"A = {p_A}, B = {p_B}, C = {p_C}"`` and the values it names."""
    return (", ".join(f"{s} = {{{prefix}_{s}}}" for s in STATES),
            {f"{prefix}_{s}": values[s] for s in STATES})


BOOK = "Sutton & Barto (2018), Example 11.2, in closed form"
BAIRD = "Baird (1995); Sutton & Barto (2018), Example 11.1 and §11.5"


def findings(run: RunResults) -> list[Finding]:
    """Five or six sentences with their numbers and verdicts, from ``summary.json`` and
    ``costs.json``."""
    s, p = run.summary, run.params
    a, b, c = s["a_split"], s["baird"], s["chain"]
    ab, au = b["blocked"], b["unblocked"]
    n = p.get("baird_sweeps", 1000)
    tol = 1e-6
    found_b, values_b = _values("v", a["blocked"]["values"])
    found_u, values_u = _values("v", a["unblocked"]["values"])
    steps = p.get("chain_steps", 300)
    last = {key: float(run.metric(key)[1][-1])
            for key in ("blocked/chain/dist_rg", "unblocked/chain/dist_td")}
    grad_err = max(c["blocked"]["grad_max_err_vs_closed_form"],
                   c["unblocked"]["grad_max_err_vs_closed_form"])
    d_td, d_rg = c["blocked"]["dist_to_td_fixed_point"], c["unblocked"]["dist_to_rg_fixed_point"]
    # ‖w_TD − w_RG‖, within d_td (or d_rg) of what each run logged last
    gap = min(last["blocked/chain/dist_rg"], last["unblocked/chain/dist_td"])
    stop = ab.get("diverged_at")  # the loop stopped where its squared TD error overflowed
    overflow = (f" (its {stop['quantity']} overflowed to inf at sweep {stop['step']}, where the "
                f"run stopped)") if stop else ""
    out = [
        Finding(f"A-split: with the block TD finds {found_b}, the true values (book: A = 0.5, "
                "B = 1, C = 0; largest difference {err}).", a["blocked"]["max_err_vs_book"] < tol,
                basis=BOOK, values={**values_b, "err": a["blocked"]["max_err_vs_book"]},
                seed_independent=True),
        Finding(f"A-split: without it the naive residual gradient finds {found_u} (book: "
                "A = 0.5, B = 0.75, C = 0.25; largest difference {err}).",
                a["unblocked"]["max_err_vs_book"] < tol,
                basis=BOOK, values={**values_u, "err": a["unblocked"]["max_err_vs_book"]},
                seed_independent=True),
        Finding(f"Baird's counterexample: with the block semi-gradient TD diverges, the weight "
                f"norm growing from {{w0}} to {{w1}} in {n} sweeps{overflow}; without it the residual "
                f"gradient converges to a norm of {{u1}} (change over the last 100 sweeps "
                f"{{du}}, mean squared Bellman error {{msbe}}).",
                ab["final_weight_norm"] > 10 * ab["initial_weight_norm"]
                and ab["last_100_sweeps_change"] > 1.0 and au["last_100_sweeps_change"] < 1e-2,
                basis=BAIRD, values={"w0": ab["initial_weight_norm"],
                                     "w1": ab["final_weight_norm"],
                                     "u1": au["final_weight_norm"],
                                     "du": au["last_100_sweeps_change"],
                                     "msbe": au["final_msbe"]},
                seed_independent=True),
        Finding(f"The block is not free: the cut that gives TD the true A-split values makes it "
                f"diverge on Baird's counterexample, while the residual gradient is stable but "
                f"slow: its value estimates are still {{rms}} (RMS) from the true values 0 "
                f"after {n} sweeps.",
                ab["final_weight_norm"] > 10 * ab["initial_weight_norm"]
                and au["final_weight_norm"] < au["initial_weight_norm"],
                basis=BAIRD, values={"rms": au["final_value_rms"]}, seed_independent=True),
        Finding(f"Random chain: autograd matches both closed-form gradients, the semi-gradient "
                f"and the residual gradient, to {{g}}; after {steps} steps TD is {{d_td}} from "
                f"w_TD and the residual gradient {{d_rg}} from w_RG, fixed points {{gap}} "
                f"apart; value error {{ve_b}} blocked vs {{ve_u}} unblocked (best in the span "
                f"{{best}}).",
                grad_err < 1e-10 and max(d_td, d_rg) < 1e-3 * gap,
                basis="the expected TD update converges to w_TD (Tsitsiklis & Van Roy 1997) "
                      "and the residual gradient to the minimiser of the Bellman error, w_RG "
                      "(Sutton & Barto 2018, §11.5)",
                values={"g": grad_err, "d_td": d_td, "d_rg": d_rg, "gap": gap,
                        "ve_b": c["blocked"]["value_error"],
                        "ve_u": c["unblocked"]["value_error"],
                        "best": c["closed_form"]["value_error_best"]}),
    ]
    cost = run.costs.get("seconds_per_update", {}).get("baird", {})
    if {"blocked", "unblocked"} <= set(cost):
        out.append(Finding("An expected update on Baird's counterexample takes {b:s} blocked "
                           "and {u:s} unblocked (the unblocked graph also runs through the "
                           "target; one timing of the whole fit each).", None, "cost",
                           values={"b": cost["blocked"], "u": cost["unblocked"]}))
    return out


def figures(run: RunResults) -> dict[str, Any]:
    """A-split values and Baird's weight norm (the headline), then the random chain."""
    import matplotlib.pyplot as plt
    import numpy as np

    from toolkit.lab.style import integer_ticks, place_legend, variant_style

    s = run.summary
    figs: dict[str, Any] = {}

    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    x = np.arange(len(STATES))
    for i, v in enumerate(("blocked", "unblocked")):
        style = variant_style(v)
        vals = [s["a_split"][v]["values"][k] for k in STATES]
        bars = ax.bar(x + (i - 0.5) * 0.38, vals, 0.36, color=style["color"],
                      label=f"{v} ({'TD' if v == 'blocked' else 'naive residual gradient'})")
        for bar, val in zip(bars, vals):  # inside tall bars: off the true-value lines
            inside = val > 0.15
            ax.annotate(fmt(val), (bar.get_x() + bar.get_width() / 2, val), fontsize=9,
                        xytext=(0, -3 if inside else 3), textcoords="offset points", ha="center",
                        va="top" if inside else "bottom", color="white" if inside else "black")
    ref = variant_style("reference")["color"]
    for j, k in enumerate(STATES):
        ax.hlines(A_SPLIT_TRUE_VALUES[k], j - 0.45, j + 0.45, colors=ref, linestyles="-",
                  lw=1.2, label="true value" if j == 0 else None)
    ax.set_xticks(x, [f"state {k}" for k in STATES])
    ax.set_ylabel("learned value")
    ax.set_ylim(0, 1.45)
    ax.set_title("A-split (Sutton & Barto, Example 11.2), γ = 1")
    place_legend(ax, fontsize=9, ncols=3, frameon=False)
    figs["a_split_values"] = (
        fig, "Learned values of the A-split states after training with γ = 1: the blocked TD "
             "update finds the true values (dark grey lines: A = 0.5, B = 1, C = 0), the unblocked "
             "residual gradient the values Sutton & Barto derive for it (B = 0.75, C = 0.25).")

    baird = run.artifact("baird")
    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    for v in ("blocked", "unblocked"):
        norms = np.linalg.norm(baird[v], axis=1)
        label = "blocked (semi-gradient TD)" if v == "blocked" else "unblocked (residual gradient)"
        ax.plot(np.arange(len(norms)), norms, label=label, **variant_style(v))
    ax.set_yscale("log")
    ax.set_xlim(0, len(norms) - 1)
    ax.set_xlabel("sweep")
    ax.set_ylabel("weight norm ‖w‖")
    integer_ticks(ax)
    ax.set_title("Baird's counterexample (Example 11.1), expected updates")
    place_legend(ax, fontsize=9)
    figs["baird_weight_norm"] = (
        fig, "Norm of the weight vector on Baird's seven-state star, sweep by sweep of expected "
             "updates: semi-gradient TD (blocked) diverges exponentially, the residual gradient "
             "(unblocked) converges, slowly, to weights whose values are all near 0.")

    values = run.artifact("chain")
    fig, ax = plt.subplots(figsize=(8.4, 3.6), layout="constrained")
    states = np.arange(len(values["true"]))
    ref_style = variant_style("reference")
    ax.plot(states, values["true"], marker="D", color=ref_style["color"], label="true V")
    ax.plot(states, values["best"], linestyle=":", color=ref_style["color"],
            label="best in span(Φ)")
    for v, key, name in (("blocked", "td", "TD fixed point (blocked)"),
                         ("unblocked", "rg", "residual-gradient fixed point (unblocked)")):
        style = variant_style(v)
        ax.plot(states, values[key], color=style["color"], linestyle=style["linestyle"],
                lw=1, label=name)
        ax.plot(states, values[v], "o" if v == "blocked" else "s", mfc="none", ms=7,
                color=style["color"], label=f"{v}, learned")
    ax.set_xlabel("state")
    ax.set_ylabel("value")
    integer_ticks(ax)
    # each seed draws its own chain: one seed's is drawn (the findings cover every seed)
    ax.set_title(f"random chain of seed {run.seed}: learned values vs both fixed points")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figs["chain_values"] = (
        fig, "Values of the random chain's states: the true values, the best fit the features "
             "allow, and each variant's fixed point in closed form (lines) with what training "
             "learned (open markers, on their fixed points): TD's fixed point is not the best "
             "fit, and the residual gradient's is another point again.")
    return figs


if __name__ == "__main__":  # python -m stop_gradient_experiments.<name>: its QUICK comparison
    from toolkit.lab.cli import run_module
    raise SystemExit(run_module(__name__))
