"""Default figures of a run, drawn only from its results files, and the pieces they share.

Metric keys are ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``). The default set has
one figure per group, a panel per name overlaying every variant against the step (a group of
more than :data:`MAX_PANELS` names is split over several figures, "1 of 3", ...), and bars of
the summary numbers that differ between blocked and unblocked. Every function returns or draws
on matplotlib ``Figure`` objects (Agg backend); nothing is shown.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, flatten
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import integer_ticks, legend_entries, note_identical, variant_style

MAX_PANELS = 9  # panels per figure; more panels make more figures, never fewer panels


def wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken at dots and underscores too."""
    lines, line = [], ""
    for piece in text.replace(".", ".\u200b").replace("_", "_\u200b").split("\u200b"):
        for word in textwrap.wrap(piece, width, break_long_words=True) or [""]:
            if len(line) + len(word) > width and line:
                lines.append(line)
                line = ""
            line += word
    return "\n".join(part.strip() for part in [*lines, line] if part)


def panels(n: int, max_cols: int, width: float, height: float, *, title: float = 0.4
           ) -> tuple[Figure, list[Any]]:
    """A figure of ``n`` panels of ``width × height`` inches, ``max_cols`` a row at most (at
    least 4.5 inches wide, ``title`` inches above them), and its ``n`` axes."""
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
    """A curve over seeds, ``ys`` one series per seed, each as long as ``x``: one seed's line;
    for several, ``mode="band"``, their mean and a band over their range (none for markers
    only), or ``mode="lines"``, every seed's own thinner line, the first labelled. ``style``
    goes to ``ax.plot``. Returns the (first) line."""
    if mode not in ("band", "lines"):
        raise ValueError(f"draw_spread: mode must be 'band' or 'lines', got {mode!r}")
    ys, x = np.asarray([np.asarray(y, dtype=float) for y in ys]), np.asarray(x)
    if ys.ndim != 2 or ys.shape[1] != len(x):
        raise ValueError(f"draw_spread: ys must be one series of len(x) = {len(x)} per seed, "
                         f"got shape {ys.shape}")
    if len(ys) == 1:
        return ax.plot(x, ys[0], **style)[0]
    if mode == "lines":
        thin = {**style, "linewidth": 0.9 * style.get("linewidth", style.get("lw", 1.5)),
                "alpha": 0.75}
        thin.pop("lw", None)
        if "markersize" in thin or "ms" in thin:
            thin["markersize"] = 0.7 * thin.pop("markersize", thin.pop("ms", 4))
        lines = [ax.plot(x, y, **thin)[0] for y in ys[:1]]
        lines += [ax.plot(x, y, **{**thin, "label": "_nolegend_"})[0] for y in ys[1:]]
        return lines[0]
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
    """Bars with their values written at their ends (``None``: no bar; ``texts``: other words
    than ``fmt`` of the values), one per label; ``horizontal`` bars keep long labels readable.
    Returns the bar container."""
    heights = [math.nan if v is None else float(v) for v in values]
    pos = list(range(len(heights)))
    bars = (ax.barh if horizontal else ax.bar)(pos, heights, color=colors, **kwargs)
    ax.bar_label(bars, labels=texts or ["" if h != h else fmt.format(h) for h in heights],
                 fontsize=fontsize, padding=padding)
    if horizontal:
        ax.set_yticks(pos, labels)
        if not ax.yaxis_inverted():  # the first label on top (once for shared axes)
            ax.invert_yaxis()
        ax.margins(x=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # the bars carry their numbers
    else:
        ax.set_xticks(pos, labels)
        ax.margins(y=0.25)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.grid(axis="x" if horizontal else "y", alpha=0.3)
    return bars


def series(runs: Sequence[RunResults], key: str, *, first: bool = False
           ) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(steps, [values of each run])`` of one metric, over the runs that logged it, on the
    steps every one of them logged (no steps when none did); ``first``: KeyError when the
    first run has no such metric."""
    found = []
    for i, run in enumerate(runs):
        try:
            found.append(run.metric(key))
        except KeyError:
            if first and i == 0:
                raise
    common = found[0][0] if found else np.array([])
    for steps, _ in found[1:]:
        common = np.intersect1d(common, steps)
    return common, [values[np.isin(steps, common)] for steps, values in found]


def metric_over_seeds(run: RunResults, key: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`series` of one metric over ``run`` and its other seeds (KeyError when ``run``
    has no such metric)."""
    return series([run, *run.replicates[1:]], key, first=True)


def plot_seeds(ax: Any, run: RunResults, key: str, *, transform: Any = None,
               **style: Any) -> Any:
    """:func:`draw_spread` of :func:`metric_over_seeds`; ``transform`` maps each seed's values
    first (e.g. a floor for a log axis)."""
    steps, ys = metric_over_seeds(run, key)
    return draw_spread(ax, steps, [transform(y) for y in ys] if transform else ys, **style)


def log_if_wide(ax: Any, ys: list[Any]) -> None:
    """A log y axis for values that are all positive and span more than three decades."""
    values = np.concatenate([np.ravel(y) for y in ys]) if ys else np.array([])
    finite = values[np.isfinite(values)]
    if finite.size and (finite > 0).all() and finite.max() / finite.min() > 1e3:
        ax.set_yscale("log")


def metric_groups(run: RunResults) -> dict[str, dict[str, dict[str, str]]]:
    """group → name → variant → metric key, in order of first appearance."""
    groups: dict[str, dict[str, dict[str, str]]] = {}
    for key in run.metric_keys():
        parts = key.split("/")
        variant, group, name = (parts[0], parts[1], "/".join(parts[2:])) if len(parts) > 2 \
            else (parts[0], "", parts[1]) if len(parts) == 2 else ("", "", parts[0])
        groups.setdefault(group, {}).setdefault(name, {})[variant] = key
    return groups


def close_negatives(values: list[float]) -> bool:
    """Negative values (log-likelihoods) whose differences are a sliver of their size: bars
    from 0 would hide the differences."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2 or not all(v < 0 for v in finite):
        return False
    return 0 < max(finite) - min(finite) < 0.1 * min(abs(v) for v in finite)


def compare_bars(ax: Any, labels: list[str], values: list[float], colors: list[Any],
                 title: str) -> None:
    """One number per variant as labelled bars; negative numbers close together
    (:func:`close_negatives`) as their differences to the first, whose value the title names."""
    if close_negatives(values):
        diffs = [v - values[0] for v in values]
        value_bars(ax, labels, diffs, colors, horizontal=False,  # the base's 0 goes unsaid
                   texts=["", *(f"{d:+.3g}" for d in diffs[1:])])
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_title(f"{wrap(title, 30)}\nminus {labels[0]}'s {values[0]:.4g}", fontsize=10)
    else:
        value_bars(ax, labels, values, colors, fmt="{:.4g}")
        ax.set_title(wrap(title, 30), fontsize=10)


def metric_figure(run: RunResults, group: str, names: Mapping[str, Mapping[str, str]],
                  *, title: str | None = None) -> Figure:
    """One panel per metric name of ``group``; each overlays the variants, every seed of
    ``run.replicates`` as a band around the mean; a metric logged once is a bar per variant."""
    fig, axes = panels(len(names), 3, 3.0, 2.8)
    others: list[str] = []
    legends = []
    for ax, (name, variants) in zip(axes, names.items()):
        order = [v for v in (BLOCKED, UNBLOCKED) if v in variants]
        keys = {v: variants[v] for v in order + [v for v in variants if v not in order]}
        ax.tick_params(labelsize=9)
        firsts = {v: run.metric(k) for v, k in keys.items()}
        if all(len(steps) == 1 for steps, _ in firsts.values()):
            step = int(next(iter(firsts.values()))[0][0])
            compare_bars(ax, [wrap(v or name, 14) for v in keys],
                         [float(vals[0]) for _, vals in firsts.values()],
                         [variant_style(v, others)["color"] for v in keys],
                         f"{name} (step {step})")
            continue
        drawn = []
        for variant, key in keys.items():
            steps, ys = metric_over_seeds(run, key)
            draw_spread(ax, steps, ys, label=variant or name, markersize=3,
                        marker="o" if len(steps) <= 20 else None,
                        **variant_style(variant, others))
            drawn += ys
        log_if_wide(ax, drawn)
        ax.set_title(wrap(name, 30), fontsize=10)
        ax.set_xlabel("step")
        integer_ticks(ax)
        ax.grid(alpha=0.3)
        note_identical(ax)
        if len(keys) > 1 or next(iter(keys)):
            legends.append(ax)
    title = title if title is not None else (group or "metrics")
    width = max(12, int(fig.get_figwidth() * 11))  # about 11 characters per inch at 10 pt
    fig.suptitle(wrap(title, width), fontsize=10)
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
    return {k: {BLOCKED: blocked[k], UNBLOCKED: unblocked[k]} for k in blocked if k in unblocked}


def summary_figure(run: RunResults, names: list[str] | None = None, *, part: str = ""
                   ) -> Figure | None:
    """Bars of summary numbers present for both variants (``names``: which; default all)."""
    pairs = summary_pairs(run.summary)
    items = [(k, pairs[k]) for k in (names if names is not None else list(pairs))]
    if not items:
        return None
    fig, axes = panels(len(items), 3, 3.0, 1.6, title=0.5)
    colors = [variant_style(BLOCKED)["color"], variant_style(UNBLOCKED)["color"]]
    for ax, (name, values) in zip(axes, items):
        compare_bars(ax, [BLOCKED, UNBLOCKED], [values[BLOCKED], values[UNBLOCKED]],
                     colors, name)
    fig.suptitle(wrap(f"summary numbers that differ: blocked vs unblocked{part}",
                      max(12, int(fig.get_figwidth() * 11))), fontsize=10)
    return fig


def _parts(items: list[Any], size: int) -> list[tuple[str, str, list[Any]]]:
    """``items`` in chunks of ``size`` as ``(title suffix, key suffix, chunk)``: `` (2 of 3)``
    and ``_2`` for the second of three, both empty for a single chunk."""
    chunks = [items[i:i + size] for i in range(0, len(items), size)] or [[]]
    if len(chunks) == 1:
        return [("", "", chunks[0])]
    return [(f" ({i} of {len(chunks)})", f"_{i}", chunk) for i, chunk in enumerate(chunks, 1)]


def default_figures(run: RunResults) -> dict[str, Figure]:
    """One figure per metric group (split when large) and bars of the summary numbers that
    differ between the variants (the equal ones the report lists in words)."""
    figures: dict[str, Figure] = {}
    for group, names in metric_groups(run).items():
        title = "gradient comparison" if group in ("grad", "grads", "gradient") else group
        for part, suffix, chunk in _parts(list(names.items()), MAX_PANELS):
            figures[f"metrics_{group or 'misc'}{suffix}"] = metric_figure(
                run, group, dict(chunk), title=f"{title or 'metrics'}{part}")
    differing = [k for k, v in summary_pairs(run.summary).items() if v[BLOCKED] != v[UNBLOCKED]]
    for part, suffix, chunk in _parts(differing, 16):
        if (fig := summary_figure(run, chunk, part=part)) is not None:
            figures["summary" + suffix] = fig
    return figures
