"""Figures of the ``adversarial_training`` experiment, drawn only from a run's files."""

from __future__ import annotations

import math
from typing import Any

from toolkit.runner import RunResults


def figures(run: RunResults) -> dict[str, Any]:
    """Accuracy curves, memory vs PGD steps, adversarial digits or moons decision boundaries."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .adversarial_training import _LABELS
    from toolkit import draw_gradient_graph
    from toolkit.report.figures import plot_seeds
    from toolkit.style import EXTRA_COLORS, integer_ticks, variant_style

    figs: dict[str, Any] = {}
    methods = run.params.get("methods", ["standard", "pgd", "fgsm_rs"])
    keys = set(run.metric_keys())
    artifacts = run.artifact_names()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True, layout="constrained")
    for i, method in enumerate(methods):
        for variant in ("blocked", "unblocked"):
            style = {**variant_style(variant), "color": EXTRA_COLORS[i % len(EXTRA_COLORS)]}
            for ax, key in zip(axes, ("clean_acc", "robust_acc")):
                if f"{variant}/{method}/{key}" not in keys:
                    continue
                plot_seeds(ax, run, f"{variant}/{method}/{key}", marker="o", ms=3,
                           label=f"{_LABELS[method]}" + (f" ({variant})" if method != "standard"
                                                         else ""), **style)
    axes[0].set_title("clean accuracy (held-out check batch)", fontsize=10)
    axes[1].set_title(f"PGD-10 accuracy, ε = {run.params.get('eps')}", fontsize=10)
    for ax in axes:
        ax.set_xlabel("epoch")
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[1].legend(fontsize=7)
    figs["accuracy_curves"] = (
        fig, "Clean and PGD accuracy per epoch of each training method (one colour per method; "
             "unblocked dashed over blocked: with L∞ steps the curves coincide).")

    memory = run.summary.get("memory")
    peak = run.costs.get("memory", {})
    if memory:
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
        for variant in ("blocked", "unblocked"):
            style = {**variant_style(variant), "marker": "o" if variant == "blocked" else "s"}
            if variant in peak:
                axes[0].plot(peak["steps"], np.array(peak[variant]["peak_bytes"]) / 2**20,
                             label=variant, **style)
                axes[1].plot(peak["steps"],
                             np.array(peak[variant]["saved_tensor_peak_bytes"]) / 2**20,
                             label=variant, **style)
            axes[2].plot(memory["steps"], memory[variant]["graph_nodes"], label=variant, **style)
        axes[0].set_title("peak live tensor memory", fontsize=9)
        axes[1].set_title("bytes saved for backward, alive at once (peak)", fontsize=9)
        axes[2].set_title("autograd nodes behind the training loss", fontsize=9)
        for ax, unit in zip(axes, ("MiB", "MiB", "nodes")):
            ax.set_xlabel("PGD steps of one PGD-AT training step")
            ax.set_ylabel(unit)
            integer_ticks(ax)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        figs["memory_vs_steps"] = (
            fig, "What one PGD-AT training step costs as the attack gets more steps: without "
                 "the block the graph and the memory grow with every step, with it they stay "
                 "flat.")

    if "examples" in artifacts:
        ex = run.artifact("examples")
        attacked = [m for m in methods if f"adv_{m}" in ex]
        n = len(ex["y"])
        side = round(math.sqrt(ex["x"].shape[1]))
        rows = 1 + len(attacked)
        fig, axes = plt.subplots(rows, n, figsize=(1.1 * n + 1.2, 1.35 * rows + 0.5),
                                 squeeze=False, layout="constrained")
        for j in range(n):
            axes[0, j].imshow(ex["x"][j].reshape(side, side), cmap="gray_r", vmin=0, vmax=1)
            axes[0, j].set_title(f"label {int(ex['y'][j])}", fontsize=7)
            for r, method in enumerate(attacked, start=1):
                pred = int(ex[f"pred_adv_{method}"][j])
                ok = pred == int(ex["y"][j])
                axes[r, j].imshow(ex[f"adv_{method}"][j].reshape(side, side), cmap="gray_r",
                                  vmin=0, vmax=1)
                axes[r, j].set_title(f"→ {pred}", fontsize=7,
                                     color="black" if ok else variant_style("unblocked")["color"])
        for r, method in enumerate(["clean", *attacked]):
            axes[r, 0].set_ylabel(_LABELS.get(method, method), fontsize=7)
        for ax in axes.ravel():
            ax.set_xticks([])
            ax.set_yticks([])
        fig.suptitle(f"PGD-{run.params.get('eval_steps')} examples (ε = {run.params.get('eps')})"
                     f" against each model", fontsize=9)
        figs["adversarial_examples"] = (
            fig, "Held-out digits (top) and their PGD versions against each model, with the "
                 "model's prediction (coloured when the attack fools it).")

    if "boundary" in artifacts:
        b = run.artifact("boundary")
        attacked = [m for m in methods if f"prob_{m}" in b]
        fig, axes = plt.subplots(1, len(attacked), figsize=(4.2 * len(attacked), 3.8),
                                 squeeze=False, layout="constrained")
        for ax, method in zip(axes[0], attacked):
            ax.contourf(b["gx"], b["gy"], b[f"prob_{method}"], levels=20, cmap="RdBu_r",
                        alpha=0.6)
            ax.contour(b["gx"], b["gy"], b[f"prob_{method}"], levels=[0.5], colors="k")
            ax.scatter(b["x"][:, 0], b["x"][:, 1], c=b["y"], cmap="bwr", s=10, edgecolors="k",
                       linewidths=0.3, label="held-out")
            adv = b[f"adv_{method}"]
            ax.scatter(adv[:, 0], adv[:, 1], c=b["y"], cmap="bwr", marker="x", s=14,
                       label="PGD points")
            for p, q in zip(b["x"], adv):
                ax.plot([p[0], q[0]], [p[1], q[1]], "k-", lw=0.3)
            ax.set_title(f"{_LABELS[method]}, ε = {run.params.get('eps')}", fontsize=10)
            ax.legend(fontsize=6, loc="lower left")
        figs["decision_boundary"] = (
            fig, "Decision boundaries on the two moons with the held-out points and their PGD "
                 "versions.")
    if "graph" in artifacts:
        figs["graph"] = (draw_gradient_graph(run.artifact("graph")),
                         "The backward graph of one PGD-AT loss with the cut "
                         "adversarial.examples marked: behind it lies the unrolled attack.")
    return figs
