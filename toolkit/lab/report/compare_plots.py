"""The figures of ``toolkit compare``: every config of an experiment on shared axes.

- :func:`metric_figure`, one per headline quantity: blocked on the left, unblocked on the right;
  each config a thick line joining its two means, each of its seeds a thin line behind it.
- :func:`curve_figure`, for several configs: a panel per logged metric that blocked and
  unblocked tell apart, every config's blocked and unblocked curve (the mean over its seeds,
  their range as a band).

A config is a colour and a marker (:func:`point_style`), the same in every figure of one
comparison; where the variant is a line's colour (the curves, as :mod:`toolkit.lab.style` has
it), the config is its marker. Each figure carries its legend below the axes, where
constrained layout makes room for it, its labels wrapped to the figure's width.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from toolkit.lab.report.compare import DELTA, DIFF, Comparison, cell, headline_metrics
from toolkit.lab.report.figures import draw_spread, plt, wrap
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import (
    COLORS,
    EXTRA_COLORS,
    MARKERS,
    REPORT_DPI,
    integer_ticks,
    variant_style,
)

__all__ = ["compare_figures", "curve_figure", "curve_names", "metric_figure", "point_style"]

NOISE = 1e-9


def point_style(index: int) -> dict[str, Any]:
    """Colour and marker of the ``index``-th config: the colours of
    :data:`~toolkit.lab.style.EXTRA_COLORS` in turn, the markers shifted by one each round, so
    that no two of the first 36 configs look alike."""
    n = len(EXTRA_COLORS)
    return {"color": EXTRA_COLORS[index % n],
            "marker": MARKERS[(index + index // n) % len(MARKERS)]}


def _legend(fig: Any, handles: list[Any], chars: int) -> None:
    """One legend under the axes, its labels wrapped at ``chars`` characters, as many columns
    as fit the figure's width (9 pt: about 0.075 inch a character)."""
    for h in handles:
        h.set_label("\n".join(textwrap.fill(part, chars, break_long_words=True)
                              for part in h.get_label().split("\n")))
    longest = max(len(line) for h in handles for line in h.get_label().split("\n"))
    ncols = max(1, min(len(handles), int(fig.get_figwidth() / (0.075 * longest + 0.6))))
    fig.legend(handles=handles, loc="outside lower center", fontsize=9, frameon=False,
               ncols=ncols)


def metric_figure(table: Comparison, experiment: str, quantity: str) -> Any:
    """Every config of ``experiment`` in one panel of ``quantity``: blocked left, unblocked
    right, a thick line joining a config's means (its colour and marker), a thin line per
    seed; the legend names each config with its paired difference. Returns the ``Figure``."""
    import matplotlib.lines as mlines

    v = table.values
    rows = v[(v.experiment == experiment) & (v.quantity == quantity)]
    labels = [c for c in table.labels(experiment) if (rows.config == c).any()]
    fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    step = min(0.08, 0.5 / max(1, len(labels)))  # side by side: no config hides another
    handles = []
    for k, label in enumerate(labels):
        style = point_style(table.labels(experiment).index(label))
        mine = rows[rows.config == label]
        pairs = mine[mine.variant.isin([BLOCKED, UNBLOCKED])].pivot_table(
            index="seed", columns="variant", values="value").reindex(
            columns=[BLOCKED, UNBLOCKED])
        dx = (k - (len(labels) - 1) / 2) * step
        for _, (b, u) in pairs.iterrows():
            ax.plot([dx, 1 + dx], [b, u], color=style["color"], lw=0.7, alpha=0.35, zorder=1)
        ax.plot([dx, 1 + dx], pairs.mean().to_numpy(), lw=2.0, markersize=6, zorder=3, **style)
        diff = cell(mine.loc[mine.variant == DIFF, "value"], quantity)
        handles.append(mlines.Line2D([], [], lw=2.0, markersize=6, **style,
                                     label=f"{label}\n{DELTA} {diff}"))
    ax.set_xlim(-0.6, 1.6)
    ax.set_xticks([0, 1], [BLOCKED, UNBLOCKED], fontsize=9)
    for tick, variant in zip(ax.get_xticklabels(), (BLOCKED, UNBLOCKED)):
        tick.set_color(COLORS[variant])
    ax.margins(y=0.15)
    ax.tick_params(axis="y", labelsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(wrap(f"{experiment}: {quantity}", 60), fontsize=10)
    _legend(fig, handles, 34)
    return fig


def _series(units: Sequence[RunResults], key: str) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """``(steps, [values of each seed])`` of ``key`` on the steps every seed logged."""
    found = []
    for unit in units:
        try:
            found.append(unit.metric(key))
        except KeyError:
            continue
    if not found:
        return None
    common = found[0][0]
    for steps, _ in found[1:]:
        common = np.intersect1d(common, steps)
    return common, [values[np.isin(steps, common)] for steps, values in found]


def curve_names(groups: dict[str, Sequence[RunResults]], k: int = 3) -> list[str]:
    """Up to ``k`` metrics (``"<group>/<name>"``), in the order logged, that both variants
    logged over more than one step and that tell blocked from unblocked at some step."""
    chosen: list[str] = []
    for unit in (u for units in groups.values() for u in units):
        keys = unit.metric_keys()
        for key in keys:
            variant, _, name = key.partition("/")
            if variant != BLOCKED or name in chosen or f"{UNBLOCKED}/{name}" not in keys:
                continue
            (sb, b), (su, u) = unit.metric(key), unit.metric(f"{UNBLOCKED}/{name}")
            both = np.intersect1d(sb, su)
            b, u = b[np.isin(sb, both)], u[np.isin(su, both)]
            ok = np.isfinite(b) & np.isfinite(u)
            scale = float(np.max(np.abs(np.r_[b[ok], u[ok]]), initial=0.0))
            if len(both) > 1 and scale > NOISE and bool(
                    np.any(np.abs(b - u)[ok] > NOISE * max(1.0, scale))):
                chosen.append(name)
            if len(chosen) == k:
                return chosen
    return chosen


def curve_figure(groups: dict[str, Sequence[RunResults]], experiment: str,
                 names: Sequence[str]) -> Any:
    """A panel per metric of ``names`` (two a row, 4.4 inches wide each); in each, every config
    of ``groups`` (label → its runs) as its blocked and unblocked curve. Returns the
    ``Figure``."""
    import matplotlib.lines as mlines

    ncols = min(2, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.4 * nrows + 1.2),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        positive, spans = True, []
        for i, (label, units) in enumerate(groups.items()):
            for variant in (BLOCKED, UNBLOCKED):
                found = _series(units, f"{variant}/{name}")
                if found is None or not len(found[0]):
                    continue
                steps, ys = found
                every = max(1, math.ceil(len(steps) / 8))
                draw_spread(ax, steps, ys, marker=point_style(i)["marker"], markersize=5,
                            linewidth=1.4, markevery=(i % every, every), band_alpha=0.07,
                            label=f"{label} ({variant})", **variant_style(variant))
                finite = np.concatenate(ys)[np.isfinite(np.concatenate(ys))]
                if finite.size:
                    positive &= bool((finite > 0).all())
                    spans.append((finite.min(), finite.max()))
        if spans and positive and max(s[1] for s in spans) / min(s[0] for s in spans) > 1e3:
            ax.set_yscale("log")
        ax.set_title(wrap(name, 40), fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=9)
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    handles = [mlines.Line2D([], [], label=label, linestyle="none", color="#404040",
                             marker=point_style(i)["marker"], markersize=6)
               for i, label in enumerate(groups)]
    handles += [mlines.Line2D([], [], label=v, **variant_style(v)) for v in (BLOCKED, UNBLOCKED)]
    _legend(fig, handles, 40)
    fig.suptitle(textwrap.fill(f"{experiment}: every config on the same axes (marker: the "
                               f"config; the mean over seeds, band: their range)",
                               int(fig.get_figwidth() * 11)), fontsize=10)
    return fig


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=REPORT_DPI)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def compare_figures(table: Comparison) -> Iterator[tuple[str, str, str, bytes]]:
    """``(experiment, name, caption, PNG)`` of every figure: one per headline metric of each
    experiment, and for several configs their logged curves."""
    for exp in table.sweeps:
        labels = table.labels(exp)
        for quantity in headline_metrics(table, exp):
            yield exp, quantity, (
                f"{exp}: {quantity} of every config; a thick line joins a config's blocked "
                f"and unblocked means (its colour and marker in the legend, with {DIFF}), thin "
                f"lines the two values of each seed."), _png(metric_figure(table, exp, quantity))
        if len(labels) > 1:
            groups = {label: table.runs[(exp, label)] for label in labels}
            names = curve_names(groups)
            if names:
                yield exp, "curves", (
                    f"{exp}: the logged curves of every config, a panel per metric: the marker "
                    f"says the config, a solid blue line blocked, a dashed vermillion line "
                    f"unblocked (the mean over the seeds; the band, their range)."), \
                    _png(curve_figure(groups, exp, names))
