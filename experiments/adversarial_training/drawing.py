"""The adversarial_training experiment's figures, drawn from the run's files: accuracy curves,
memory against the attack's steps, adversarial digits and the moons' decision boundaries.
``figures(run)`` in ``__init__.py`` names and captions them, and imports this module only then:
a run never imports matplotlib.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap

from toolkit.lab import RunResults
from toolkit.lab.report.figures import (
    image_grid,
    legend_below,
    step_axes,
    subplots,
    variant_curves,
)
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS
from toolkit.lab.style import EXTRA_COLORS, MARKERS, place_legend, variant_style

from . import LABELS, METHODS


def accuracy_figure(run: RunResults, check: str) -> Any:
    """Accuracy per epoch: colour says the variant, the marker the method (standard training,
    with no attack and no block, in the reference's style)."""
    fig, axes = subplots(1, 2, figsize=(9.0, 4.4), sharey=True)
    for i, method in enumerate(run.params.get("methods", METHODS)):
        standard = method == "standard"
        for ax, key in zip(axes, ("clean_acc", "robust_acc")):
            variant_curves(ax, run, f"{method}/{key}", labels={
                v: LABELS[method] + (" training" if standard else f" {v}") for v in VARIANTS},
                styles={BLOCKED: variant_style("reference") if standard else {},
                        UNBLOCKED: {"mfc": "none"}}, marker=MARKERS[i], ms=5)
    step_axes(axes[0], f"clean accuracy, {check}", ylabel="accuracy", identical=True)
    step_axes(axes[1], f"PGD-10 accuracy (ε = {run.params.get('eps')}), same batch",
              identical=True)
    legend_below(fig, axes)
    return fig


def memory_figure(run: RunResults) -> Any:
    """Peak memory, bytes saved for backward and graph nodes of one step against its PGD steps."""
    memory, peak = run.summary["memory"], run.costs.get("memory", {})
    fig, axes = subplots(1, 3, figsize=(9.0, 3.4))
    for variant in VARIANTS:
        style = {**variant_style(variant), "marker": "o" if variant == BLOCKED else "s"}
        for ax, key in zip(axes, ("peak_bytes", "saved_tensor_peak_bytes")):
            if variant in peak:
                ax.plot(peak["steps"], np.array(peak[variant][key]) / 2**20, label=variant,
                        **style)
        axes[2].plot(memory["steps"], memory[variant]["graph_nodes"], label=variant, **style)
    for ax, unit, title in zip(axes, ("MiB", "MiB", "nodes"), (
            "peak live memory", "saved for backward", "autograd nodes of the loss")):
        step_axes(ax, title, "PGD steps per training step", ylabel=unit, title_size=None)
    place_legend(axes[0])
    return fig


def examples_figure(run: RunResults) -> Any:
    """Held-out digits and their PGD versions against each model, with its predictions."""
    ex, p = run.artifact("examples"), run.params
    attacked = [m for m in run.params.get("methods", METHODS) if f"adv_{m}" in ex]
    side = round(math.sqrt(ex["x"].shape[1]))
    fig, axes = image_grid(
        [("clean", ex["x"]), *((LABELS[m], ex[f"adv_{m}"]) for m in attacked)],
        shape=(side, side), cell=(1.05, 1.3), pad=(1.2, 0.5),
        col_titles=[f"label {int(y)}" for y in ex["y"]],
        title=f"PGD-{p.get('eval_steps')} examples (ε = {p.get('eps')}) against each model")
    for r, method in enumerate(attacked, start=1):
        for ax, pred, label in zip(axes[r], ex[f"pred_adv_{method}"], ex["y"]):
            fooled = int(pred) != int(label)
            ax.set_title(f"→ {int(pred)}" + (" fooled" if fooled else ""), fontsize=9,
                         weight="bold" if fooled else "normal")
    return fig


def boundary_figure(run: RunResults) -> Any:
    """Class-1 probability and the 0.5 boundary of each blocked model, with PGD points."""
    b = run.artifact("boundary")
    attacked = [m for m in run.params.get("methods", METHODS) if f"prob_{m}" in b]
    classes = ListedColormap(EXTRA_COLORS[:2])  # neither blocked blue nor unblocked orange
    fig, axes = subplots(1, len(attacked), figsize=(min(3.0 * len(attacked), 9.0), 3.4),
                         squeeze=False)
    for ax, method in zip(axes[0], attacked):
        ax.contourf(b["gx"], b["gy"], b[f"prob_{method}"], levels=20, cmap="PRGn_r", alpha=0.35)
        ax.contour(b["gx"], b["gy"], b[f"prob_{method}"], levels=[0.5], colors="k")
        adv = b[f"adv_{method}"]
        for p0, q in zip(b["x"], adv):
            ax.plot([p0[0], q[0]], [p0[1], q[1]], "k-", lw=0.3)
        ax.scatter(b["x"][:, 0], b["x"][:, 1], c=b["y"], cmap=classes, s=10, edgecolors="k",
                   linewidths=0.3)
        ax.scatter(adv[:, 0], adv[:, 1], c=b["y"], cmap=classes, marker="x", s=14)
        ax.set_title(f"{LABELS[method]}, ε = {run.params.get('eps')}", fontsize=10)
    return fig
