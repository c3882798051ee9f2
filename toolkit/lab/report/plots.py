"""Figure pieces that several experiments draw, so that each figure is declared in a few lines:
:func:`subplots` (constrained layout), :func:`step_axes` (a panel over steps), :func:`variant_curves`
(a metric of every seed, a curve or band per variant in its style), :func:`legend_below` (one
legend for all panels), :func:`variant_bars` (grouped bars over seeds), :func:`image_grid` and
:func:`tile_images` (rows of small images), and :class:`WordTable` (a table of words the report
shows as an HTML table, never as an image). Colours and line styles come from
:mod:`toolkit.lab.style`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import matplotlib

from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from toolkit.lab.report.figures import plot_seeds
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import (
    MAX_WIDTH_IN,
    integer_ticks,
    legend_entries,
    note_identical,
    variant_style,
)


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any
             ) -> tuple[Figure, Any]:
    """``plt.subplots`` in constrained layout, as every report figure is drawn (keep the width
    at most :data:`toolkit.lab.style.MAX_WIDTH_IN`)."""
    return plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", **kwargs)


def step_axes(ax: Any, title: str | None = None, xlabel: str | None = "epoch", *,
              ylabel: str | None = None, title_size: float | None = 10, grid: bool = True,
              identical: bool = False) -> Any:
    """Finish a panel whose x axis counts steps: ``xlabel`` (``None``: none), whole-number
    ticks, ``title`` (at ``title_size`` points; ``None``: the default size), ``ylabel``, a light
    grid, and with ``identical`` :func:`toolkit.lab.style.note_identical` (call it last).
    Returns ``ax``."""
    if title is not None:
        ax.set_title(title, **({} if title_size is None else {"fontsize": title_size}))
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
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
    """Draw the metric ``"<variant>/<key>"`` of every seed of ``run`` for each variant that
    logged it (:func:`~toolkit.lab.report.figures.plot_seeds`), in the variant's style.
    ``labels`` names variants in the legend (default: the name, underscores as spaces);
    ``style`` goes to every curve, ``styles[variant]`` to one; ``others`` is
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
        lines.append(plot_seeds(ax, run, name, label=label, **merged))
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
    """Grouped bars: one group per category, one bar per variant in its colour, ``step``
    apart (default ``width``). ``values[variant]`` holds a number per category, or a row of them
    per seed: then the bar is the mean and a whisker spans the range. Returns the bars by
    variant."""
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
    """``images`` ``(n, height·width)`` (or ``(n, height, width)``) tiled in a near-square grid,
    row by row, each framed by a 1-pixel NaN border (drawn as the background).

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
    """A figure of images without ticks, a row per ``(label, images)``, each image at
    ``shape`` (``None``: as given) with ``cmap`` from ``vmin`` to ``vmax`` (``symmetric``: ±
    its largest absolute value). ``cell`` inches a column and a row plus ``pad`` (at most
    :data:`~toolkit.lab.style.MAX_WIDTH_IN` wide); row labels as y labels (``label_kw``),
    ``col_titles`` over the first row, ``title`` the figure's. Returns the figure and its
    ``(rows, columns)`` axes."""
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
    """A table of words that ``figures(run)`` returns among its figures: the report writes it
    as an HTML (and Markdown) table, never as an image. An empty ``Figure`` only so that it
    travels where figures travel.

    >>> WordTable(["bug", "cost"], [["gan fake", "1.6x"]], title="the corpus").rows
    [['gan fake', '1.6x']]
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 title: str = "") -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        super().__init__(figsize=(1.0, 1.0))
        FigureCanvasAgg(self)
        self.columns = [str(c) for c in columns]
        self.rows = [[str(c) for c in row] for row in rows]
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if bad:
            raise ValueError(f"WordTable: every row must have {len(self.columns)} cells, one "
                             f"per column, got {len(self.rows[bad[0]])} in row {bad[0]}")
        self.title = title
