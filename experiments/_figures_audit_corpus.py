"""The table figure of the ``audit_corpus`` experiment, drawn only from a run's files."""

from __future__ import annotations

import textwrap
from typing import Any

from toolkit.runner import RunResults, fmt

_COLUMNS = (("bug", 24), ("what audit_step said", 62), ("cost (buggy / fixed)", 26))


def _cost(costs: dict[str, Any]) -> str:
    if not costs:
        return "—"
    return (f"{fmt(costs['time_ratio_buggy_over_fixed'])}x time "
            f"({fmt(costs['time_ratio_min'])}–{fmt(costs['time_ratio_max'])}), "
            f"{fmt(costs['saved_bytes_ratio_buggy_over_fixed'])}x saved bytes")


def table_figure(run: RunResults, fontsize: float = 7.5) -> Any:
    """One row per bug: the bug, the audit's verdict and fix, and the measured cost.

    Cells are wrapped to fixed widths in a monospaced font, so that the figure's size follows
    from the text and nothing overlaps.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    s, c = run.summary, run.costs
    rows = [[name.replace("_", " ") + f": {case['bug']}",
             ("✓ " if case["caught"] else "✗ ") + case["said"]
             + ("; fixed twin clean" if case["fixed_clean"] else "; FIXED TWIN FLAGGED"),
             _cost(c.get(name, {}))] for name, case in s["cases"].items()]
    rows += [[f"{name.replace('_', ' ')}: {v['bug']}",
              "clean" if v["clean"] else "FLAGGED (false alarm)", "—"]
             for name, v in s["legit"].items()]
    cells = [[textwrap.wrap(text, width) or [""] for text, (_, width) in zip(row, _COLUMNS)]
             for row in rows]
    char_w, line_h = 0.62 * fontsize / 72, 1.35 * fontsize / 72  # inches
    gap, margin = 0.15, 0.12
    widths = [w * char_w for _, w in _COLUMNS]
    heights = [max(len(cell) for cell in row) * line_h + 0.06 for row in cells]
    header_h = line_h + 0.08
    fig_w = sum(widths) + gap * (len(widths) - 1) + 2 * margin
    fig_h = header_h + sum(heights) + 2 * margin + 0.3
    fig = Figure(figsize=(fig_w, fig_h))
    FigureCanvasAgg(fig)
    xs = [margin + sum(widths[:i]) + gap * i for i in range(len(widths))]
    y = fig_h - margin - 0.3
    fig.text(margin / fig_w, (fig_h - margin) / fig_h, "audit_step on the corpus",
             fontsize=fontsize + 1.5, va="top", weight="bold")

    def rule(at: float) -> None:
        fig.add_artist(Line2D([margin / fig_w, 1 - margin / fig_w], [at / fig_h] * 2,
                              color="#888", lw=0.6))

    for x, (title, _) in zip(xs, _COLUMNS):
        fig.text(x / fig_w, y / fig_h, title, fontsize=fontsize, family="monospace",
                 weight="bold", va="top")
    y -= header_h
    rule(y + 0.03)
    for row, height in zip(cells, heights):
        for x, lines in zip(xs, row):
            fig.text(x / fig_w, (y - 0.03) / fig_h, "\n".join(lines), fontsize=fontsize,
                     family="monospace", va="top", linespacing=1.25)
        y -= height
        rule(y + 0.015)
    return fig
