"""Default figures of a run, drawn only from its results files, and a check for clashing text.

Metric keys are ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``). The default set has
one figure per group, with one panel per name overlaying every variant against the step, and
bars of the summary numbers that differ between blocked and unblocked. Nothing is dropped: a
group with more panels than fit one figure is split over several ("1 of 3", ...). Colours come
from :mod:`toolkit.lab.style`. Every function returns matplotlib ``Figure`` objects (Agg backend);
nothing is shown.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from collections.abc import Mapping
from typing import Any

import matplotlib

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from toolkit.lab.results.schema import flatten
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import integer_ticks, legend_entries, note_identical, variant_style

__all__ = [
    "compare_bars",
    "default_figures",
    "draw_spread",
    "metric_figure",
    "metric_groups",
    "metric_over_seeds",
    "numeric_leaves",
    "panels",
    "plot_seeds",
    "summary_figure",
    "summary_pairs",
    "suptitle",
    "value_bars",
    "wrap",
]

MAX_PANELS = 9        # panels per figure; more panels make more figures, never fewer panels


def wrap(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters (at dots and underscores too)."""
    pieces = text.replace(".", ".\u200b").replace("_", "_\u200b").split("\u200b")
    lines: list[str] = []
    line = ""
    for piece in pieces:
        for word in textwrap.wrap(piece, width, break_long_words=True) or [""]:
            if len(line) + len(word) > width and line:
                lines.append(line)
                line = ""
            line += word
    if line:
        lines.append(line)
    return "\n".join(part.strip() for part in lines)


def suptitle(fig: Figure, text: str, fontsize: float = 10) -> None:
    """A figure title wrapped to the figure's width (about 11 characters per inch at 10 pt)."""
    width = max(12, int(fig.get_figwidth() * 110 / fontsize))
    fig.suptitle(wrap(text, width), fontsize=fontsize)


def panels(n: int, max_cols: int, width: float, height: float, *, title: float = 0.4
           ) -> tuple[Figure, list[Any]]:
    """A figure of ``n`` panels of ``width × height`` inches, ``max_cols`` a row at most (the
    figure at least 4.5 inches wide, ``title`` inches above them), and its ``n`` axes; the
    unused cells of the last row are hidden. Keep ``width × max_cols`` at most
    :data:`toolkit.lab.style.MAX_WIDTH_IN`, so that the report shows the figure at its size."""
    ncols = min(max_cols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(width * ncols, 4.5),
                                                     height * nrows + title),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def draw_spread(ax: Any, x: Any, ys: Any, *, mode: str = "band", band_alpha: float = 0.15,
                **style: Any) -> Any:
    """A curve over seeds: ``ys`` holds one series per seed, each as long as ``x``.

    One seed: its line. Several, ``mode="band"``: the mean over the seeds as the line and their
    range (smallest to largest) as a band of the same colour behind it (no band for a style
    without a line, e.g. markers only); ``mode="lines"``: every seed's own line, thinner, the
    first one labelled (for seeds whose curves sit at different levels, or log axes where a
    mean says little). ``style`` goes to ``ax.plot``. Returns the (first) line.
    """
    if mode not in ("band", "lines"):
        raise ValueError(f"draw_spread: mode must be 'band' or 'lines', got {mode!r}")
    ys = np.asarray([np.asarray(y, dtype=float) for y in ys])
    x = np.asarray(x)
    if ys.ndim != 2 or ys.shape[1] != len(x):
        raise ValueError(f"draw_spread: ys must be one series of len(x) = {len(x)} per seed, "
                         f"got shape {ys.shape}")
    if len(ys) == 1:
        (line,) = ax.plot(x, ys[0], **style)
        return line
    if mode == "lines":
        thin = {**style, "linewidth": 0.9 * style.get("linewidth", style.get("lw", 1.5)),
                "alpha": 0.75}
        thin.pop("lw", None)
        if "markersize" in thin or "ms" in thin:
            thin["markersize"] = 0.7 * thin.pop("markersize", thin.pop("ms", 4))
        first = None
        for i, y in enumerate(ys):
            (line,) = ax.plot(x, y, **(thin if i == 0 else {**thin, "label": "_nolegend_"}))
            first = first or line
        return first
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
        mean, lo, hi = np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)
    (line,) = ax.plot(x, mean, **style)
    if str(style.get("linestyle", style.get("ls", "-"))).lower() not in ("none", "", " "):
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=band_alpha, linewidth=0,
                        zorder=line.get_zorder() - 0.5)
    return line


def value_bars(ax: Any, labels: list[str], values: list[float | None], colors: list[Any], *,
               horizontal: bool = True, fmt: str = "{:.3g}", fontsize: float = 9,
               padding: float = 2, texts: list[str] | None = None, **kwargs: Any) -> Any:
    """Bars with their values written at their ends (``None``: no bar; ``texts``: other
    words than ``fmt`` of the values), one per label, in the given colours; ``horizontal``
    bars keep long labels readable on the value axis's left. Room is left for the numbers.
    Returns the bar container."""
    heights = [math.nan if v is None else float(v) for v in values]
    pos = list(range(len(heights)))
    draw = ax.barh if horizontal else ax.bar
    bars = draw(pos, heights, color=colors, **kwargs)
    ax.bar_label(bars, labels=texts or ["" if h != h else fmt.format(h) for h in heights],
                 fontsize=fontsize, padding=padding)
    if horizontal:
        ax.set_yticks(pos, labels)
        if not ax.yaxis_inverted():  # the first label on top (once for shared axes)
            ax.invert_yaxis()
        ax.margins(x=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # the bars carry their numbers
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(pos, labels)
        ax.margins(y=0.25)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.grid(axis="y", alpha=0.3)
    return bars


def metric_over_seeds(run: RunResults, key: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(steps, [values of each seed])`` of one metric over ``run.replicates``, on the steps
    every seed logged (KeyError when the first seed has no such metric)."""
    steps, values = run.metric(key)
    series = [(steps, values)]
    for other in run.replicates[1:]:
        try:
            series.append(other.metric(key))
        except KeyError:
            continue
    common = steps
    for s, _ in series[1:]:
        common = np.intersect1d(common, s)
    return common, [v[np.isin(s, common)] for s, v in series]


def plot_seeds(ax: Any, run: RunResults, key: str, *, transform: Any = None,
               **style: Any) -> Any:
    """Draw the metric ``key`` of every seed of ``run``: :func:`draw_spread` over
    :func:`metric_over_seeds`; ``transform`` maps each seed's values first (e.g. a floor for
    a log axis)."""
    steps, ys = metric_over_seeds(run, key)
    if transform is not None:
        ys = [transform(y) for y in ys]
    return draw_spread(ax, steps, ys, **style)


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


def _variant_order(variants: Mapping[str, str]) -> list[str]:
    head = [v for v in (BLOCKED, UNBLOCKED) if v in variants]
    return head + [v for v in variants if v not in head]


def close_negatives(values: list[float]) -> bool:
    """Negative values (log-likelihoods) whose differences are a sliver of their size: bars
    from 0 would hide the differences."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2 or not all(v < 0 for v in finite):
        return False
    spread = max(finite) - min(finite)
    return 0 < spread < 0.1 * min(abs(v) for v in finite)


def compare_bars(ax: Any, labels: list[str], values: list[float], colors: list[Any],
                 title: str) -> None:
    """One number per variant as labelled bars; when the numbers are negative and close
    (log-likelihoods) the bars are their differences to the first, on an axis through 0, and
    the title names the first's value."""
    if close_negatives(values):
        base = values[0]
        diffs = [v - base for v in values]
        value_bars(ax, labels, diffs, colors, horizontal=False,  # the base's 0 goes unsaid
                   texts=["", *(f"{d:+.3g}" for d in diffs[1:])])
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_title(f"{wrap(title, 30)}\nminus {labels[0]}'s {base:.4g}", fontsize=10)
    else:
        value_bars(ax, labels, values, colors, fmt="{:.4g}")
        ax.set_title(wrap(title, 30), fontsize=10)


def _bars(ax: Any, series: dict[str, tuple[np.ndarray, np.ndarray]], name: str,
          others: list[str]) -> None:
    """Metrics logged once: a bar per variant says more than one point on a step axis."""
    step = int(next(iter(series.values()))[0][0])
    compare_bars(ax, [wrap(v or name, 14) for v in series],
                 [float(vals[0]) for _, vals in series.values()],
                 [variant_style(v, others)["color"] for v in series], f"{name} (step {step})")


def _lines(ax: Any, run: RunResults, keys: Mapping[str, str], name: str,
           others: list[str]) -> bool:
    """Every variant of one metric against the step; returns whether a legend is needed."""
    drawn = []
    for variant, key in keys.items():
        steps, ys = metric_over_seeds(run, key)
        marker = "o" if len(steps) <= 20 else None
        draw_spread(ax, steps, ys, label=variant or name, marker=marker, markersize=3,
                    **variant_style(variant, others))
        drawn += ys
    log_if_wide(ax, drawn)
    ax.set_title(wrap(name, 30), fontsize=10)
    ax.set_xlabel("step")
    integer_ticks(ax)
    ax.grid(alpha=0.3)
    note_identical(ax)
    return len(keys) > 1 or bool(next(iter(keys)))


def log_if_wide(ax: Any, ys: list[Any]) -> None:
    """A log y axis for values that are all positive and span more than three decades."""
    values = np.concatenate([np.ravel(y) for y in ys]) if ys else np.array([])
    finite = values[np.isfinite(values)]
    if finite.size and (finite > 0).all() and finite.max() / finite.min() > 1e3:
        ax.set_yscale("log")


def metric_figure(run: RunResults, group: str, names: Mapping[str, Mapping[str, str]],
                  *, title: str | None = None) -> Figure:
    """One panel per metric name of ``group`` (all of them); each overlays the variants, every
    seed of ``run.replicates`` as a band around the mean."""
    fig, axes = panels(len(names), 3, 3.0, 2.8)
    others: list[str] = []
    legends = []
    for ax, (name, variants) in zip(axes, names.items()):
        series = {v: run.metric(variants[v]) for v in _variant_order(variants)}
        ax.tick_params(labelsize=9)
        if all(len(steps) == 1 for steps, _ in series.values()):
            _bars(ax, series, name, others)
        elif _lines(ax, run, {v: variants[v] for v in series}, name, others):
            legends.append(ax)
    suptitle(fig, title if title is not None else (group or "metrics"))
    if legends:  # one legend under the panels: the variants are the same in each
        handles, labels = legend_entries(legends)
        longest = max(len(line) for label in labels for line in label.split("\n"))
        fits = int(fig.get_figwidth() / (0.075 * longest + 0.7))  # 9 pt: ~0.075 in a letter
        fig.legend(handles, labels, loc="outside lower center", fontsize=9, frameon=False,
                   ncols=max(1, min(len(labels), 4, fits)))
    return fig


def numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested dicts as ``{"a.b.c": value}`` (booleans and strings left out)."""
    return {k: float(v) for k, v in flatten(tree, prefix).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def summary_pairs(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Numbers present for ``blocked`` and ``unblocked`` alike: name → variant → value."""
    blocked = numeric_leaves(summary.get(BLOCKED, {}))
    unblocked = numeric_leaves(summary.get(UNBLOCKED, {}))
    return {k: {BLOCKED: blocked[k], UNBLOCKED: unblocked[k]}
            for k in blocked if k in unblocked}


def summary_figure(run: RunResults, names: list[str] | None = None, *, part: str = ""
                   ) -> Figure | None:
    """Bars of summary numbers present for both variants (``names``: which; default all);
    numbers close together and far from 0 as their difference (:func:`compare_bars`)."""
    pairs = summary_pairs(run.summary)
    items = [(k, pairs[k]) for k in (names if names is not None else list(pairs))]
    if not items:
        return None
    fig, axes = panels(len(items), 3, 3.0, 1.6, title=0.5)
    colors = [variant_style(BLOCKED)["color"], variant_style(UNBLOCKED)["color"]]
    for ax, (name, values) in zip(axes, items):
        compare_bars(ax, [BLOCKED, UNBLOCKED], [values[BLOCKED], values[UNBLOCKED]],
                     colors, name)
    suptitle(fig, f"summary numbers that differ: blocked vs unblocked{part}")
    return fig


def _parts(items: list[Any], size: int) -> list[tuple[str, str, list[Any]]]:
    """``items`` in chunks of ``size`` as ``(title suffix, key suffix, chunk)``: `` (2 of 3)``
    and ``_2`` for the second of three, both empty for a single chunk."""
    chunks = [items[i:i + size] for i in range(0, len(items), size)] or [[]]
    if len(chunks) == 1:
        return [("", "", chunks[0])]
    return [(f" ({i} of {len(chunks)})", f"_{i}", chunk) for i, chunk in enumerate(chunks, 1)]


def default_figures(run: RunResults) -> dict[str, Figure]:
    """One figure per metric group (split when large) and bars of the differing summary numbers.

    Summary numbers that are equal in both variants are not drawn as bars (there is nothing to
    see); the report lists them in words.
    """
    figures: dict[str, Figure] = {}
    for group, names in metric_groups(run).items():
        title = "gradient comparison" if group in ("grad", "grads", "gradient") else group
        for part, suffix, chunk in _parts(list(names.items()), MAX_PANELS):
            figures[f"metrics_{group or 'misc'}{suffix}"] = metric_figure(
                run, group, dict(chunk), title=f"{title or 'metrics'}{part}")
    pairs = summary_pairs(run.summary)
    differing = [k for k, v in pairs.items() if v[BLOCKED] != v[UNBLOCKED]]
    for part, suffix, chunk in _parts(differing, 16):
        fig = summary_figure(run, chunk, part=part)
        if fig is not None:
            figures["summary" + suffix] = fig
    return figures
