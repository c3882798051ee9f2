"""Figures drawn from a run's files (Agg; nothing is shown): the default ones (a figure per
metric group, bars of the summary numbers that differ) and the pieces experiments draw theirs
with (:func:`subplots`, :func:`variant_curves`, :func:`image_grid`, :class:`WordTable`...)."""

from __future__ import annotations

import functools
import math
import textwrap
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, flatten
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import (
    MAX_WIDTH_IN,
    integer_ticks,
    legend_entries,
    note_identical,
    variant_style,
)

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
    fig, axes = subplots(nrows, ncols, figsize=(max(width * ncols, 4.5), height * nrows + title),
                         squeeze=False)
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
        lines = [ax.plot(x, y, **(thin if i == 0 else {**thin, "label": "_nolegend_"}))[0]
                 for i, y in enumerate(ys)]
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
    common = functools.reduce(np.intersect1d, [s for s, _ in found]) if found else np.array([])
    return common, [values[np.isin(steps, common)] for steps, values in found]


def metric_over_seeds(run: RunResults, key: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`series` of one metric over ``run`` and its other seeds (KeyError when ``run``
    has no such metric)."""
    return series([run, *run.replicates[1:]], key, first=True)


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
    xs = [v for v in values if math.isfinite(v)]
    return len(xs) > 1 and max(xs) < 0 and 0 < max(xs) - min(xs) < -0.1 * max(xs)


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
        keys = {v: variants[v] for v in sorted(variants, key=[BLOCKED, UNBLOCKED, *variants].index)}
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
        legend_below(fig, legends, ncols=4)
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


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any
             ) -> tuple[Figure, Any]:
    """``plt.subplots`` in constrained layout, as every report figure is drawn (keep the width
    at most :data:`toolkit.lab.style.MAX_WIDTH_IN`)."""
    return plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", **kwargs)


def step_axes(ax: Any, title: str | None = None, xlabel: str | None = "epoch", *,
              ylabel: str | None = None, title_size: float | None = 10, grid: bool = True,
              identical: bool = False) -> Any:
    """Finish a panel whose x axis counts steps (whole-number ticks): ``xlabel``, ``ylabel``,
    ``title`` at ``title_size`` points, a light grid, with ``identical``
    :func:`toolkit.lab.style.note_identical` (call it last); ``None``: left out. Returns ``ax``."""
    if title is not None:
        ax.set_title(title, **({} if title_size is None else {"fontsize": title_size}))
    ax.set(**{k: v for k, v in (("xlabel", xlabel), ("ylabel", ylabel)) if v is not None})
    integer_ticks(ax)
    if grid:
        ax.grid(alpha=0.3)
    if identical:
        note_identical(ax)
    return ax


def variant_curves(ax: Any, run: RunResults, key: str, variants: Iterable[str] = (
        BLOCKED, UNBLOCKED), *, labels: Mapping[str, str] | None = None,
        styles: Mapping[str, Mapping[str, Any]] | None = None, others: list[str] | None = None,
        **style: Any) -> list[Any]:
    """Draw the metric ``"<variant>/<key>"`` of every seed of ``run`` (:func:`draw_spread`) for
    each variant that logged it, in the variant's style. ``labels`` names variants in the legend
    (default: the name, underscores as spaces); ``style`` goes to every curve (``transform``:
    applied to each seed's values first), ``styles[variant]`` to one; ``others`` is
    :func:`~toolkit.lab.style.variant_style`'s list. Returns the lines drawn."""
    if isinstance(variants, str):
        raise ValueError(f"variant_curves: variants must be a list of variant names, got the "
                         f"string {variants!r}")
    logged = set(run.metric_keys())
    lines = []
    for variant in variants:
        name = f"{variant}/{key}"
        if name not in logged:
            continue
        label = (labels or {}).get(variant, variant.replace("_", " "))
        merged = {**variant_style(variant, others), **style, **(styles or {}).get(variant, {})}
        transform = merged.pop("transform", None) or (lambda y: y)
        steps, ys = metric_over_seeds(run, name)
        lines.append(draw_spread(ax, steps, [transform(y) for y in ys], label=label, **merged))
    return lines


def legend_below(fig: Figure, axes: Iterable[Any], *, ncols: int = 3, fontsize: float = 9
                 ) -> Any:
    """One legend for the panels ``axes`` of ``fig``, under them, each entry once with the
    notes on identical curves (:func:`~toolkit.lab.style.legend_entries`), in fewer than
    ``ncols`` columns where they would not fit the figure's width. Returns it."""
    handles, labels = legend_entries(axes)
    n = max(1, min(ncols, len(labels)))
    renderer = fig.canvas.get_renderer()
    while True:
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=n,
                            fontsize=fontsize, frameon=False)
        # a legend's width is its entries' and does not depend on the layout: measured
        # alone, without drawing (and laying out) the whole figure
        if n == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            return legend
        legend.remove()
        n -= 1


def variant_bars(ax: Any, categories: Sequence[str], values: Mapping[str, Any], *,
                 labels: Mapping[str, str] | None = None, width: float = 0.35,
                 step: float | None = None, capsize: float = 3) -> dict[str, Any]:
    """Grouped bars, one per variant in its colour, ``step`` apart (default ``width``), per
    category; ``values[variant]``: a number per category, or a row of them per seed (a bar at
    the mean, a whisker over the range). Returns the bars by variant."""
    n = len(categories)
    out = {}
    for i, (variant, given) in enumerate(values.items()):
        per_seed = np.atleast_2d(np.asarray(given, dtype=float))
        if per_seed.ndim != 2 or per_seed.shape[1] != n or per_seed.shape[0] == 0:
            raise ValueError(f"variant_bars: values[{variant!r}] must hold {n} numbers (one "
                             f"per category) or rows of {n}, one per seed, got shape "
                             f"{np.shape(given)}")
        mean = per_seed.mean(0)
        spread = (np.stack([mean - per_seed.min(0), per_seed.max(0) - mean])
                  if len(per_seed) > 1 else None)
        offset = (i - (len(values) - 1) / 2) * (width if step is None else step)
        out[variant] = ax.bar(np.arange(n) + offset, mean, width,
                              label=(labels or {}).get(variant, variant),
                              color=variant_style(variant)["color"], yerr=spread,
                              capsize=capsize)
    ax.set_xticks(range(n), list(categories))
    return out


def tile_images(images: Any, shape: Sequence[int]) -> np.ndarray:
    """``images`` ``(n, height·width)`` or ``(n, height, width)`` tiled in a near-square grid, each
    framed by a 1-pixel NaN border (drawn as the background).

    >>> tile_images(np.ones((2, 4)), (2, 2)).shape  # two 2×2 images side by side
    (4, 7)
    """
    h, w = (int(s) for s in shape)
    images = np.asarray(images, dtype=float)
    if images.ndim not in (2, 3) or math.prod(images.shape[1:]) != h * w:
        raise ValueError(f"tile_images: images must be (n, {h * w}) or (n, {h}, {w}) for "
                         f"shape {(h, w)}, got shape {images.shape}")
    cols = max(1, math.ceil(math.sqrt(len(images))))
    mosaic = np.full((-(-len(images) // cols) * (h + 1) + 1, cols * (w + 1) + 1), np.nan)
    for n, img in enumerate(images):
        r, c = divmod(n, cols)
        mosaic[1 + r * (h + 1):(r + 1) * (h + 1), 1 + c * (w + 1):(c + 1) * (w + 1)] = (
            img.reshape(h, w))
    return mosaic


def image_grid(rows: Sequence[tuple[str, Sequence[Any]]], *, shape: Sequence[int] | None = None,
               cell: tuple[float, float] = (1.0, 1.0), pad: tuple[float, float] = (1.2, 0.5),
               title: str | None = None, col_titles: Sequence[str] | None = None,
               fontsize: float = 9, cmap: str = "gray_r", vmin: float = 0, vmax: float = 1,
               symmetric: bool = False, label_kw: Mapping[str, Any] | None = None
               ) -> tuple[Figure, np.ndarray]:
    """Images without ticks, a row per ``(label, images)`` (the label as y label, ``label_kw``),
    each at ``shape`` with ``cmap`` from ``vmin`` to ``vmax`` (``symmetric``: ± its largest
    absolute value), ``cell`` inches each plus ``pad`` (at most
    :data:`~toolkit.lab.style.MAX_WIDTH_IN` wide), ``col_titles`` over the first row, ``title``
    the figure's. Returns the figure and its ``(rows, columns)`` axes."""
    if not rows:
        raise ValueError("image_grid: rows must name at least one (label, images) row, got none")
    n = max(len(images) for _, images in rows)
    if n == 0:
        raise ValueError("image_grid: rows must hold at least one image, got empty rows")
    fig, axes = subplots(len(rows), n, squeeze=False,
                         figsize=(min(cell[0] * n + pad[0], MAX_WIDTH_IN),
                                  cell[1] * len(rows) + pad[1]))
    for r, (label, images) in enumerate(rows):
        for c, image in enumerate(images):
            image = np.asarray(image)  # in its own dtype: imshow scales float32 as float32
            if shape is not None:
                image = image.reshape(*shape)
            if symmetric:
                m = np.nanmax(np.abs(image)) if np.isfinite(image).any() else 1.0
                axes[r, c].imshow(image, cmap=cmap, vmin=-m, vmax=m)
            else:
                axes[r, c].imshow(image, cmap=cmap, vmin=vmin, vmax=vmax)
        axes[r, 0].set_ylabel(label, fontsize=fontsize, **(label_kw or {}))
    for ax, text in zip(axes[0], col_titles or []):
        ax.set_title(text, fontsize=fontsize)
    for ax in axes.ravel():
        ax.set(xticks=[], yticks=[])
    if title is not None:
        fig.suptitle(title, fontsize=10)
    return fig, axes


class WordTable(Figure):
    """A table of words among the figures of ``figures(run)``: the report shows it as a table,
    never as an image (an empty ``Figure``, to travel where figures travel).

    >>> WordTable(["bug", "cost"], [["gan fake", "1.6x"]], title="the corpus").rows
    [['gan fake', '1.6x']]
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 title: str = "") -> None:
        super().__init__(figsize=(1.0, 1.0))
        FigureCanvasAgg(self)
        self.columns = [str(c) for c in columns]
        self.rows = [[str(c) for c in row] for row in rows]
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if bad:
            raise ValueError(f"WordTable: every row must have {len(self.columns)} cells, one "
                             f"per column, got {len(self.rows[bad[0]])} in row {bad[0]}")
        self.title = title
