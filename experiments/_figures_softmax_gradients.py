"""Figures of the ``softmax_gradients`` experiment, drawn only from a run's files."""

from __future__ import annotations

import math
from typing import Any

import torch

from toolkit.runner import RunResults


def figures(run: RunResults) -> dict[str, Any]:
    """Gradient error vs scale per dtype; naive vs stable overflow; cost bars; the graph."""
    import matplotlib.pyplot as plt

    from .softmax_gradients import _SHAPE, COST_VARIANTS, DTYPES, KINDS, _floor
    from toolkit import draw_gradient_graph
    from toolkit.report.figures import draw_spread
    from toolkit.style import EXTRA_COLORS, variant_style

    out: dict[str, Any] = {}
    grads = run.artifact("gradients")
    scales, dtypes, res = grads["scales"], grads["dtypes"], grads["results"]
    # every seed's results (one band per line where there are several)
    every = [res] + [r.artifact("gradients")["results"] for r in run.replicates[1:]]
    floor = 1e-20
    fig, axes = plt.subplots(len(KINDS), len(dtypes), figsize=(3.6 * len(dtypes), 3.0 * len(KINDS) + 0.8),
                             squeeze=False, sharey=True, sharex=True, layout="constrained")
    names = {"blocked": "blocked", "unblocked": "unblocked", "torch": "torch.softmax",
             "upcast": "blocked, float32 compute"}
    markers = {"blocked": "o", "unblocked": "s", "torch": "^", "upcast": "v"}
    others: list[str] = []
    for row, kind in enumerate(KINDS):
        for ax, name in zip(axes[row], dtypes):
            rows = res[name][kind]
            for v, label in names.items():
                if rows[0].get(v) is None:
                    continue
                draw_spread(ax, scales, [_floor([r[v]["max_abs_err"] for r in e[name][kind]],
                                                floor) for e in every], mode="lines",
                            marker=markers[v], ms=3, mfc="none", label=f"{label} vs float64",
                            **variant_style(v if v != "upcast" else "upcast", others))
            draw_spread(ax, scales, [_floor([r["blocked_vs_unblocked"]["max_abs_diff"]
                                             for r in e[name][kind]], floor) for e in every],
                        mode="lines", color="k", marker="x", ms=4, linestyle="-", lw=0.8,
                        label="|blocked − unblocked|")
            ax.axhline(torch.finfo(DTYPES[name]).eps, color="0.6", lw=0.6, label="dtype eps")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{name}, {kind} logits" + (" (tied maxima)" if kind == "tied" else ""),
                         fontsize=9)
            ax.grid(alpha=0.3)
            if row == len(KINDS) - 1:
                ax.set_xlabel("logit scale s")
        axes[row][0].set_ylabel(f"max |gradient error|\n(0 drawn at {floor:g})")
    handles, labels = [], []
    for ax in axes.flat:  # the legend of the panel with the most lines
        h, lab = ax.get_legend_handles_labels()
        if len(h) > len(handles):
            handles, labels = h, lab
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7)
    fig.suptitle("softmax gradient against torch.softmax's float64 gradient", fontsize=10)
    out["gradient_difference_vs_scale"] = (
        fig, "Largest gradient error against torch.softmax's float64 gradient over logit scales, "
             "per precision, for random and tied logits (with several seeds, one line per "
             "seed); the black crosses are the difference between blocked and unblocked, which "
             "stays at the rounding level (grey: the dtype's eps).")

    failure = run.artifact("failure")
    failures = [failure] + [r.artifact("failure") for r in run.replicates[1:]]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained",
                                  gridspec_kw={"width_ratios": [2, 1]})
    dnames = list(failure["dtypes"])
    for i, name in enumerate(dnames):
        color = EXTRA_COLORS[i % len(EXTRA_COLORS)]
        draw_spread(ax, failure["scales"], [f["dtypes"][name]["naive_nonfinite_fraction"]
                                            for f in failures], color=color,
                    label=f"naive {name}")
        draw_spread(ax, failure["scales"], [f["dtypes"][name]["stable_nonfinite_fraction"]
                                            for f in failures], color=color, linestyle=":",
                    label=f"stable {name}")
    ax.set_xscale("log")
    ax.set_xlabel("logit scale s (inputs s·u, u ~ N(0, 1))")
    ax.set_ylabel("fraction of rows with inf/nan")
    ax.set_title("naive exp(x)/Σexp(x) vs stable softmax", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    pos = range(len(dnames))
    ax2.bar([p - 0.2 for p in pos], [failure["dtypes"][n]["threshold_first_failing"]
                                     for n in dnames], width=0.4, label="first failing c",
            color=variant_style("unblocked")["color"])
    ax2.bar([p + 0.2 for p in pos], [failure["dtypes"][n]["log_finfo_max"] for n in dnames],
            width=0.4, label="log(finfo.max)", color=variant_style("reference")["color"])
    for p, n in zip(pos, dnames):
        ax2.text(p - 0.2, failure["dtypes"][n]["threshold_first_failing"],
                 f"{failure['dtypes'][n]['threshold_first_failing']:.4g}", ha="center",
                 va="bottom", fontsize=7)
    ax2.set_xticks(list(pos), dnames, fontsize=8)
    ax2.set_yscale("log")
    ax2.set_ylim(top=max(failure["dtypes"][n]["log_finfo_max"] for n in dnames) * 4)
    ax2.set_title("naive_softmax([c, 0]) overflows at c", fontsize=10)
    ax2.legend(fontsize=7, loc="upper right")
    out["naive_vs_stable_failure"] = (
        fig, "Left: rows that overflow with the naive form as the logits grow (the stable form "
             "never does); right: the smallest c at which naive_softmax([c, 0]) fails, equal to "
             "log(finfo.max) of each precision.")

    costs, summary = run.costs, run.summary
    labels = [k for k in costs.get("blocked", {}) if _SHAPE.match(k)]
    if labels:
        metrics = [("time_median_s", "forward+backward time [ms]", 1e3, costs),
                   ("graph_nodes", "autograd nodes", 1, summary),
                   ("peak_bytes", "peak memory [MiB]", 1 / 2**20, costs),
                   ("saved_tensor_bytes", "saved for backward [MiB]", 1 / 2**20, summary)]
        fig, axes = plt.subplots(len(labels), len(metrics), layout="constrained",
                                 figsize=(3.4 * len(metrics), 2.9 * len(labels)), squeeze=False)
        colors = [variant_style(v)["color"] if v != "fused" else EXTRA_COLORS[0]
                  for v in COST_VARIANTS]
        for i, label in enumerate(labels):
            for j, (key, title, factor, source) in enumerate(metrics):
                ax = axes[i][j]
                values = [source.get(v, {}).get(label, {}).get(key) for v in COST_VARIANTS]
                heights = [math.nan if val is None else val * factor for val in values]
                ax.bar(range(len(COST_VARIANTS)), heights, color=colors)
                for k, h in enumerate(heights):
                    if h == h:
                        ax.text(k, h, f"{h:.3g}", ha="center", va="bottom", fontsize=7)
                ax.set_xticks(range(len(COST_VARIANTS)), COST_VARIANTS, fontsize=7)
                ax.margins(y=0.2)
                ax.set_title(f"{title}\n{label} float32", fontsize=8)
                ax.tick_params(labelsize=7)
        out["cost_bars"] = (fig, f"Cost of one forward+backward (float32, seed {run.seed}): "
                                 "time, autograd nodes, peak memory and bytes saved for "
                                 "backward per variant.")
    if "graph" in run.artifact_names():
        out["graph"] = (draw_gradient_graph(run.artifact("graph")),
                        "The backward graph of the stable softmax with its cut softmax.max "
                        "marked: behind it (dashed) the max, which gradient never needs.")
    return out
