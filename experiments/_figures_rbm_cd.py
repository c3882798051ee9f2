"""Figures of the ``rbm_cd`` experiment, drawn only from a run's files."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .rbm_cd import NAMES, _methods
from toolkit import draw_gradient_graph
from toolkit.report.figures import plot_seeds
from toolkit.runner import RunResults
from toolkit.style import integer_ticks, variant_style


def _metric(run: RunResults, key: str) -> tuple[np.ndarray, np.ndarray]:
    return run.metric(key) if key in run.metric_keys() else (np.array([]), np.array([]))


def _seeds(ax: Any, run: RunResults, key: str, **style: Any) -> None:
    """The metric over every seed of the run (mean and range), if it was logged."""
    if key in run.metric_keys():
        plot_seeds(ax, run, key, **style)


def _variants(run: RunResults) -> list[str]:
    return [v for v in ("blocked", "unblocked", "sampled") if v in run.summary]


def _mosaic_figure(run: RunResults, artifact: str, title: str, cmap: str) -> Any:
    """One panel per variant and method: the rows of the artifact as images, tiled."""
    import matplotlib.pyplot as plt

    data = run.artifact(artifact)
    h, w = (int(x) for x in data["image_shape"])
    variants = [v for v in ("blocked", "unblocked", "sampled")
                if any(k.startswith(f"{v}_") for k in data)]
    methods = _methods(run)
    fig, axes = plt.subplots(len(variants), len(methods), squeeze=False,
                             figsize=(2.8 * len(methods), 2.6 * len(variants) + 0.5))
    for (i, variant), (j, method) in itertools.product(enumerate(variants), enumerate(methods)):
        ax = axes[i, j]
        ax.set_xticks([])
        ax.set_yticks([])
        images = np.asarray(data.get(f"{variant}_{method}", np.zeros((0, h * w))), dtype=float)
        cols = max(1, math.ceil(math.sqrt(len(images))))
        mosaic = np.full((-(-len(images) // cols) * (h + 1) + 1, cols * (w + 1) + 1), np.nan)
        for n, img in enumerate(images):  # a 1-pixel NaN border around each image
            r, c = divmod(n, cols)
            mosaic[1 + r * (h + 1):(r + 1) * (h + 1), 1 + c * (w + 1):(c + 1) * (w + 1)] = (
                img.reshape(h, w))
        lim = np.nanmax(np.abs(mosaic)) if np.isfinite(mosaic).any() else 1.0
        ax.imshow(mosaic, cmap=cmap, vmin=-lim if artifact == "weights" else 0,
                  vmax=lim if artifact == "weights" else 1)
        ax.set_title(f"{variant}, {NAMES[method]}", fontsize=9,
                     color=variant_style(variant)["color"])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _panels(run: RunResults, title: str, ylabel: str) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    methods = _methods(run)
    fig, axes = plt.subplots(1, len(methods), squeeze=False, sharey=True,
                             figsize=(3.6 * len(methods) + 0.6, 3.6))
    for ax, method in zip(axes[0], methods):
        ax.set_title(NAMES[method], fontsize=10)
        ax.set_xlabel("epoch")
        integer_ticks(ax)
    axes[0, 0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    return fig, axes[0]


def _finish(fig: Any, axes: Any) -> None:
    """One legend for the figure, below the panels (no panel's data is hidden under it)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.legend(list(handles.values()), list(handles), loc="lower center",
               ncol=min(len(handles), 4), fontsize=8, frameon=False)


def _loglik_figure(run: RunResults) -> Any:
    fig, axes = _panels(run, "Exact log-likelihood of the training data per pattern",
                        "log-likelihood (nats per pattern)")
    data = run.summary.get("data", {})
    others: list[str] = []
    for ax, method in zip(axes, _methods(run)):
        for variant in _variants(run):
            _seeds(ax, run, f"{variant}/{method}/loglik", marker=".",
                   label=f"{variant} (mean-field chain)" if variant != "sampled" else
                   "sampled chain, with the block", **variant_style(variant, others))
        for peer, marker, label in (("sklearn", "s", "scikit-learn's BernoulliRBM (PCD-1)"),
                                    ("toolkit", "^", "toolkit BernoulliRBM, same parameters")):
            steps, values = _metric(run, f"{peer}/{method}/loglik")
            if len(steps):
                ax.plot(steps, values, marker, mfc="none", label=label,
                        color=variant_style("reference")["color"])
        if data.get("uniform_loglik") is not None:
            ax.axhline(data["uniform_loglik"], color="0.6", lw=0.8, ls=":",
                       label=f"uniform model ({data.get('n_visible')} fair bits)")
    _finish(fig, axes)
    return fig


def _cosine_figure(run: RunResults) -> Any:
    fig, axes = _panels(run, "Cosine of each update to the CD statistics and to the exact "
                             "log-likelihood gradient", "cosine similarity")
    others: list[str] = []
    for ax, method in zip(axes, _methods(run)):
        for variant in _variants(run):
            style = variant_style(variant, others)
            for name, marker, what in (("cos_cd", "o", "CD update"),
                                       ("cos_exact", "x", "exact gradient")):
                _seeds(ax, run, f"{variant}/{method}/{name}", marker=marker, ms=4, mfc="none",
                       label=f"{variant}: to the {what}", **style)
        ax.axhline(0, color="0.8", lw=0.5)
        ax.set_ylim(-1.05, 1.05)
    _finish(fig, axes)
    return fig


def figures(run: RunResults) -> dict[str, Any]:
    """Headline: log-likelihood curves and gradient cosines; then filters, samples and the
    backward graph of one CD step."""
    figs: dict[str, Any] = {
        "loglik": (_loglik_figure(run),
                   "Exact mean log-likelihood of the training patterns during training, one "
                   "panel per method: blue with the block, vermillion without it (neither "
                   "follows the likelihood gradient, so either may end higher), against the "
                   "grey uniform model the training starts near. Mean-field persistent chains "
                   "(PCD) can oscillate at large step sizes. Green: stochastic chains (with "
                   "the block); open markers: scikit-learn's estimator and the toolkit's with "
                   "the same parameters, after the last epoch."),
        "grad_cosine": (_cosine_figure(run),
                        "Cosine of the applied update to the CD statistics at the same chain "
                        "samples (circles) and to the exact log-likelihood gradient (crosses), "
                        "at the first mini-batch of every logged epoch. With the block the "
                        "update is the CD update (cosine 1); without it the gradient through "
                        "the chain points elsewhere (cosine below 1)."),
    }
    figs["filters"] = (_mosaic_figure(run, "weights", "Learned filters (rows of W)", "RdBu_r"),
                       "Each hidden unit's weights as an image, per variant and method.")
    figs["samples"] = (_mosaic_figure(run, "samples", "Samples after stochastic Gibbs "
                                      "sampling", "gray_r"),
                       "Samples of each trained model after stochastic Gibbs steps from "
                       "random states.")
    if "graph_cd_step" in run.artifact_names():
        figs["graph_cd_step"] = (
            draw_gradient_graph(run.artifact("graph_cd_step"),
                                title="Backward graph of one CD-1 step (mean-field chain)"),
            "The backward graph of cd_loss for one CD-1 step: the cut "
            "'rbm.negative_samples' (red, dashed) removes the chain (grey, dashed) from the "
            "gradient; without the block those nodes are part of it.")
    return figs
