"""RBMs trained by CD-1, CD-10 and PCD with the negative-sample block and without it.

The training loss is ``cd_loss = mean F(v_data) − mean F(stop_gradient(v_model))``: with the
block ``"rbm.negative_samples"`` autograd gives the CD update at the chain's samples. Every
variant is the toolkit's ``BernoulliRBM`` (its one training loop) from the same seed. The
blocked and unblocked variants use the same differentiable **mean-field** chain
(``BernoulliRBM(chain="mean_field")``: ``v ← σ(b + σ(c + vWᵀ)W)``, ``k`` steps from the
mini-batch for CD-k, one step from persistent states for PCD), so the block is the only
difference:

- **blocked**: the gradient is the (mean-field) CD update ``⟨p(h|v)vᵀ⟩_data − ⟨p(h|v)vᵀ⟩_chain``;
- **unblocked** (``disable_blocks("rbm.*")``): the gradient also flows back through the ``k``
  chain steps, i.e. it is the total derivative of ``F(v_data) − F(chain_θ(v_data))``, which is
  not the CD update and not the likelihood gradient.

Peers: ``sampled`` (the usual stochastic chain, with the block only: without it the estimator
refuses to run, because sampling passes no gradient), and with ``peers=true`` scikit-learn's
``BernoulliRBM`` (PCD-1) and this toolkit's estimator with scikit-learn's settings.

Logged per ``log_every`` epochs, per variant and method (``<variant>/<method>/<name>``): the
exact mean log-likelihood of the training data (``loglik``, log Z by enumerating the hidden
layer), and at the first mini-batch of that epoch the cosine of the variant's gradient to the
exact log-likelihood gradient of that batch (``cos_exact``) and to the analytic CD update at
the same chain samples (``cos_cd``; 1 for the blocked variant by construction).

References:
    Hinton (2002), https://doi.org/10.1162/089976602760128018 (CD);
    Tieleman (2008), https://doi.org/10.1145/1390156.1390290 (PCD);
    Welling & Hinton (2002), "A new learning algorithm for mean field Boltzmann machines",
    ICANN, https://doi.org/10.1007/3-540-46084-5_57 (mean-field chains).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from toolkit.algorithms.rbm import (
    BernoulliRBM,
    CDStep,
    RBMParams,
    cd_gradient,
    exact_log_likelihood_gradient,
    exact_log_partition,
    free_energy,
    gibbs_chain,
)
from toolkit.data import bars_and_stripes, binarized_digits, empirical_nll
from toolkit.measure import count_graph_nodes
from toolkit.runner import ExperimentParams, RunContext, RunResults

DESCRIPTION = "RBM: CD-1, CD-10 and PCD with the negative-sample block vs gradient through the chain"

METHODS = {"cd1": ("cd", 1), "cd10": ("cd", 10), "pcd": ("pcd", 1)}


class Params(ExperimentParams):
    dataset: Literal["bas", "digits"] = Field(
        "bas", description="bas: bars and stripes 4×4 (32 patterns, Shark's duplicates); "
                           "digits: scikit-learn's 8×8 digits thresholded at 0.5 (1797)")
    n_components: int = Field(8, ge=1, le=20, description="hidden units (≤ 20: exact log Z)")
    methods: list[str] = Field(["cd1", "cd10", "pcd"],
                               description="training methods: cd1, cd10, pcd (PCD-1)")
    chain: Literal["mean_field"] = Field(
        "mean_field", description="chain of the blocked/unblocked variants: mean_field, "
                                  "differentiable, so the block matters (a sampled chain "
                                  "cannot run without the block; see sampled_peer)")
    sampled_peer: bool = Field(True, description="also train with the stochastic chain "
                                                 "(variant 'sampled')")
    peers: bool = Field(True, description="also fit scikit-learn's BernoulliRBM and this "
                                          "toolkit's estimator (CD-1, PCD-1) with the same settings")
    learning_rate: float = Field(0.05, gt=0, description="SGD step size (per-sample, as sklearn)")
    batch_size: int = Field(32, ge=1, description="mini-batch size (32 = full batch for bas)")
    n_iter: int = Field(2000, ge=1, description="passes over the data (epochs)")
    n_chains: int = Field(32, ge=1, description="persistent chains for PCD")
    init: Literal["uniform", "normal"] = Field(
        "uniform", description="weights U(−0.1, 0.1) (Shark) or N(0, 0.01²) (scikit-learn)")
    log_every: int = Field(20, ge=1, description="log metrics every this many epochs")
    n_samples: int = Field(16, ge=1, description="samples drawn from each trained model")
    sample_steps: int = Field(1000, ge=1, description="Gibbs steps for those samples")

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, methods: list[str]) -> list[str]:
        for m in methods:
            if m not in METHODS:
                raise ValueError(f"unknown method {m!r}; choose from {sorted(METHODS)}")
        if not methods or len(set(methods)) != len(methods):
            raise ValueError(f"methods must be a non-empty list without repeats, got {methods}")
        return methods


QUICK: dict[str, Any] = {"n_iter": 200, "learning_rate": 0.3, "log_every": 20,
                         "sample_steps": 200}


def load_data(dataset: str, dtype: torch.dtype) -> tuple[torch.Tensor, tuple[int, int]]:
    """Training data (n_samples, n_visible) and the image shape of one sample."""
    if dataset == "bas":
        return bars_and_stripes(4, duplicate_constant=True, dtype=dtype), (4, 4)
    return binarized_digits(dtype=dtype).X, (8, 8)


def _flat(grads: RBMParams | tuple[torch.Tensor, ...]) -> torch.Tensor:
    return torch.cat([g.reshape(-1).to(torch.float64) for g in grads])


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float | None:
    na, nb = float(a.norm()), float(b.norm())
    if not (math.isfinite(na) and math.isfinite(nb)) or na == 0 or nb == 0:
        return None
    return float(a @ b) / (na * nb)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@torch.no_grad()
def mean_loglik(p: RBMParams, X: torch.Tensor) -> float:
    """Exact mean log-likelihood (float64)."""
    p64 = RBMParams(*(t.to(torch.float64) for t in p))
    X64 = X.to(torch.float64)
    return float((-free_energy(p64, X64) - exact_log_partition(p64)).mean())


def train(X: torch.Tensor, method: str, params: Params, *, chain: str, seed: int,
          dtype: torch.dtype, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Fit the toolkit's ``BernoulliRBM`` (its one training loop) and log diagnostics from its
    callback: at the first mini-batch of every ``log_every``-th epoch, the exact mean
    log-likelihood and the cosines of the applied gradient to the exact log-likelihood gradient
    and to the analytic CD update. Training stops when the parameters stop being finite.
    Returns the logged rows, final parameters, graph size of the loss and divergence flag."""
    kind, k = METHODS[method]
    rows: list[dict[str, Any]] = []
    graph_nodes: list[int] = []

    def callback(step: CDStep) -> bool:
        p = step.params
        if not all(bool(torch.isfinite(t).all()) for t in p):
            return True  # diverged: stop
        if not graph_nodes:
            graph_nodes.append(count_graph_nodes(step.loss))
        if step.batch == 0 and step.epoch % params.log_every == 0:
            g = _flat(step.grads)
            rows.append({
                "step": step.epoch,
                "loglik": _finite(mean_loglik(p, X)),
                "cos_exact": _cosine(g, _flat(exact_log_likelihood_gradient(p, step.v_data))),
                "cos_cd": _cosine(g, _flat(cd_gradient(p, step.v_data, step.v_model))),
            })
        return False

    rbm = BernoulliRBM(params.n_components, learning_rate=params.learning_rate,
                       batch_size=params.batch_size, n_iter=params.n_iter, random_state=seed,
                       method=kind, k=k, chain=chain, n_chains=params.n_chains, shuffle=True,
                       init=params.init, device=device, dtype=dtype, callback=callback).fit(X)
    p = RBMParams(rbm.components_, rbm.intercept_visible_, rbm.intercept_hidden_)
    diverged = not all(bool(torch.isfinite(t).all()) for t in p)
    # the state after training: after the last epoch, or one epoch after the one that diverged
    final_step = rbm.n_iter_ + 1 if diverged else rbm.n_iter_
    if not rows or rows[-1]["step"] != final_step:
        rows.append({"step": final_step, "loglik": _finite(mean_loglik(p, X))})
    return {"rows": rows, "params": RBMParams(*(t.cpu() for t in p)),
            "graph_nodes": graph_nodes[0] if graph_nodes else None, "diverged": diverged}


@torch.no_grad()
def draw_samples(p: RBMParams, n_samples: int, n_steps: int, generator: torch.Generator
                 ) -> torch.Tensor:
    """Samples after ``n_steps`` stochastic Gibbs steps from uniform random states."""
    W = p.weights
    if not bool(torch.isfinite(W).all()):
        return torch.full((n_samples, W.shape[1]), float("nan"), dtype=W.dtype)
    v = (torch.rand(n_samples, W.shape[1], generator=generator, dtype=W.dtype) < 0.5).to(W.dtype)
    return gibbs_chain(p, v, n_steps, generator=generator)


def _summary_of(result: dict[str, Any], X: torch.Tensor, dataset: str) -> dict[str, Any]:
    rows = result["rows"]
    final_ll = rows[-1].get("loglik")
    out: dict[str, Any] = {"final_loglik": final_ll, "diverged": result["diverged"],
                           "graph_nodes": result["graph_nodes"]}
    for name in ("cos_exact", "cos_cd"):
        values = [r[name] for r in rows if r.get(name) is not None]
        out[f"mean_{name}"] = float(np.mean(values)) if values else None
    if dataset == "bas" and final_ll is not None:
        nll = -final_ll * len(X)
        out["summed_nll"] = nll
        # the optimum: the NLL of the data's own empirical distribution (108.13 nats for BAS)
        out["gap_to_optimum"] = nll - empirical_nll(X)
    return out


def run_peers(X: torch.Tensor, params: Params, ctx: RunContext) -> dict[str, Any]:
    """scikit-learn's BernoulliRBM (PCD-1) and this toolkit's estimator with the same
    parameters: its defaults are scikit-learn's algorithm (PCD-1), and CD-1."""
    from sklearn.neural_network import BernoulliRBM as SkRBM

    summary: dict[str, Any] = {}
    sk = SkRBM(n_components=params.n_components, learning_rate=params.learning_rate,
               batch_size=params.batch_size, n_iter=params.n_iter, random_state=ctx.seed)
    with ctx.timer("sklearn_fit"):
        sk.fit(X.to(torch.float64).numpy())
    sk_params = RBMParams(*(torch.as_tensor(a, dtype=torch.float64) for a in
                            (sk.components_, sk.intercept_visible_, sk.intercept_hidden_)))
    ll = mean_loglik(sk_params, X)
    summary["sklearn"] = {"pcd": {"final_loglik": ll}}
    ctx.log(params.n_iter, **{"sklearn/pcd/loglik": ll})
    summary["toolkit"] = {}
    for method, kind in (("cd1", "cd"), ("pcd", "pcd")):
        est = BernoulliRBM(params.n_components, learning_rate=params.learning_rate,
                           batch_size=params.batch_size, n_iter=params.n_iter,
                           random_state=ctx.seed, method=kind, dtype=torch.float64)
        with ctx.timer(f"toolkit_fit_{method}"):
            est.fit(X)
        ll = float(est.log_likelihood(X).mean())
        summary["toolkit"][method] = {"final_loglik": ll}
        ctx.log(params.n_iter, **{f"toolkit/{method}/loglik": ll})
    summary["toolkit_minus_sklearn_loglik"] = {
        m: summary["toolkit"][m]["final_loglik"] - summary["sklearn"]["pcd"]["final_loglik"]
        for m in summary["toolkit"]}
    return summary


def run(params: Params, ctx: RunContext) -> None:
    dtype = ctx.dtype
    X, image_shape = load_data(params.dataset, dtype)
    summary: dict[str, Any] = {"blocked": {}, "unblocked": {}}
    weights: dict[str, torch.Tensor] = {}
    samples: dict[str, torch.Tensor] = {}

    for method in ctx.progress(params.methods, desc="methods"):
        def fit(method: str = method) -> dict[str, Any]:
            return train(X, method, params, chain=params.chain, seed=ctx.seed, dtype=dtype,
                         device=ctx.device)

        with ctx.timer(f"train_{method}"):
            results = ctx.compare(fit)
        if params.sampled_peer:
            with ctx.timer(f"train_{method}_sampled"):
                results["sampled"] = train(X, method, params, chain="sampled", seed=ctx.seed,
                                           dtype=dtype, device=ctx.device)
            summary.setdefault("sampled", {})
        for variant, result in results.items():
            for row in result["rows"]:
                ctx.log(row["step"], **{f"{variant}/{method}/{k}": v for k, v in row.items()
                                        if k != "step"})
            summary[variant][method] = _summary_of(result, X, params.dataset)
            weights[f"{variant}_{method}"] = result["params"].weights
            samples[f"{variant}_{method}"] = draw_samples(
                result["params"], params.n_samples, params.sample_steps, ctx.generator)

    if params.peers:
        summary.update(run_peers(X, params, ctx))
    ctx.summary(**summary, data={"dataset": params.dataset, "n_samples": X.shape[0],
                                 "n_visible": X.shape[1], "n_hidden": params.n_components})
    ctx.save_artifact("weights", {**weights, "image_shape": np.array(image_shape)})
    ctx.save_artifact("samples", {**samples, "image_shape": np.array(image_shape)})


# ------------------------------------------------------------------------------- figures

_STYLE = {"blocked": ("C0", "-"), "unblocked": ("C3", "-"), "sampled": ("C2", "--")}


def _metric(run: RunResults, key: str) -> tuple[list[int], list[Any]]:
    try:
        steps, values = run.metric(key)
    except KeyError:
        return [], []
    return list(steps), [np.nan if v is None else v for v in values]


def _methods(run: RunResults) -> list[str]:
    return list(run.params.get("methods", list(METHODS)))


def _tile(images: np.ndarray, shape: tuple[int, int], n_cols: int) -> np.ndarray:
    """Images (n, h*w) → one mosaic array with a 1-pixel NaN border."""
    h, w = shape
    n = images.shape[0]
    n_rows = max(1, math.ceil(n / n_cols))
    out = np.full((n_rows * (h + 1) + 1, n_cols * (w + 1) + 1), np.nan)
    for i, img in enumerate(images):
        r, c = divmod(i, n_cols)
        out[1 + r * (h + 1):1 + r * (h + 1) + h, 1 + c * (w + 1):1 + c * (w + 1) + w] = (
            img.reshape(h, w))
    return out


def _mosaic_figure(run: RunResults, artifact: str, title: str, cmap: str) -> Any:
    import matplotlib.pyplot as plt

    data = run.artifact(artifact)
    shape = tuple(int(s) for s in data["image_shape"])
    variants = [v for v in ("blocked", "unblocked", "sampled")
                if any(k.startswith(f"{v}_") for k in data)]
    methods = _methods(run)
    fig, axes = plt.subplots(len(variants), len(methods), squeeze=False,
                             figsize=(2.8 * len(methods), 2.6 * len(variants) + 0.4))
    for i, variant in enumerate(variants):
        for j, method in enumerate(methods):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            key = f"{variant}_{method}"
            if key not in data:
                continue
            images = np.asarray(data[key], dtype=float)
            mosaic = _tile(images, shape, n_cols=math.ceil(math.sqrt(images.shape[0])))
            if artifact == "weights":
                lim = np.nanmax(np.abs(mosaic)) if np.isfinite(mosaic).any() else 1.0
                ax.imshow(mosaic, cmap=cmap, vmin=-lim, vmax=lim)
            else:
                ax.imshow(mosaic, cmap=cmap, vmin=0, vmax=1)
            ax.set_title(f"{variant} {method}", fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def figures(run: RunResults) -> dict[str, Any]:
    """Log-likelihood curves, gradient cosines, learned filters and samples."""
    import matplotlib.pyplot as plt

    methods = _methods(run)
    figs: dict[str, Any] = {}

    fig, axes = plt.subplots(1, len(methods), squeeze=False, figsize=(4.2 * len(methods), 3.4))
    for ax, method in zip(axes[0], methods):
        for variant, (color, ls) in _STYLE.items():
            steps, values = _metric(run, f"{variant}/{method}/loglik")
            if len(steps):
                ax.plot(steps, values, color=color,
                        ls=ls, label=variant)
        for peer, marker in (("sklearn", "s"), ("toolkit", "^")):
            steps, values = _metric(run, f"{peer}/{method}/loglik")
            if len(steps):
                ax.plot(steps, values, marker, color="k", mfc="none", label=f"{peer} estimator")
        ax.set_title(method)
        ax.set_xlabel("epoch")
        ax.set_ylabel("exact mean log-likelihood")
        ax.legend(fontsize=7)
    fig.suptitle("training log-likelihood: blocked vs unblocked negative samples")
    fig.tight_layout()
    figs["loglik"] = fig

    fig, axes = plt.subplots(1, len(methods), squeeze=False, figsize=(4.2 * len(methods), 3.4))
    for ax, method in zip(axes[0], methods):
        for variant, (color, _) in _STYLE.items():
            for name, ls in (("cos_exact", "-"), ("cos_cd", ":")):
                steps, values = _metric(run, f"{variant}/{method}/{name}")
                if len(steps):
                    label = f"{variant}: vs {'exact LL' if name == 'cos_exact' else 'CD'} grad"
                    ax.plot(steps, values, color=color,
                            ls=ls, label=label)
        ax.set_ylim(-1.05, 1.05)
        ax.axhline(0, color="0.7", lw=0.5)
        ax.set_title(method)
        ax.set_xlabel("epoch")
        ax.set_ylabel("cosine similarity")
        ax.legend(fontsize=6)
    fig.suptitle("gradient direction vs the exact log-likelihood gradient and the CD update")
    fig.tight_layout()
    figs["grad_cosine"] = fig

    figs["filters"] = _mosaic_figure(run, "weights", "learned filters (rows of W)", "RdBu_r")
    figs["samples"] = _mosaic_figure(run, "samples", "samples (stochastic Gibbs chains)",
                                     "gray_r")
    return figs
