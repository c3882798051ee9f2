"""Curves of a sweep for ``toolkit compare``: every config in the same panel, one panel per metric.

The configs of a sweep are compared on shared axes: a panel per logged metric
(``"<variant>/<group>/<name>"`` in ``metrics.jsonl``, the panel being ``"<group>/<name>"``), and
in it a line per config and variant, the mean over the config's seeds with their range as a band
(:func:`~toolkit.lab.report.figures.draw_spread`). As :mod:`toolkit.lab.style` has it, colour
and line style say the variant (blocked solid blue, unblocked dashed vermillion) and a config,
another category, is a marker (:func:`point_style`), the same in every figure of the
comparison; where the variant is said by the position (the headline metrics' panels), a
config's line also takes its colour of :data:`~toolkit.lab.style.EXTRA_COLORS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.lab.report.figures import draw_spread, panels, suptitle, wrap
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import EXTRA_COLORS, MARKERS, integer_ticks, variant_style

__all__ = ["curve_figure", "curve_names", "point_style"]

#: Values this small in both variants are rounding, not a difference worth a panel.
NOISE = 1e-9


def point_style(index: int) -> dict[str, Any]:
    """Colour and marker of the ``index``-th config of a comparison: the colours of
    :data:`~toolkit.lab.style.EXTRA_COLORS` in turn, each round of them with the markers
    shifted by one, so that no two of the first 36 configs look alike."""
    n = len(EXTRA_COLORS)
    return {"color": EXTRA_COLORS[index % n],
            "marker": MARKERS[(index + index // n) % len(MARKERS)]}


def _series(units: Sequence[RunResults], key: str) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """``(steps, [values of each seed])`` of ``key`` on the steps every seed that logged it
    has; ``None`` when no seed logged it."""
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


def curve_names(groups: Mapping[str, Sequence[RunResults]], k: int = 3) -> list[str]:
    """Up to ``k`` metrics (``"<group>/<name>"``) worth a panel: logged for both blocked and
    unblocked over more than one step, with blocked and unblocked apart at some step of some
    run (by more than rounding); in the order they were logged."""
    chosen: list[str] = []
    for units in groups.values():
        for unit in units:
            keys = unit.metric_keys()
            for key in keys:
                variant, _, name = key.partition("/")
                if variant != BLOCKED or not name or name in chosen \
                        or f"{UNBLOCKED}/{name}" not in keys:
                    continue
                (sb, b), (su, u) = unit.metric(key), unit.metric(f"{UNBLOCKED}/{name}")
                both = np.intersect1d(sb, su)
                if len(both) < 2:
                    continue
                b, u = b[np.isin(sb, both)], u[np.isin(su, both)]
                finite = np.isfinite(b) & np.isfinite(u)
                scale = float(np.max(np.abs(np.r_[b[finite], u[finite]]), initial=0.0))
                if scale > NOISE and bool(np.any(np.abs(b - u)[finite]
                                                 > NOISE * max(1.0, scale))):
                    chosen.append(name)
                if len(chosen) == k:
                    return chosen
    return chosen


def curve_figure(groups: Mapping[str, Sequence[RunResults]], experiment: str,
                 names: Sequence[str]) -> Any:
    """A panel per metric of ``names``; in each, every config of ``groups`` (label → its runs,
    one per seed) as a blocked and an unblocked line against the step, on the same axes.
    Returns the ``Figure``."""
    import matplotlib.lines as mlines

    fig, axes = panels(len(names), 3, 2.95, 2.9, title=0.5)
    for ax, name in zip(axes, names):
        positive, spans = True, []
        for i, (label, units) in enumerate(groups.items()):
            marker = point_style(i)["marker"]
            for variant in (BLOCKED, UNBLOCKED):
                found = _series(units, f"{variant}/{name}")
                if found is None or not len(found[0]):
                    continue
                steps, ys = found
                every = max(1, math.ceil(len(steps) / 8))
                draw_spread(ax, steps, ys, marker=marker, markersize=4.5, linewidth=1.3,
                            markevery=(i % every, every), band_alpha=0.07,
                            label=f"{label} ({variant})", **variant_style(variant))
                values = np.concatenate(ys)
                finite = values[np.isfinite(values)]
                if finite.size:
                    positive &= bool((finite > 0).all())
                    spans.append((finite.min(), finite.max()))
        if spans and positive and max(s[1] for s in spans) / min(s[0] for s in spans) > 1e3:
            ax.set_yscale("log")
        ax.set_title(wrap(name, 34), fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=9)
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    configs = [mlines.Line2D([], [], label=label, linestyle="none", color="#404040",
                             marker=point_style(i)["marker"], markersize=5)
               for i, label in enumerate(groups)]
    variants = [mlines.Line2D([], [], label=v, **variant_style(v)) for v in (BLOCKED, UNBLOCKED)]
    handles = configs + variants
    longest = max(len(h.get_label()) for h in handles)
    fits = int(fig.get_figwidth() / (0.075 * longest + 0.7))  # 9 pt: ~0.075 in a letter
    fig.legend(handles=handles, loc="outside lower center", fontsize=9, frameon=False,
               ncols=max(1, min(len(handles), 4, fits)))
    suptitle(fig, f"{experiment}: every config on the same axes (marker: the config; mean "
                  f"over seeds, band: range)")
    return fig
