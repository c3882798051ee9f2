"""The softmax_gradients experiment's figures, drawn from the run's files: the gradient errors
over scales, where the naive form overflows, and the cost bars. ``figures(run)`` in
``__init__.py`` names and captions them, and imports this module only then: a run never imports
matplotlib.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from toolkit.lab import RunResults
from toolkit.lab.report.figures import draw_spread, subplots, value_bars
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import EXTRA_COLORS, MARKERS, note_identical, place_legend, variant_style

from . import DTYPES, KINDS, SHAPE
from .cost import COST_VARIANTS

#: Per variant: legend entry, marker, its size, more style (distinct markers keep blocked and
#: unblocked, which differ by rounding, both visible).
_GRAD_LINES = {BLOCKED: (BLOCKED, "o", 3.5, {}), UNBLOCKED: (UNBLOCKED, "s", 6, {}),
               "torch": ("torch.softmax", "^", 5, {}),
               "upcast": ("float32 compute", "v", 5, {"color": EXTRA_COLORS[5]})}
_FLOOR = 1e-20  # exact zeros on a log axis; no error (None) is not drawn


def gradient_figure(run: RunResults) -> Any:
    """One panel per input kind (row) and dtype (column): each variant's error vs scale."""
    grads = run.artifact("gradients")
    scales, dtypes, res = grads["scales"], grads["dtypes"], grads["results"]
    every = [res] + [r.artifact("gradients")["results"] for r in run.replicates[1:]]
    floor = lambda vs: [math.nan if v is None else max(v, _FLOOR) for v in vs]  # noqa: E731
    fig, axes = subplots(len(KINDS), len(dtypes), figsize=(9.0, 2.4 * len(KINDS) + 1.2),
                         squeeze=False, sharey=True, sharex=True)
    for (row, kind), (col, name) in itertools.product(enumerate(KINDS), enumerate(dtypes)):
        ax = axes[row][col]
        for v, (label, marker, size, extra) in _GRAD_LINES.items():
            if res[name][kind][0].get(v) is not None:
                draw_spread(ax, scales, [floor([r[v]["max_abs_err"] for r in e[name][kind]])
                                         for e in every], mode="lines",
                            marker=marker, ms=size, mfc="none" if v != BLOCKED else None,
                            label=f"{label} vs float64", **(variant_style(v) | extra))
        draw_spread(ax, scales, [floor([r["blocked_vs_unblocked"]["max_abs_diff"]
                                         for r in e[name][kind]]) for e in every],
                    mode="lines", color="k", marker="x", ms=5, linestyle="-", lw=0.8,
                    label="|blocked − unblocked|")
        ax.axhline(torch.finfo(DTYPES[name]).eps, color="0.6", lw=0.8, label="dtype eps")
        ax.set(xscale="log", yscale="log")
        ax.set_title(f"{name}, {kind}", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("logit scale s", fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"max |error| (0 at {_FLOOR:g})", fontsize=9)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes.flat),
                          key=lambda hl: len(hl[0]))
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    return fig


def failure_figure(run: RunResults) -> Any:
    """The share of overflowing rows vs scale (left); where naive_softmax([c, 0]) fails."""
    failure = run.artifact("failure")
    failures = [failure] + [r.artifact("failure") for r in run.replicates[1:]]
    fig, (ax, ax2) = subplots(1, 2, figsize=(9.0, 4.4), gridspec_kw={"width_ratios": [1.7, 1]})
    dnames = list(failure["dtypes"])
    colours = {n: EXTRA_COLORS[i % 4] for i, n in enumerate(dnames)}
    for i, name in enumerate(dnames):
        draw_spread(ax, failure["scales"], [f["dtypes"][name]["naive_nonfinite_fraction"]
                                            for f in failures], color=colours[name],
                    marker=MARKERS[i], ms=4, label=f"naive {name}")
    stable = [[f["dtypes"][n]["stable_nonfinite_fraction"] for n in dnames] for f in failures]
    if all(v == 0 for seed in stable for row in seed for v in row):  # one line says it
        ax.plot(failure["scales"], [0.0] * len(failure["scales"]), color="k", lw=2, ls=":",
                label="stable, every dtype: 0")
    else:
        for i, name in enumerate(dnames):
            draw_spread(ax, failure["scales"], [seed[i] for seed in stable], ls=":",
                        color=colours[name], label=f"stable {name}")
    ax.set(xscale="log", xlabel="logit scale s (inputs s·u, u ~ N(0, 1))",
           ylabel="fraction of rows with inf/nan", ylim=(-0.05, 1.05))
    ax.set_title("rows that overflow, naive vs stable", fontsize=10)
    ax.grid(alpha=0.3)
    note_identical(ax)
    place_legend(ax, fontsize=9, ncol=2, outside="below")
    first = [failure["dtypes"][n]["threshold_first_failing"] for n in dnames]
    log_max = [failure["dtypes"][n]["log_finfo_max"] for n in dnames]
    value_bars(ax2, dnames, first, [colours[n] for n in dnames], fmt="{:.4g}", padding=7)
    ax2.plot(log_max, range(len(dnames)), "|", color="k", ms=22, mew=2)
    ax2.set(xscale="log", xlim=(min(first) / 2, max(log_max) * 8),
            xlabel="c (black marks: log(finfo.max))")
    ax2.set_title("naive_softmax([c, 0])\nfails from c =", fontsize=10)
    return fig


def cost_figure(run: RunResults) -> Any:
    """Bars per variant: time, graph nodes, peak memory, bytes saved, per input shape."""
    costs, summary = run.costs, run.summary
    labels = [k for k in costs.get(BLOCKED, {}) if SHAPE.match(k)]
    metrics = [("time_median_s", "time [ms]", 1e3, costs),
               ("graph_nodes", "autograd nodes", 1, summary),
               ("peak_bytes", "peak memory [MiB]", 1 / 2**20, costs),
               ("saved_tensor_bytes", "saved for backward [MiB]", 1 / 2**20, summary)]
    fig, axes = subplots(len(labels), len(metrics), sharey=True,
                         figsize=(9.0, 2.1 * len(labels) + 0.3), squeeze=False)
    colors = [variant_style(v)["color"] if v != "fused" else EXTRA_COLORS[4]
              for v in COST_VARIANTS]
    for (i, label), (j, (key, title, factor, source)) in itertools.product(
            enumerate(labels), enumerate(metrics)):
        values = [source.get(v, {}).get(label, {}).get(key) for v in COST_VARIANTS]
        value_bars(axes[i][j], list(COST_VARIANTS),
                   [None if val is None else val * factor for val in values], colors)
        axes[i][j].set_title(f"{title}\n{label}", fontsize=9)
    return fig
