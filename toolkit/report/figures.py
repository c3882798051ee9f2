"""Default figures of a run, drawn only from its results files.

Metric keys are ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``). The default set has
one figure per group, with one panel per name overlaying every variant against the step, and a
figure of the summary numbers side by side. Every function returns matplotlib ``Figure``
objects (Agg backend); nothing is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from toolkit.runner.results import RunResults

__all__ = [
    "VARIANT_STYLE",
    "default_figures",
    "metric_figure",
    "metric_groups",
    "summary_figure",
]

MAX_PANELS = 9        # panels per figure
MAX_FIGURES = 12      # figures per run (metrics)
VARIANT_STYLE: dict[str, dict[str, Any]] = {
    "blocked": {"color": "C0", "linestyle": "-"},
    "unblocked": {"color": "C1", "linestyle": "--"},
}
_PEER_COLORS = ["C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9"]


def split_key(key: str) -> tuple[str, str, str]:
    """``"blocked/train/loss"`` → ``("blocked", "train", "loss")``; shorter keys get ``""``."""
    parts = key.split("/")
    if len(parts) >= 3:
        return parts[0], parts[1], "/".join(parts[2:])
    if len(parts) == 2:
        return parts[0], "", parts[1]
    return "", "", parts[0]


def metric_groups(run: RunResults) -> dict[str, dict[str, dict[str, str]]]:
    """group → name → variant → metric key, in order of first appearance."""
    groups: dict[str, dict[str, dict[str, str]]] = {}
    for key in run.metric_keys():
        variant, group, name = split_key(key)
        groups.setdefault(group, {}).setdefault(name, {})[variant] = key
    return groups


def _style(variant: str, peers: list[str]) -> dict[str, Any]:
    if variant in VARIANT_STYLE:
        return dict(VARIANT_STYLE[variant])
    if variant not in peers:
        peers.append(variant)
    return {"color": _PEER_COLORS[peers.index(variant) % len(_PEER_COLORS)], "linestyle": ":"}


def _variant_order(variants: Mapping[str, str]) -> list[str]:
    head = [v for v in ("blocked", "unblocked") if v in variants]
    return head + [v for v in variants if v not in head]


def _fixed_layout(fig: Figure, nrows: int, ncols: int, *, panel_h: float) -> None:
    """Margins in inches turned into fractions: as tidy as ``tight_layout`` for these grids,
    at a fraction of its cost (it measures every tick label)."""
    height = panel_h * nrows
    width = fig.get_figwidth()
    fig.subplots_adjust(left=0.55 / width * ncols ** 0.5 if ncols > 1 else 0.75 / width,
                        right=1 - 0.15 / width, bottom=0.5 / height, top=1 - 0.55 / height,
                        wspace=0.35, hspace=0.55 * 3.0 / panel_h)


def metric_figure(run: RunResults, group: str, names: Mapping[str, Mapping[str, str]],
                  *, title: str | None = None) -> Figure:
    """One panel per metric name of ``group``; each panel overlays the variants vs step."""
    items = list(names.items())[:MAX_PANELS]
    n = len(items)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows), squeeze=False)
    peers: list[str] = []
    for ax, (name, variants) in zip(axes.flat, items):
        series = {v: run.metric(variants[v]) for v in _variant_order(variants)}
        if all(len(steps) == 1 for steps, _ in series.values()):
            # logged once: a bar per variant says more than a single point on a step axis
            labels = [v or name for v in series]
            values = [float(vals[0]) for _, vals in series.values()]
            bars = ax.bar(range(len(values)), values,
                          color=[_style(v, peers)["color"] for v in series])
            ax.bar_label(bars, labels=[f"{x:.4g}" for x in values], fontsize=7)
            ax.set_xticks(range(len(values)), labels, fontsize=7)
            step = int(next(iter(series.values()))[0][0])
            ax.set_title(f"{name} (step {step})", fontsize=9)
            ax.tick_params(axis="y", labelsize=7)
            ax.margins(y=0.15)
            ax.grid(axis="y", alpha=0.3)
            continue
        positive = True
        spans = []
        for variant, (steps, values) in series.items():
            style = _style(variant, peers)
            marker = "o" if len(steps) <= 20 else None
            ax.plot(steps, values, label=variant or name, marker=marker, markersize=3, **style)
            finite = values[np.isfinite(values)]
            if finite.size:
                positive &= bool((finite > 0).all())
                spans.append((finite.min(), finite.max()))
        if spans and positive:
            lo = min(s[0] for s in spans)
            hi = max(s[1] for s in spans)
            if lo > 0 and hi / lo > 1e3:
                ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(variants) > 1 or next(iter(variants)):
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    label = title if title is not None else (group or "metrics")
    extra = f" (first {MAX_PANELS} of {len(names)})" if len(names) > MAX_PANELS else ""
    fig.suptitle(f"{label}{extra}", fontsize=10)
    _fixed_layout(fig, nrows, ncols, panel_h=3.0)
    return fig


def numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested dicts as ``{"a.b.c": value}`` (booleans and strings left out)."""
    out: dict[str, float] = {}
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            out.update(numeric_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        out[prefix] = float(tree)
    return out


def summary_pairs(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Numbers present for ``blocked`` and ``unblocked`` alike: name → variant → value."""
    blocked = numeric_leaves(summary.get("blocked", {}))
    unblocked = numeric_leaves(summary.get("unblocked", {}))
    return {k: {"blocked": blocked[k], "unblocked": unblocked[k]}
            for k in blocked if k in unblocked}


def summary_figure(run: RunResults, *, max_panels: int = 12) -> Figure | None:
    """Bars of the summary numbers that exist for both variants (blocked vs unblocked)."""
    pairs = summary_pairs(run.summary)
    if not pairs:
        return None
    items = list(pairs.items())[:max_panels]
    n = len(items)
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.8 * ncols, 2.4 * nrows), squeeze=False)
    for ax, (name, values) in zip(axes.flat, items):
        bars = ax.bar([0, 1], [values["blocked"], values["unblocked"]],
                      color=[VARIANT_STYLE["blocked"]["color"],
                             VARIANT_STYLE["unblocked"]["color"]])
        ax.bar_label(bars, labels=[f"{values['blocked']:.4g}", f"{values['unblocked']:.4g}"],
                     fontsize=7)
        ax.margins(y=0.15)
        ax.set_xticks([0, 1], ["blocked", "unblocked"], fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle("summary: blocked vs unblocked", fontsize=10)
    _fixed_layout(fig, nrows, ncols, panel_h=2.4)
    return fig


def default_figures(run: RunResults) -> dict[str, Figure]:
    """The default set: one figure per metric group (capped) and the summary bars."""
    figures: dict[str, Figure] = {}
    groups = metric_groups(run)
    for i, (group, names) in enumerate(groups.items()):
        if i >= MAX_FIGURES:
            break
        title = "gradient comparison" if group in ("grad", "grads", "gradient") else None
        figures[f"metrics_{group or 'misc'}"] = metric_figure(run, group, names, title=title)
    fig = summary_figure(run)
    if fig is not None:
        figures["summary"] = fig
    return figures
