"""The report's Figure 1: every experiment's headline finding at a glance.

Each experiment marks one finding as its headline (:class:`~toolkit.lab.results.findings.Headline`:
the metric, the names of its blocked and unblocked numbers, the thresholds its verdict compares
with). The summary figure gives each such finding a lettered panel, like a paper's first figure:

- the metric with the block (blue, left) and without it (vermillion, right), one dot per seed
  and a bar from the smallest to the largest seed, a line at the mean;
- every threshold the verdict compares with, dashed grey, with its value;
- above the panel the verdict over the seeds ("as predicted, 3/3 seeds").

A value that is not finite (a run that diverged) is drawn at the top edge of its axis as an
upward triangle, and the panel says in how many seeds; on a log axis a value ≤ 0 is drawn the
same way at the bottom edge.
"""

from __future__ import annotations

import math
import string
import textwrap
from collections.abc import Sequence
from typing import Any

from toolkit.lab.report.figures import plt
from toolkit.lab.results.findings import BADGES, Verdict
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import COLORS, MAX_WIDTH_IN, variant_style

__all__ = ["CAPTION", "headline_of", "summary_figure"]

#: Panels in a row of the summary figure (eight experiments: two rows of four).
COLUMNS = 4
PANEL_IN = (MAX_WIDTH_IN / COLUMNS, 2.3)  # width, height of one panel in inches
TITLE_CHARS = 26  # the widest a panel's title line may be, at 9 pt
CAPTION = ("Each panel is one experiment's headline finding: its metric with the block "
           "(blue, left) and without it (vermillion, right), one dot per seed, a bar over the "
           "seeds' range and a line at their mean. Dashed grey lines are the thresholds the "
           "verdict compares with; above each panel, whether the prediction held and in how "
           "many seeds. A triangle at an edge is a value off the axis (a diverged run: not "
           "finite).")


def headline_of(findings: Sequence[Verdict]) -> Verdict | None:
    """The finding an experiment marked as its headline, or ``None``."""
    return next((f for f in findings if f.headline is not None), None)


def _numbers(verdict: Verdict, name: str) -> list[float | None]:
    """One number per seed (``None`` where the seed has none, or a non-number)."""
    out: list[float | None] = []
    for finding in verdict.per_seed:
        value = finding.values.get(name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        out.append(float(value) if ok else None)
    return out


def _status(verdict: Verdict) -> str:
    """``"as predicted · 3/3 seeds"``, ``"did not hold · 1/3 seeds"``, ``"measured · 3 seeds"``,
    ``"as predicted · any seed"`` (seed-independent)."""
    if verdict.seed_independent:
        seeds = "any seed"
    elif verdict.predicts and verdict.timing is None:
        seeds = f"{verdict.held}/{verdict.n_seeds - verdict.outside_seeds} seeds"
    else:
        seeds = f"{verdict.n_seeds} seed{'s' * (verdict.n_seeds != 1)}"
    return f"{BADGES[verdict.verdict]} · {seeds}"


def _panel(ax: Any, letter: str, name: str, verdict: Verdict, title_x: float) -> None:
    head = verdict.headline
    assert head is not None
    columns = {BLOCKED: _numbers(verdict, head.blocked), UNBLOCKED: _numbers(verdict, head.unblocked)}
    drawable = [v for vs in columns.values() for v in vs
                if v is not None and math.isfinite(v) and (v > 0 or not head.log)]
    drawable += [t for t in head.thresholds if t > 0 or not head.log]
    if head.log:
        ax.set_yscale("log")
    if drawable:
        lo, hi = min(drawable), max(drawable)
        if head.log:  # whole decades, so that the end ticks are on the axis
            ax.set_ylim(10.0 ** math.floor(math.log10(lo) - 0.05),
                        10.0 ** math.ceil(math.log10(hi) + 0.05))
        else:
            pad = 0.12 * (hi - lo) if hi > lo else 0.5 * (abs(hi) or 1.0)
            ax.set_ylim(lo - pad, hi + pad)
    bottom, top = ax.get_ylim()
    off = 0
    for x, (variant, values) in enumerate(columns.items()):
        color = COLORS[variant]
        finite = [v for v in values if v is not None and math.isfinite(v)
                  and (v > 0 or not head.log)]
        if finite:
            ax.plot([x] * len(finite), finite, "o", color=color, markersize=4.5, alpha=0.8,
                    zorder=3)
            ax.plot([x, x], [min(finite), max(finite)], color=color, linewidth=6, alpha=0.25,
                    solid_capstyle="butt", zorder=2)
            mean = (math.exp(sum(map(math.log, finite)) / len(finite)) if head.log
                    else sum(finite) / len(finite))
            ax.plot([x - 0.22, x + 0.22], [mean, mean], color=color, linewidth=2.2, zorder=4)
        off_axis = [v for v in values if v is not None and not (math.isfinite(v)
                                                                  and (v > 0 or not head.log))]
        above = [v for v in off_axis if math.isnan(v) or v > 0]
        below = [v for v in off_axis if not (math.isnan(v) or v > 0)]
        for edge, marker, items in ((top, "^", above), (bottom, "v", below)):
            if items:
                ax.plot([x], [edge], marker, color=color, markersize=8, clip_on=False, zorder=5)
                off += len(items)
        ax.set_ylim(bottom, top)
    for t in head.thresholds:
        if t > 0 or not head.log:
            ax.axhline(t, color=COLORS["reference"], linestyle=(0, (4, 3)), linewidth=1.1,
                       zorder=1)
            ax.annotate(f"{t:.3g}", (1, t), xycoords=("axes fraction", "data"),
                        xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                        fontsize=9, color=COLORS["reference"])
    ax.set_xlim(-0.6, 1.6)
    ax.set_xticks([0, 1], ["blocked", "unblocked"], fontsize=9)
    for tick, variant in zip(ax.get_xticklabels(), (BLOCKED, UNBLOCKED)):
        tick.set_color(variant_style(variant)["color"])
    ax.tick_params(axis="y", labelsize=9)
    ax.set_ylabel("\n".join(textwrap.wrap(head.metric, 24)[:4]), fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    lines = [f"({letter}) {name}", *textwrap.wrap(_status(verdict), TITLE_CHARS)]
    if off:
        lines.append(f"{off} seed{'s' * (off != 1)} off the axis")
    # from above the y label, where the panel begins: the widest room a title has
    ax.set_title("\n".join(lines), fontsize=9, loc="left", x=title_x, pad=10)


def summary_figure(sections: Sequence[tuple[str, Sequence[Verdict]]]) -> Any:
    """The summary figure of ``(section name, findings)`` pairs: a lettered panel per section
    whose findings hold a headline, in order; ``None`` when none does."""
    heads = [(name, v) for name, findings in sections
             if (v := headline_of(findings)) is not None]
    if not heads:
        return None
    ncols = min(COLUMNS, len(heads))
    nrows = math.ceil(len(heads) / ncols)
    width = max(PANEL_IN[0] * ncols, 3.4)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(width, PANEL_IN[1] * nrows))
    for ax in axes.flat[len(heads):]:
        ax.set_visible(False)
    # a title starts over the y label: about half an inch left of axes about 0.6 inch
    # narrower than their panel, in the axes' own units
    title_x = -0.5 / (width / ncols - 0.6)
    for i, (ax, (name, verdict)) in enumerate(zip(axes.flat, heads)):
        _panel(ax, string.ascii_lowercase[i % 26] * (i // 26 + 1), name, verdict, title_x)
    return fig
