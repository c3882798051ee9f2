"""EM for Gaussian mixtures: closed-form M-step vs gradient M-step with and without the block.

Three fits of the same mixture from the same initial parameters:

- **closed_form**: classical EM (E-step, closed-form M-step), the reference; scikit-learn's
  ``GaussianMixture`` from the same start is logged next to it as the peer ``sklearn``.
- **blocked**: gradient M-steps on ``Q(θ) = Σ stop_gradient(r(θ)) · log p(x, z; θ)``, the
  responsibilities recomputed from the parameters being optimized at every inner step and cut
  by the named block ``"em.responsibilities"``. By Fisher's identity every inner step follows
  ``∇ LL``, so the fit climbs the log-likelihood to the same optimum as EM.
- **unblocked**: the same code inside ``disable_blocks("em.*")``: the gradient also flows
  through ``r(θ)`` and the objective becomes ``LL − H(r)``, which rewards hard assignments and
  converges elsewhere: lower log-likelihood, lower responsibility entropy.

Per iteration: log-likelihood of each variant, the Fisher-identity check (relative error
between ``∇Q`` and ``∇LL`` at the current parameters) and the mean responsibility entropy, on the
synthetic 2-D mixture ``MIXTURE_2D`` (known truth) and on iris (truth: per-class moments).

References:
    Dempster, Laird & Rubin (1977), https://doi.org/10.1111/j.2517-6161.1977.tb01600.x ;
    Neal & Hinton (1998), https://doi.org/10.1007/978-94-011-5014-9_12 (EM as coordinate
    ascent on ``LL − KL``; the entropy term is what the block keeps out of the M-step).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from scipy.optimize import linear_sum_assignment

from toolkit import gradient_graph
from toolkit.algorithms.em import (
    BLOCK,
    GaussianMixture,
    GMMParams,
    e_step,
    expected_complete_loglik,
    from_unconstrained,
    gradient_m_step,
    log_likelihood,
    m_step,
    precisions_cholesky_from_covariances,
    to_unconstrained,
)
from toolkit.lab import ExperimentParams, Finding, Headline, RunContext, RunResults, Story
from toolkit.lab.data import MIXTURE_2D, gaussian_mixture, iris
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import variant_style

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = "EM for Gaussian mixtures: closed-form vs gradient M-step with/without the r block"
#: The precision the comparison is defined in (scikit-learn parity; the showcase runs it so).
DTYPE = "float64"

STORY = Story(
    compares="EM for a Gaussian mixture with the closed-form M-step (the reference) and with "
             "gradient M-steps whose responsibilities are recomputed from the parameters being "
             "optimized, with the block and without it, from the same start",
    block=f"{BLOCK}: Q(θ) = Σ stop_gradient(r(θ)) · log p(x, z; θ)",
    prediction="with the block ∇Q = ∇LL (Fisher's identity) and the gradient EM climbs the "
               "log-likelihood like EM; without it the M-step climbs LL − H(r), so Fisher's "
               "identity fails and the responsibilities are driven toward hard assignments. "
               "Which fit ends at the higher likelihood depends on the start: the report "
               "measures it",
)

VARIANTS = ("closed_form", BLOCKED, UNBLOCKED)


class Params(ExperimentParams):
    n_samples: int = Field(1000, ge=10, description="points drawn from the 2-D mixture MIXTURE_2D")
    n_iter: int = Field(60, ge=1, le=100_000, description="EM iterations (E-step + M-step) per variant")
    inner_steps: int = Field(10, ge=1, description="optimizer steps of each gradient M-step")
    inner_optimizer: Literal["adam", "lbfgs", "sgd"] = Field(
        "adam", description="torch optimizer of the gradient M-steps")
    lr: float = Field(0.05, gt=0.0, description="learning rate of the gradient M-steps")
    reg_covar: float = Field(1e-6, ge=0.0, description="added to the covariances' diagonal")
    init: Literal["random", "kmeans", "k-means++", "random_from_data"] = Field(
        "kmeans", description="initialization shared by all variants (GaussianMixture's "
                              "init_params; kmeans, as scikit-learn, starts the reference EM "
                              "where it reaches the good optimum)")
    include_iris: bool = Field(True, description="also fit iris (4-D, 3 components)")


QUICK: dict[str, Any] = {"n_samples": 400, "n_iter": 15, "inner_steps": 5, "include_iris": True}


# --- data: a 2-D mixture with known truth, and iris -----------------------------------------------


def load_datasets(params: Params, ctx: RunContext, seed: int
                  ) -> dict[str, tuple[torch.Tensor, GMMParams]]:
    """``{"train": (X, truth)}``: ``n_samples`` points of ``MIXTURE_2D`` drawn from ``seed``;
    with ``include_iris`` also ``"iris"``, whose truth is the moments of its classes."""
    X, _ = gaussian_mixture(params.n_samples, MIXTURE_2D, seed=seed, dtype=ctx.dtype)
    w, mu, cov = (t.to(ctx.device, ctx.dtype) for t in MIXTURE_2D)
    out = {"train": (X.to(ctx.device),
                     GMMParams(w, mu, cov, precisions_cholesky_from_covariances(cov, "full")))}
    if params.include_iris:
        Xi, yi = iris(ctx.dtype)
        Xi = Xi.to(ctx.device)
        out["iris"] = (Xi, _iris_truth(Xi, yi.to(ctx.device)))
    return out


def _iris_truth(X: torch.Tensor, y: torch.Tensor) -> GMMParams:
    classes = torch.unique(y)
    weights = torch.stack([(y == c).to(X.dtype).mean() for c in classes])
    means = torch.stack([X[y == c].mean(0) for c in classes])
    covs = torch.stack([torch.cov(X[y == c].T, correction=0) for c in classes])
    return GMMParams(weights, means, covs, precisions_cholesky_from_covariances(covs, "full"))


# --- the comparison: closed-form EM, and gradient EM with the block and without it ----------------


def run(params: Params, ctx: RunContext) -> None:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator).item())
    datasets = load_datasets(params, ctx, seed)
    summary = {}
    for group, (X, truth) in datasets.items():
        init = _initial_params(X, len(truth.weights), params, seed)
        fits = compare_fits(ctx, params, X, init, group)
        sk_bounds = _sklearn_lower_bounds(X, init, params)  # the peer, from the same start
        log_fits(ctx, group, fits, sk_bounds)
        ctx.save_artifact(f"params_{group}", {
            "X": X, **_params("truth", truth), **_params("init", init),
            **{k: v for variant, (_, p) in fits.items() for k, v in _params(variant, p).items()}})
        summary[group] = fit_summary(X, truth, fits, sk_bounds)
    _save_graph(ctx, datasets["train"][0])
    # convention: {"blocked": {...}, "unblocked": {...}, other keys}
    out: dict[str, Any] = {v: {} for v in VARIANTS}
    for dataset, s in summary.items():
        prefix = "" if dataset == "train" else f"{dataset}_"
        for variant in VARIANTS:
            out[variant].update({f"{prefix}{k}": v for k, v in s[variant].items()})
        out[f"{dataset}_reference"] = {k: v for k, v in s.items() if k not in VARIANTS}
    ctx.summary(**out)


def compare_fits(ctx: RunContext, p: Params, X: torch.Tensor, init: GMMParams, group: str
                 ) -> dict[str, tuple[list[dict[str, float]], GMMParams]]:
    """Closed-form EM, then gradient EM blocked and unblocked, all from ``init``: per variant
    the rows of every iteration and the final parameters."""
    with ctx.timer(f"{group}_closed_form"):
        closed = closed_form_em(X, init, p.n_iter, p.reg_covar)
    with ctx.timer(f"{group}_gradient_blocked_and_unblocked"):
        return {"closed_form": closed, **ctx.compare(lambda: gradient_em(X, init, p))}


def log_fits(ctx: RunContext, group: str, fits: dict[str, Any], sk_bounds: list[float]) -> None:
    """Every iteration's rows of every variant (and scikit-learn's log-likelihood) as one row,
    under ``<variant>/<group>/...``."""
    for t in range(len(fits["closed_form"][0])):
        row = {f"{v}/{_renamed(key, group)}": value
               for v, (rows, _) in fits.items() for key, value in rows[t].items()}
        if t < len(sk_bounds):
            row[f"sklearn/{_renamed('train/loglik', group)}"] = sk_bounds[t]
        ctx.log(t, **row)


def _params(name: str, p: GMMParams) -> dict[str, torch.Tensor]:
    return {f"{name}_weights": p.weights, f"{name}_means": p.means,
            f"{name}_covariances": p.covariances}


def fit_summary(X: torch.Tensor, truth: GMMParams,
                fits: dict[str, tuple[list[dict[str, float]], GMMParams]],
                sk_bounds: list[float]) -> dict[str, Any]:
    """Per variant: final log-likelihood and entropy, errors against the truth and (gradient
    fits) Fisher's identity; the truth's and the start's log-likelihood; the largest relative
    difference of closed-form EM to scikit-learn's log-likelihoods from the same start."""
    summary: dict[str, Any] = {}
    for variant, (rows, params) in fits.items():
        entry = {"final_loglik": state_metrics(X, params)["train/loglik"],
                 "final_resp_entropy": state_metrics(X, params)["train/resp_entropy"],
                 **parameter_errors(params, truth)}
        if variant != "closed_form":
            errs = [r["grad/fisher_rel_err"] for r in rows]
            entry["fisher_rel_err_max"] = max(errs)
            entry["fisher_rel_err_median"] = float(np.median(errs))
        summary[variant] = entry
    cf_rows = fits["closed_form"][0]
    summary["truth_loglik"] = state_metrics(X, truth)["train/loglik"]
    summary["initial_loglik"] = cf_rows[0]["train/loglik"]
    # closed-form EM against scikit-learn from the same start: LL(θ_t), t < n_iter
    cf_ll = np.array([r["train/loglik"] for r in cf_rows[: len(sk_bounds)]])
    summary["sklearn_max_rel_diff"] = float(np.max(np.abs(cf_ll - sk_bounds)
                                                   / np.abs(sk_bounds)))
    return summary


def _renamed(key: str, group: str) -> str:
    """The main dataset keeps the canonical names (``train/loglik``, ``grad/...``); another
    one's are ``<group>/loglik`` and ``grad_<group>/...``."""
    kind, name = key.split("/")
    if group == "train":
        return key
    return f"{group}/{name}" if kind == "train" else f"grad_{group}/{name}"


def closed_form_em(X: torch.Tensor, init: GMMParams, n_iter: int, reg_covar: float
                   ) -> tuple[list[dict[str, float]], GMMParams]:
    """EM with the closed-form M-step; rows for iterations 0..n_iter (row t: at θ_t)."""
    params, rows = init, []
    for t in range(n_iter + 1):
        rows.append(state_metrics(X, params))
        if t < n_iter:
            _, log_resp = e_step(X, params.weights, params.means, params.precisions_cholesky)
            params = m_step(X, log_resp, reg_covar=reg_covar)
    return rows, params


def gradient_em(X: torch.Tensor, init: GMMParams, p: Params
                ) -> tuple[list[dict[str, float]], GMMParams]:
    """EM with gradient M-steps; ``r`` recomputed from the optimized parameters (block decides)."""
    params, rows = init, []
    for t in range(p.n_iter + 1):
        rows.append({**state_metrics(X, params), **fisher_check(X, params)})
        if t < p.n_iter:
            params = gradient_m_step(X, None, params, reg_covar=p.reg_covar,
                                     n_steps=p.inner_steps, optimizer=p.inner_optimizer, lr=p.lr)
    return rows, params


def _initial_params(X: torch.Tensor, k: int, p: Params, seed: int) -> GMMParams:
    gm = GaussianMixture(k, init_params=p.init, max_iter=0, reg_covar=p.reg_covar,
                         random_state=seed, device=X.device, dtype=X.dtype).fit(X)
    return GMMParams(gm.weights_, gm.means_, gm.covariances_, gm.precisions_cholesky_)


def _sklearn_lower_bounds(X: torch.Tensor, init: GMMParams, p: Params) -> list[float]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture as SkGaussianMixture

    U = init.precisions_cholesky
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sk = SkGaussianMixture(len(init.weights), max_iter=p.n_iter, tol=0.0,
                               reg_covar=p.reg_covar, weights_init=init.weights.cpu().numpy(),
                               means_init=init.means.cpu().numpy(),
                               precisions_init=(U @ U.mT).cpu().numpy()).fit(X.cpu().numpy())
    return [float(v) for v in sk.lower_bounds_]


# --- measurements ---------------------------------------------------------------------------------


def fisher_check(X: torch.Tensor, params: GMMParams) -> dict[str, float]:
    """``‖∇Q − ∇LL‖ / ‖∇LL‖`` at ``params`` (unconstrained parametrization).

    ``Q`` takes ``r = r(θ)`` at the same ``θ``; whether its gradient flows through ``r`` is
    decided by the block, i.e. by the ``disable_blocks`` context this is called in.
    """
    theta = to_unconstrained(params)
    with torch.enable_grad():
        g_q = _flat_grad(expected_complete_loglik(X, *from_unconstrained(theta)), theta)
        g_ll = _flat_grad(log_likelihood(X, *from_unconstrained(theta)), theta)
    ll_norm = float(g_ll.norm())
    return {"grad/fisher_rel_err": float((g_q - g_ll).norm()) / max(ll_norm, 1e-300),
            "grad/norm_loglik": ll_norm, "grad/norm_q": float(g_q.norm())}


def _flat_grad(value: torch.Tensor, theta: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, theta)])


@torch.no_grad()
def state_metrics(X: torch.Tensor, params: GMMParams) -> dict[str, float]:
    """Log-likelihood per sample and mean responsibility entropy at ``params``."""
    log_prob_norm, log_resp = e_step(X, params.weights, params.means,
                                     params.precisions_cholesky)
    entropy = -(log_resp.exp() * log_resp).nan_to_num().sum(1).mean()
    return {"train/loglik": float(log_prob_norm.mean()), "train/resp_entropy": float(entropy)}


def parameter_errors(params: GMMParams, truth: GMMParams) -> dict[str, float]:
    """Errors against the truth after matching components by the Hungarian assignment on means."""
    cost = torch.cdist(params.means, truth.means).cpu().numpy()
    rows, cols = linear_sum_assignment(cost)
    order = torch.as_tensor(rows[np.argsort(cols)])  # fitted component matched to true j
    w, mu, cov = params.weights[order], params.means[order], params.covariances[order]
    cov_err = (torch.linalg.matrix_norm(cov - truth.covariances)
               / torch.linalg.matrix_norm(truth.covariances))
    return {"weights_max_abs_err": float((w - truth.weights).abs().max()),
            "means_rmse": float((mu - truth.means).square().sum(1).mean().sqrt()),
            "covariances_max_rel_err": float(cov_err.max())}


def _save_graph(ctx: RunContext, X: torch.Tensor) -> None:
    """The backward graph of Q on four points with the block marked (issue: show the cut)."""
    init = _initial_params(X, 3, Params(init="random_from_data"), 0)
    theta = to_unconstrained(init)
    names = {"mixture weights": [theta[0]], "means": [theta[1]], "precisions": [theta[2]]}
    with torch.enable_grad():
        graph = gradient_graph(
            lambda: expected_complete_loglik(X[:4], *from_unconstrained(theta)), names)
    ctx.save_artifact("graph", graph.to_dict())


# --- findings -------------------------------------------------------------------------------------


FISHER = "Fisher's identity ∇LL(θ) = E_r(θ)[∇ log p(x, z; θ)] (Dempster, Laird & Rubin 1977)"
NEAL_HINTON = ("the decomposition Q(θ; r(θ)) = LL(θ) − H(r(θ)) (Neal & Hinton 1998): without "
               "the block the M-step also lowers the entropy")


#: Agreement with scikit-learn (which computes in float64) is read as this many units of the
#: run's own rounding: a float64 run agrees to about one, a float32 run to about one of its own.
SKLEARN_ULPS = 1e3


def findings(run: RunResults) -> list[Finding]:
    """Four to five sentences with their numbers and verdicts, from ``summary.json``. The
    agreement with scikit-learn is read in units of the run's dtype."""
    s = run.summary
    dtype = str(run.config.get("dtype") or DTYPE)
    sk_tol = SKLEARN_ULPS * float(torch.finfo(getattr(torch, dtype)).eps)
    cf, b, u = s["closed_form"], s[BLOCKED], s[UNBLOCKED]
    ref = s["train_reference"]
    iris = "iris_final_resp_entropy" in u
    out = [
        Finding("Fisher's identity holds only with the block: ‖∇Q − ∇LL‖/‖∇LL‖ is {b_err} "
                "with it (largest over iterations) and {u_err} without it (median).",
                b["fisher_rel_err_max"] < 1e-6 and u["fisher_rel_err_median"] > 1e-3,
                basis=FISHER, values={"b_err": b["fisher_rel_err_max"],
                                      "u_err": u["fisher_rel_err_median"]},
                headline=Headline("‖∇Q − ∇LL‖ / ‖∇LL‖", blocked="b_err", unblocked="u_err",
                                  thresholds=(1e-6, 1e-3), log=True,
                                  reading="0 with the block: ∇Q = ∇LL exactly (Fisher's "
                                          "identity)")),
        Finding("Without the block the M-step drives the responsibilities toward hard "
                "assignments on the 2-D mixture: mean entropy {b_h} → {u_h} nats.",
                u["final_resp_entropy"] < b["final_resp_entropy"], basis=NEAL_HINTON,
                values={"b_h": b["final_resp_entropy"], "u_h": u["final_resp_entropy"]}),
        Finding("The log-likelihood per sample ends at {b_ll:4} with the block and {u_ll:4} "
                "without it (closed-form EM: {cf_ll:4}; the true parameters: {truth_ll:4}).",
                values={"b_ll": b["final_loglik"], "u_ll": u["final_loglik"],
                        "cf_ll": cf["final_loglik"], "truth_ll": ref["truth_loglik"]}),
        Finding("Closed-form EM matches scikit-learn's GaussianMixture from the same start to "
                "{sk_diff:2} (relative log-likelihood; rounding in {dtype} allows {sk_tol:2}), "
                "and reaches means {rmse} (RMSE) from the true means.",
                ref["sklearn_max_rel_diff"] < sk_tol,
                basis="the same closed-form E- and M-steps (Dempster, Laird & Rubin 1977) in "
                      "both implementations, scikit-learn's in float64 and this run's in its "
                      "dtype: they differ by that dtype's rounding",
                values={"sk_diff": ref["sklearn_max_rel_diff"], "rmse": cf["means_rmse"],
                        "dtype": dtype, "sk_tol": sk_tol}),
    ]
    if iris:
        out.append(Finding(
            "On iris, whose classes overlap, the entropy ends at {b_h} with the block and {u_h} "
            "without it, and the log-likelihood at {b_ll:4} and {u_ll:4}: the two fits may end "
            "near different optima, and theory ranks neither.",
            values={"b_h": b["iris_final_resp_entropy"], "u_h": u["iris_final_resp_entropy"],
                    "b_ll": b["iris_final_loglik"], "u_ll": u["iris_final_loglik"]}))
    timers = run.costs.get("timers", {})
    if "train_gradient_blocked_and_unblocked" in timers and "train_closed_form" in timers:
        out.append(Finding("Gradient M-steps are slow: both gradient fits of the 2-D mixture "
                           "took {grad:s} against {cf:s} for closed-form EM (one timing each).",
                           None, "cost",
                           values={"grad": timers["train_gradient_blocked_and_unblocked"],
                                   "cf": timers["train_closed_form"]}))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Log-likelihood against closed-form EM's, Fisher check and entropy per iteration; fitted
    ellipses; the graph of Q."""
    from toolkit import draw_gradient_graph

    groups = {"train": ("2-D mixture", "2-D mixture")}  # row title, ellipses' title
    if run.params.get("include_iris", True):
        groups["iris"] = ("iris", "iris (first two of four features)")
    figs: dict[str, Any] = {"loglik_fisher_entropy": (
        _curves_figure(run, {g: row for g, (row, _) in groups.items()}),
        "Per EM iteration, from the same start: the log-likelihood per sample of each "
        "gradient fit minus closed-form EM's (differences, as they are small against the "
        "log-likelihood itself; scikit-learn's GaussianMixture lies on closed-form EM, at "
        "0), the relative error "
        "of Fisher's identity ∇Q = ∇LL (exactly 0 with the block), and the mean entropy "
        "of the responsibilities, lower without the block. With several seeds, one line "
        "per seed (each seed draws its own 2-D mixture).")}
    for g, (_, title) in groups.items():  # ellipses: projections on the first two features
        figs[f"ellipses_{g}"] = (_ellipse_figure(run.artifact(f"params_{g}"), title),
                                 f"Fitted components of {title}: 2σ ellipses of the truth and "
                                 f"of each variant's fit, each in the colour of the true "
                                 f"component it is closest to, with its mixture weight.")
    if "graph" in run.artifact_names():
        figs["graph"] = (draw_gradient_graph(run.artifact("graph")),
                         "The backward graph of Q on four points: behind the cut "
                         "em.responsibilities (dashed) lies the path through r(θ) that the "
                         "block removes.")
    return figs


def _curves_figure(run: RunResults, groups: dict[str, str]) -> Any:
    """One row per dataset: LL minus closed-form EM's, Fisher's identity, entropy."""
    from toolkit.lab.report.figures import legend_below, step_axes, subplots, variant_curves

    fig, axes = subplots(len(groups), 3, figsize=(9.0, 2.9 * len(groups) + 0.9),
                         squeeze=False)
    for (ax_ll, ax_f, ax_h), (g, title) in zip(axes, groups.items()):
        _loglik_differences(ax_ll, run, g, title)
        variant_curves(ax_f, run, f"{'grad' if g == 'train' else f'grad_{g}'}/fisher_rel_err",
                       transform=lambda e: np.maximum(e, 1e-18))
        ax_f.set_yscale("log")
        ax_f.set_title("‖∇Q − ∇LL‖ / ‖∇LL‖ (0 at 1e-18)", fontsize=10)
        variant_curves(ax_h, run, f"{g}/resp_entropy", VARIANTS, mode="lines")
        ax_h.set_title("responsibility entropy (nats)", fontsize=10)
        for ax in (ax_ll, ax_f, ax_h):
            step_axes(ax, xlabel="EM iteration", identical=True)
    legend_below(fig, axes.flat, ncols=4)
    return fig


def _loglik_differences(ax: Any, run: RunResults, g: str, title: str) -> None:
    """The log-likelihoods differ by little against their level (thousandths of a nat at the
    default sizes): drawn as differences to closed-form EM's, on an axis through 0, not as
    levels on a zoomed axis."""
    from toolkit.lab.report.figures import draw_spread, metric_over_seeds

    steps, ref = metric_over_seeds(run, f"closed_form/{g}/loglik")
    ax.axhline(0.0, label="closed form", **variant_style("closed_form"))
    for variant in (BLOCKED, UNBLOCKED, "sklearn"):
        if f"{variant}/{g}/loglik" not in run.metric_keys():
            continue
        s, ys = metric_over_seeds(run, f"{variant}/{g}/loglik")
        diffs = [y - r[np.isin(steps, s)][: len(y)] for y, r in zip(ys, ref)]
        style = variant_style(variant)
        if variant == "sklearn":
            style |= {"linestyle": "none", "marker": "o", "markersize": 4, "mfc": "none"}
        draw_spread(ax, s, diffs, mode="lines", **style,
                    label="scikit-learn" if variant == "sklearn" else variant)
    ax.set_title(f"{title}: LL − closed-form EM's", fontsize=10)
    ax.set_ylabel("nats per sample")


def _ellipse_xy(mean: np.ndarray, cov: np.ndarray, n_std: float = 2.0) -> np.ndarray:
    vals, vecs = np.linalg.eigh(cov)
    t = np.linspace(0, 2 * np.pi, 100)
    circle = np.stack([np.cos(t), np.sin(t)])
    return (mean[:, None] + vecs @ (n_std * np.sqrt(np.maximum(vals, 0))[:, None] * circle)).T


def _ellipse_figure(art: dict[str, np.ndarray], title: str) -> Any:
    from toolkit.lab.report.figures import subplots
    from toolkit.lab.style import EXTRA_COLORS, nudge_labels

    panels = ["truth", *VARIANTS]
    fig, axes = subplots(2, 2, figsize=(7.5, 6.0), sharex=True, sharey=True)
    axes = axes.ravel()
    X = np.asarray(art["X"])[:, :2]
    truth = np.asarray(art["truth_means"])
    for ax, name in zip(axes, panels):
        ax.scatter(X[:, 0], X[:, 1], s=3, c="0.75")
        means = np.asarray(art[f"{name}_means"])
        covs = np.asarray(art[f"{name}_covariances"])[:, :2, :2]
        weights = np.asarray(art[f"{name}_weights"])
        # each fitted component takes the colour of the true component nearest to it, so a
        # colour is one component in every panel (fits number their components freely)
        rows, cols = linear_sum_assignment(((means[:, None] - truth[None]) ** 2).sum(-1))
        for j, k in zip(rows, cols):
            colour = EXTRA_COLORS[k % len(EXTRA_COLORS)]
            xy = _ellipse_xy(means[j, :2], covs[j])
            ax.plot(xy[:, 0], xy[:, 1], color=colour, lw=1.5)
            ax.plot(*means[j, :2], "x", color=colour, ms=6)
            ax.annotate(f"{weights[j]:.2f}", means[j, :2], fontsize=9, xytext=(4, 4),
                        textcoords="offset points")
        ax.set_title(name.replace("_", " "), fontsize=10)
    fig.suptitle(f"{title}: 2σ ellipses, weights written at the means", fontsize=10)
    nudge_labels(*axes)
    return fig

