"""The rbm_cd experiment's figures, drawn from the run's files: log-likelihood curves, gradient
cosines, and the filters and samples as images. ``figures(run)`` in ``__init__.py`` names and
captions them, and imports this module only then: a run never imports matplotlib.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from toolkit.lab import RunResults
from toolkit.lab.report.figures import (
    image_grid,
    legend_below,
    step_axes,
    subplots,
    tile_images,
    variant_curves,
)
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import variant_style

from . import NAMES, methods_of

#: The chains: mean-field (differentiable, blocked or not) and stochastic (with the block).
_VARIANT_NAMES = {BLOCKED: "blocked (mean-field chain)",
                  UNBLOCKED: "unblocked (mean-field chain)",
                  "sampled": "sampled chain (stochastic)"}
#: The variants' markers differ, so curves that coincide (cosine 1 with the block) stay visible.
_VARIANT_MARKERS = {v: {"marker": m} for v, m in zip(_VARIANT_NAMES, ("o", "s", "^"))}


def loglik_figure(run: RunResults) -> Any:
    fig, axes = _panels(run, [""], "log-likelihood (nats per pattern)", 3.0)
    data, others = run.summary.get("data", {}), []
    for ax, method in zip(axes[0], methods_of(run)):
        variant_curves(ax, run, f"{method}/loglik", _variants(run), labels=_VARIANT_NAMES,
                       styles=_VARIANT_MARKERS, others=others, ms=3)
        for peer, marker, label in (("sklearn", "s", "scikit-learn's BernoulliRBM (PCD-1)"),
                                    ("toolkit", "^", "toolkit BernoulliRBM, same parameters")):
            if f"{peer}/{method}/loglik" in run.metric_keys():
                ax.plot(*run.metric(f"{peer}/{method}/loglik"), marker, mfc="none", ms=7,
                        label=label, color=variant_style("reference")["color"])
        if data.get("uniform_loglik") is not None:
            ax.axhline(data["uniform_loglik"], color="0.6", lw=0.8, ls=":",
                       label=f"uniform model ({data.get('n_visible')} fair bits)")
    legend_below(fig, axes.flat)
    return fig


def cosine_figure(run: RunResults) -> Any:
    rows = {"cos_cd": "to the CD update", "cos_exact": "to the exact gradient"}
    fig, axes = _panels(run, list(rows.values()), "cosine similarity", 2.3)
    others: list[str] = []
    for (i, name), (j, method) in itertools.product(enumerate(rows), enumerate(methods_of(run))):
        variant_curves(axes[i, j], run, f"{method}/{name}", _variants(run),
                       labels=_VARIANT_NAMES, styles=_VARIANT_MARKERS, others=others, ms=4,
                       mfc="none")
        if name == "cos_exact":
            axes[i, j].axhline(0, color="0.8", lw=0.5)
    axes[-1, 0].set_ylim(-1.05, 1.05)
    legend_below(fig, axes.flat)
    return fig


def _panels(run: RunResults, rows: list[str], ylabel: str, height: float) -> tuple[Any, Any]:
    """One panel per row and method, the rows sharing their y axis, epochs below the last."""
    methods = methods_of(run)
    fig, axes = subplots(len(rows), len(methods), squeeze=False, sharey="row", sharex=True,
                         figsize=(9.0, height * len(rows) + 0.9))
    for (i, row), (j, method) in itertools.product(enumerate(rows), enumerate(methods)):
        step_axes(axes[i, j], f"{NAMES[method]}{': ' + row if row else ''}",
                  "epoch" if i == len(rows) - 1 else None)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    return fig, axes


def mosaic_figure(run: RunResults, artifact: str, title: str, cmap: str) -> Any:
    """One panel per variant (row) and method (column): the artifact's rows as images, tiled."""
    data = run.artifact(artifact)
    shape = tuple(int(x) for x in data["image_shape"])
    methods, none = methods_of(run), np.zeros((0, shape[0] * shape[1]))
    rows = [(name, [tile_images(data.get(f"{v}_{m}", none), shape) for m in methods])
            for v, name in _VARIANT_NAMES.items() if any(k.startswith(f"{v}_") for k in data)]
    fig, _ = image_grid(rows, cell=(2.5, 2.4), pad=(0.8, 0.4), title=title,
                        col_titles=[NAMES[m] for m in methods], fontsize=10, cmap=cmap,
                        symmetric=artifact == "weights")
    return fig


def _variants(run: RunResults) -> list[str]:
    return [v for v in (BLOCKED, UNBLOCKED, "sampled") if v in run.summary]
