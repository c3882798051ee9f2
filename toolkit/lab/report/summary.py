"""The report's Figure 1: a lettered panel per experiment's headline finding, blocked left,
unblocked right, a dot per seed; its caption explains the marks it uses, and only those."""

from __future__ import annotations

import math
import string
import textwrap
from collections.abc import Sequence
from statistics import geometric_mean
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator

from toolkit.lab.report.figures import plt
from toolkit.lab.results.findings import BADGES, Verdict
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import COLORS, MAX_WIDTH_IN

COLUMNS = 5  # panels in a row at most: ten are two rows of five, on a laptop's first screen
PANEL_H_IN = 2.6  # height of one row of panels, in inches
CHAR_IN = 0.075  # the width of an average character of the titles (9 pt), in inches
#: What each mark of the figure means, said in the caption only when the figure uses it.
MARKS = {
    "thresholds": "Dashed grey lines are the thresholds the verdict compares with.",
    "zero": "On a log axis, a value of exactly 0 is a dot on the row marked 0, below the break "
            "(//) in the axis.",
    "diverged": "A triangle at the top edge is a run that diverged (a value that is not "
                "finite).",
    "negative": "A triangle at the bottom edge of a log axis is a value below 0.",
}


def headline_of(findings: Sequence[Verdict]) -> Verdict | None:
    """The finding an experiment marked as its headline, or ``None``."""
    return next((f for f in findings if f.headline is not None), None)


def _status(verdict: Verdict) -> str:
    """``"as predicted · 3/3 seeds"``, ``"measured · 3 seeds"``, ``"as predicted ·
    seed-independent"`` (the same in every seed, as the findings say it)."""
    v = verdict
    seeds = "seed-independent" if v.seed_independent else \
        f"{v.held}/{v.n_seeds - v.outside_seeds} seeds" if v.predicts and v.timing is None \
        else f"{v.n_seeds} seed{'s' * (v.n_seeds != 1)}"
    return f"{BADGES[v.verdict]} · {seeds}"


def _columns(verdict: Verdict) -> dict[str, list[float | None]]:
    """Per variant one number per seed (``None`` where the seed has none, or a non-number)."""
    head = verdict.headline
    return {variant: [float(x) if isinstance(x := f.values.get(name), (int, float))
                      and not isinstance(x, bool) else None for f in verdict.per_seed]
            for variant, name in ((BLOCKED, head.blocked), (UNBLOCKED, head.unblocked))}


def _marks(verdict: Verdict) -> set[str]:
    """The marks of :data:`MARKS` that ``verdict``'s panel draws."""
    head = verdict.headline
    values = [v for vs in _columns(verdict).values() for v in vs if v is not None]
    return {mark for mark, used in (
        ("thresholds", any(t > 0 or not head.log for t in head.thresholds)),
        ("diverged", any(not math.isfinite(v) for v in values)),
        ("zero", head.log and any(v == 0 for v in values)),
        ("negative", head.log and any(math.isfinite(v) and v < 0 for v in values))) if used}


def _on_axis(v: float | None, log: bool) -> bool:
    """Whether ``v`` is drawn where it is (a 0 on a log axis is: on its own row)."""
    return v is not None and math.isfinite(v) and (v >= 0 or not log)


def _log_axis(ax: Any, lo: float, hi: float, zero: bool) -> float | None:
    """Whole decades from ``lo`` to ``hi``; with ``zero`` one more decade below, the row of 0
    (returned), parted from the decades by a break mark on both spines."""
    first = math.floor(math.log10(lo) - 0.05)
    last = math.ceil(math.log10(hi) + 0.05)
    ax.set_yscale("log")
    if not zero:
        ax.set_ylim(10.0 ** first, 10.0 ** last)
        return None
    zero_y = 10.0 ** (first - 1)
    ax.set_ylim(10.0 ** (first - 1.4), 10.0 ** last)
    step = max(1, math.ceil((last - first) / 4))
    decades = list(range(last, first - 1, -step))[::-1]
    ax.yaxis.set_major_locator(FixedLocator([zero_y] + [10.0 ** k for k in decades]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_yticklabels(["0"] + [f"$10^{{{k}}}$" for k in decades])
    brk = 10.0 ** (first - 0.5)
    for x in (0.0, 1.0):  # "//" across each spine, on a white gap
        transform = ax.get_yaxis_transform()
        ax.plot([x, x], [brk / 1.35, brk * 1.35], color="white", linewidth=3,
                transform=transform, clip_on=False, zorder=6)
        for shift in (1 / 1.25, 1.25):
            ax.plot([x - 0.03, x + 0.03], [brk * shift / 1.2, brk * shift * 1.2], color="black",
                    linewidth=0.8, transform=transform, clip_on=False, zorder=7)
    return zero_y


def _panel(ax: Any, verdict: Verdict) -> None:
    head = verdict.headline
    columns = _columns(verdict)
    values = [v for vs in columns.values() for v in vs]
    drawable = [v for v in values if _on_axis(v, head.log) and (v or not head.log)]
    drawable += [t for t in head.thresholds if t > 0 or not head.log]
    zero_y = None
    if head.log:  # nothing but zeros (and values off the axis): the row of 0 under one decade
        zero_y = _log_axis(ax, min(drawable, default=1.0), max(drawable, default=1.0),
                           any(v == 0 for v in values if v is not None))
    elif drawable:
        lo, hi = min(drawable), max(drawable)
        pad = 0.12 * (hi - lo) if hi > lo else 0.5 * (abs(hi) or 1.0)
        ax.set_ylim(lo - pad, hi + pad)
    bottom, top = ax.get_ylim()
    for x, (variant, column) in enumerate(columns.items()):
        color = COLORS[variant]
        shown = [v for v in column if _on_axis(v, head.log)]
        at = [zero_y if head.log and v == 0 else v for v in shown]
        if shown:
            ax.plot([x] * len(at), at, "o", color=color, markersize=4.5, alpha=0.8, zorder=3,
                    label=variant)
            ax.plot([x, x], [min(at), max(at)], color=color, linewidth=6, alpha=0.25,
                    solid_capstyle="butt", zorder=2)
            # on a log axis, the geometric mean of numbers spanning decades
            mean = geometric_mean(shown) if head.log and all(shown) else sum(shown) / len(shown)
            ax.plot([x - 0.22, x + 0.22], [zero_y if head.log and mean == 0 else mean] * 2,
                    color=color, linewidth=2.2, zorder=4)
        off_axis = [v for v in column if v is not None and not _on_axis(v, head.log)]
        for edge, marker, finite in ((top, "^", False), (bottom, "v", True)):
            if any(math.isfinite(v) == finite for v in off_axis):
                ax.plot([x], [edge], marker, color=color, markersize=8, clip_on=False, zorder=5)
        ax.set_ylim(bottom, top)
    for t in head.thresholds:
        if t > 0 or not head.log:
            ax.axhline(t, color=COLORS["reference"], linestyle=(0, (4, 3)), linewidth=1.1,
                       zorder=1)
            ax.annotate(f"{t:.3g}", (1, t), xycoords=("axes fraction", "data"),
                        xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                        fontsize=9, color=COLORS["reference"])
    ax.set_xlim(-0.6, 1.6)
    ax.set_xticks([0, 1], ["", ""])  # the columns are named by the figure's legend
    ax.tick_params(axis="y", labelsize=9)
    ax.set_ylabel("\n".join(textwrap.wrap(head.metric, 20)), fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def _panel_texts(panel: Any, letter: str, name: str, verdict: Verdict, chars: int,
                 reading_lines: int) -> None:
    """Above the panel its name and verdict (and seeds off the axis), under it what to see in
    ``reading_lines`` lines (as many as every panel's: their axes align)."""
    head = verdict.headline
    lines = [f"({letter}) {name}", *textwrap.wrap(_status(verdict), chars,
                                                  break_on_hyphens=False)]
    off = sum(1 for vs in _columns(verdict).values() for v in vs
              if v is not None and not _on_axis(v, head.log))
    if off:
        lines.append(f"{off} seed{'s' * (off != 1)} off the axis")
    panel.suptitle("\n".join(lines), x=0.02, ha="left", fontsize=9)
    if reading_lines:
        lines = textwrap.wrap(head.reading, chars)
        # a line holding a space keeps its height, where an empty last line would not
        lines += [" "] * (reading_lines - len(lines))
        panel.supxlabel("\n".join(lines), x=0.02, ha="left", va="bottom", fontsize=9,
                        color="#333333")


def _heads(sections: Sequence[tuple[str, Sequence[Verdict]]]) -> list[tuple[str, Verdict]]:
    return [(name, v) for name, findings in sections if (v := headline_of(findings)) is not None]


def summary_caption(sections: Sequence[tuple[str, Sequence[Verdict]]]) -> str:
    """Figure 1's caption: how to read a panel, and the marks this figure uses (only those)."""
    used = set().union(*(_marks(v) for _, v in _heads(sections)))
    return " ".join([
        "Each panel is one experiment's headline finding: its metric with the block (blue, "
        "left) and without it (vermillion, right), one dot per seed, a bar over the seeds' "
        "range and a line at their mean. Above each panel, whether the prediction held, in "
        "how many seeds, and what to see.",
        *(text for mark, text in MARKS.items() if mark in used)])


def summary_figure(sections: Sequence[tuple[str, Sequence[Verdict]]]) -> Any:
    """Figure 1 of ``(section name, findings)`` pairs: a lettered panel (a subfigure: its texts
    start at its left edge) per section with a headline, in order; ``None`` when none has one."""
    heads = _heads(sections)
    if not heads:
        return None
    nrows = math.ceil(len(heads) / COLUMNS)  # as few rows as can be, filled evenly
    ncols = math.ceil(len(heads) / nrows)
    panel_in = MAX_WIDTH_IN / max(ncols, 4)
    fig = plt.figure(layout="constrained",
                     figsize=(max(panel_in * ncols, 3.4), PANEL_H_IN * nrows + 0.3))
    panels = fig.subfigures(nrows, ncols, squeeze=False)
    chars = int(panel_in / CHAR_IN)
    reading_lines = max(len(textwrap.wrap(v.headline.reading, chars)) for _, v in heads
                        if v.headline is not None)
    for i, (panel, (name, verdict)) in enumerate(zip(panels.flat, heads)):
        _panel(panel.subplots(), verdict)
        _panel_texts(panel, string.ascii_lowercase[i % 26] * (i // 26 + 1), name, verdict,
                     chars, reading_lines)
    keys = [Line2D([], [], marker="o", linestyle="", color=COLORS[v], label=f"{v} ({side})")
            for v, side in ((BLOCKED, "left"), (UNBLOCKED, "right"))]
    fig.legend(handles=keys, loc="outside upper left", ncols=2, fontsize=9, frameon=False)
    return fig
