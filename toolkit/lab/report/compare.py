"""``toolkit compare``: complete runs pooled over seeds, blocked vs unblocked side by side, each
numeric summary value a row of one long :class:`pandas.DataFrame`. Runs whose configs agree but
for ``seed`` are one config, labelled by the keys its experiment's configs differ in
(``inner_steps=5``; a showcase: one per child); a seed's latest run counts; ``unblocked −
blocked`` (Δ) is paired by seed.
"""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from toolkit._utils.formatting import shown
from toolkit.lab.report.figures import (
    draw_spread,
    log_if_wide,
    numeric_leaves,
    panels,
    plt,
    series,
    subplots,
    wrap,
)
from toolkit.lab.report.render import FigureItem, format_value, page, png, safe_name, split_variant
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults, readable_runs
from toolkit.lab.style import COLORS, EXTRA_COLORS, MARKERS, integer_ticks, variant_style

WIDTH = 120  # widest line of the terminal table when the width is not known (piped output)
NARROWEST = 40  # a terminal narrower than this is taken as this wide
ONE_SEED = "[1 seed]"  # what a cell says instead of a range: one seed only,
AGREE = "[seeds agree]"  # or every seed gave the same value
HEADLINE = 3  # headline quantities (one figure each, the terminal's rows) per config
NOISE = 1e-9  # values this small in both variants are rounding, not a difference
DIFF = "unblocked − blocked"
DELTA = "Δ"


@dataclass
class Sweep:
    """How one experiment's configs differ: the ``varying`` keys, the ``constant`` ones with
    their value, and each config's label → its values of the varying keys (``points``)."""

    varying: list[str] = field(default_factory=list)
    constant: dict[str, Any] = field(default_factory=dict)
    points: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Comparison:
    """What ``toolkit compare`` pooled: ``values`` (a row per number, Δ rows as variant
    :data:`DIFF`), ``sweeps`` per experiment, ``runs`` per ``(experiment, config)`` (one per
    seed) and the ``duplicates`` left out because a later run has their seed."""

    values: pd.DataFrame
    sweeps: dict[str, Sweep]
    runs: dict[tuple[str, str], list[RunResults]]
    duplicates: list[Path] = field(default_factory=list)

    @property
    def rows(self) -> list[tuple[str, str, str]]:
        return list(self.values[["experiment", "config", "quantity"]].drop_duplicates()
                    .itertuples(index=False, name=None))

    def labels(self, experiment: str) -> list[str]:
        return list(self.sweep(experiment).points)

    def sweep(self, experiment: str) -> Sweep:
        return self.sweeps.get(experiment) or Sweep()

    def of(self, experiment: str, config: str | None = None) -> pd.DataFrame:
        v = self.values
        return v[(v.experiment == experiment) & ((v.config == config) if config else True)]

    def seeds(self, experiment: str, config: str) -> list[int]:
        return sorted(int(s) for s in self.of(experiment, config).seed.unique())

    def stats(self) -> pd.DataFrame:
        """Mean, standard deviation (ddof = 1), count, smallest and largest of each
        experiment, config, quantity and variant over the seeds (finite values only)."""
        finite = self.values[np.isfinite(self.values.value)]
        return finite.groupby(["experiment", "config", "quantity", "variant"], sort=False) \
            .value.agg(["mean", "std", "count", "min", "max"]).rename(columns={"count": "n"})

    def paired(self, experiment: str, config: str) -> list[str]:
        rows = self.of(experiment, config)
        return list(rows.loc[rows.variant == DIFF, "quantity"].unique())


def _knobs(config: dict[str, Any]) -> dict[str, str]:
    """A config as one flat table of JSON texts: the common keys and the ``params`` (a param
    named like a common key keeps ``params.`` in front)."""
    params = config.get("params") if isinstance(config.get("params"), dict) else {}
    top = {k: v for k, v in config.items() if k not in ("params", "experiment", "seed",
                                                         "output_dir")}
    flat = {**top, **{(f"params.{k}" if k in top else k): v for k, v in params.items()}}
    return {k: json.dumps(v, sort_keys=True) for k, v in flat.items()}


def _order(text: Any) -> tuple[int, Any]:
    """Sort key of a config value: numbers by size, before text, before anything else."""
    value = json.loads(text) if isinstance(text, str) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (0, value)
    return (1, value) if isinstance(value, str) else (2, str(text))


def _sweep(knobs: pd.DataFrame) -> tuple[Sweep, dict[str, str]]:
    """The :class:`Sweep` of one experiment's configs (a row of ``knobs`` each) and the label
    of each row."""
    varying = [k for k in knobs.columns if knobs[k].nunique(dropna=False) > 1]
    constant = {k: json.loads(knobs[k].iloc[0]) for k in knobs.columns
                if k not in varying and isinstance(knobs[k].iloc[0], str)}
    sweep, labels = Sweep(varying, constant), {}
    for i in sorted(knobs.index, key=lambda i: [_order(knobs.at[i, k]) for k in varying]):
        point = {k: "—" if not isinstance(t := knobs.at[i, k], str) else
                 v if isinstance(v := json.loads(t), str) else t for k in varying}
        label = ", ".join(f"{k}={v}" for k, v in point.items()) or "default"
        while label in sweep.points:  # two values that read the same ("1" and 1)
            label += "'"
        sweep.points[label] = point
        labels[i] = label
    return sweep, labels


def compare_runs(root: str | Path, *, on_damaged: Any = None, latest: bool = False
                 ) -> Comparison:
    """Pool every complete run below ``root`` (see the module docstring); a damaged run is
    handed to ``on_damaged`` and left out. ``latest``: only the runs of the command that
    started last (the same command line: a sweep's runs, or one ``toolkit run``'s seeds)."""
    units = [(run, unit) for run in map(RunResults, readable_runs(root, on_damaged))
             if run.status == "complete"
             for unit in ([run.child(n) for n in run.children] or [run])]
    if latest and units:
        argv = max(units, key=lambda u: str(u[0].meta.get("started") or ""))[0].meta.get("argv")
        units = [u for u in units if u[0].meta.get("argv") == argv]
    runs = pd.DataFrame([{"experiment": unit.experiment, "seed": int(run.meta.get("seed", 0)),
                          "started": str(run.meta.get("started") or ""), "unit": unit,
                          "key": json.dumps(_knobs(unit.config), sort_keys=True)}
                         for run, unit in units],
                        columns=["experiment", "seed", "started", "unit", "key"])
    runs = runs.sort_values("started", kind="stable")
    again = runs.duplicated(["experiment", "key", "seed"], keep="last")
    duplicates = [u.run_dir for u in runs.loc[again, "unit"]]
    runs = runs[~again].assign(config="")
    sweeps = {}
    for exp, group in runs.groupby("experiment", sort=True):
        configs = group.drop_duplicates("key")
        knobs = pd.DataFrame([json.loads(k) for k in configs.key], index=configs.key.values)
        sweeps[exp], labels = _sweep(knobs)
        runs.loc[group.index, "config"] = group.key.map(labels)
    records = [{"experiment": r.experiment, "config": r.config, "seed": r.seed,
                "quantity": quantity, "variant": variant or "value", "value": value}
               for r in runs.sort_values("seed", kind="stable").itertuples()
               for path, value in numeric_leaves(r.unit.summary).items()
               for variant, quantity in [split_variant(path)]]
    values = pd.DataFrame(records, columns=["experiment", "config", "seed", "quantity",
                                            "variant", "value"])
    pairs = values[values.variant.isin([BLOCKED, UNBLOCKED])].pivot_table(
        index=["experiment", "config", "quantity", "seed"], columns="variant", values="value",
        sort=False, dropna=False)
    if {BLOCKED, UNBLOCKED} <= set(pairs.columns):
        diff = (pairs[UNBLOCKED] - pairs[BLOCKED]).dropna().rename("value").reset_index()
        values = pd.concat([values, diff.assign(variant=DIFF)], ignore_index=True)
    rank = {(exp, label): i for exp, s in sweeps.items() for i, label in enumerate(s.points)}
    values["rank"] = [rank[key] for key in zip(values.experiment, values.config)]
    values = values.sort_values(["experiment", "rank"], kind="stable", ignore_index=True)
    pooled = {key: list(g.unit) for key, g in runs.groupby(["experiment", "config"], sort=False)}
    return Comparison(values.drop(columns="rank"), sweeps, pooled, duplicates)


def cell(values: Iterable[float], quantity: str) -> str:
    """Values over seeds as the tables write them: ``mean [smallest, largest] unit``, the range
    with as few digits as tell its ends apart; where there is no range the brackets say why
    (one seed, or every seed gave the same value).

    >>> cell([1.0, 3.0], "loss"), cell([0.25, 0.5], "seconds"), cell([2.0], "x")
    ('2 [1, 3]', '375 [250, 500] ms', '2 [1 seed]')
    >>> cell([0.25, 0.25], "seconds")
    '250 ms [seeds agree]'
    """
    xs = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if not xs.size:
        return ""
    mean = format_value(float(xs.mean()), quantity)
    if xs.size == 1:
        return f"{mean} {ONE_SEED}"
    for digits in (3, 4, 6):
        lo, hi = (format_value(float(f"{x:.{digits}g}") if digits < 4 else float(x), quantity)
                  for x in (xs.min(), xs.max()))
        if lo != hi:
            break
    if lo == hi:
        return f"{mean} {AGREE}"
    (number, _, unit), (a, _, ua), (b, _, ub) = (s.partition(" ") for s in (mean, lo, hi))
    if ua == ub == unit:
        return f"{number} [{a}, {b}]" + (f" {unit}" if unit else "")
    return f"{mean} [{lo}, {hi}]"


def cells(table: Comparison, experiment: str, config: str) -> pd.DataFrame:
    """One config's values as text: a row per quantity, a column per variant."""
    rows = table.of(experiment, config)
    text = rows.groupby(["quantity", "variant"], sort=False).value.agg(
        lambda v: cell(v, v.name[0] if isinstance(v.name, tuple) else ""))
    return text.unstack("variant").reindex(rows.quantity.unique()).fillna("")


def headline_metrics(table: Comparison, experiment: str, config: str | None = None,
                     k: int = HEADLINE) -> list[str]:
    """The first ``k`` quantities of ``experiment`` (summary order; of one ``config``, or of
    any) whose blocked and unblocked values differ in some seed by more than rounding; the
    first paired quantity when none do."""
    rows = table.of(experiment, config)
    by = rows[rows.variant.isin([BLOCKED, UNBLOCKED])].groupby("quantity", sort=False).value
    scale = by.agg(lambda x: np.nanmax(np.abs(x)) if len(x) else 0.0)
    gap = rows[rows.variant == DIFF].groupby("quantity", sort=False).value.agg(
        lambda x: np.nanmax(np.abs(x)))
    paired = [q for q in gap.index if q in scale.index]
    chosen = [q for q in paired if scale[q] > NOISE and gap[q] > NOISE * max(1.0, scale[q])]
    return (chosen or paired[:1])[:k]


def terminal_width() -> int:
    """The width to write at: ``COLUMNS``, else the terminal's, else (piped) :data:`WIDTH`;
    never below :data:`NARROWEST`."""
    return max(NARROWEST, shutil.get_terminal_size((WIDTH, 24)).columns)


def _wrap(text: str, width: int, indent: str = "", more: str | None = None, *,
          name: bool = False) -> list[str]:
    """``text`` on lines of at most ``width``, broken at spaces only: a number (``-0.0066``,
    ``1.32e-06``) is never split, a word longer than the line keeps a line of its own. A
    ``name`` (a quantity's, which may be any length) is cut where it must be."""
    return textwrap.wrap(text, width, initial_indent=indent,
                         subsequent_indent=indent if more is None else more,
                         break_long_words=name, break_on_hyphens=False)


def _lines(frame: pd.DataFrame, width: int) -> list[str]:
    """A table in the terminal, in the first layout that fits ``width``: columns padded; else
    each quantity on a line of its own and its values on the next; else each value on a line
    of its own (``blocked    -3.51 [-3.56, -3.46]``). Lines break only at spaces."""
    widths = {c: max(len(str(c)), *map(len, frame[c])) for c in frame.columns}
    lines = ["    " + line.rstrip() for line in frame.to_string(
        index=False, justify="left", formatters={c: (lambda x, w=w: x.ljust(w))
                                                 for c, w in widths.items()}).splitlines()]
    if max(map(len, lines)) <= width:
        return lines
    name, *columns = frame.columns
    if 6 + sum(widths[c] + 2 for c in columns) - 2 <= width:
        out = ["      " + "  ".join(str(c).ljust(widths[c]) for c in columns).rstrip()]
        for _, row in frame.iterrows():
            out += _wrap(str(row[name]), width, "    ", "      ", name=True)
            out.append("      " + "  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())
        return out
    pad = max(len(str(c)) for c in columns)
    out = []
    for _, row in frame.iterrows():
        out += _wrap(str(row[name]), width, "    ", "      ", name=True)
        for c in columns:
            if row[c]:
                out += _wrap(f"{str(c).ljust(pad)}  {row[c]}", width, "      ",
                             " " * (8 + pad))
    return out


def format_table(table: Comparison, width: int | None = None) -> str:
    """The terminal's view: per experiment, which runs were pooled, and for each config its
    headline quantities, blocked and unblocked side by side with Δ (every value is in
    ``compare.csv`` and ``compare.html``). No line is longer than ``width`` (default: the
    terminal's, :func:`terminal_width`) and no number is split across lines."""
    width = terminal_width() if width is None else max(NARROWEST, width)
    out = _wrap(f"mean over seeds [smallest, largest] ({ONE_SEED[1:-1]} or {AGREE[1:-1]}: no "
                f"range); {DELTA} = {DIFF}, paired by seed; headline quantities only (every "
                f"value in compare.csv and compare.html)", min(width, WIDTH))
    for exp, sweep in table.sweeps.items():
        labels = table.labels(exp)
        n_runs = sum(len(table.runs[(exp, label)]) for label in labels)
        head = (f"{exp} · {len(labels)} config{'s' * (len(labels) != 1)}, {n_runs} "
                f"run{'s' * (n_runs != 1)} pooled")
        if sweep.varying:
            head += f"; configs differ in {', '.join(sweep.varying)}"
        out += ["", *_wrap(head, width)]
        for label in labels:
            text = cells(table, exp, label)
            seeds = ", ".join(map(str, table.seeds(exp, label)))
            out += _wrap(f"{label} · seeds {seeds}" if sweep.varying else f"seeds {seeds}",
                         width, "  ", "    ")
            chosen = headline_metrics(table, exp, label) or list(text.index[:HEADLINE])
            frame = text.reindex(index=chosen, columns=[BLOCKED, UNBLOCKED, DIFF, "value"])
            frame = frame.astype(object).fillna("").rename(columns={DIFF: DELTA}).rename_axis(
                "quantity").reset_index()
            out += _lines(frame.loc[:, (frame != "").any()], width)
            if len(text) > len(chosen):
                out += _wrap(f"+ {len(text) - len(chosen)} more in compare.csv and "
                             f"compare.html", width, "    ")
    if table.duplicates:
        n = len(table.duplicates)
        out += ["", *_wrap(
            f"note: {n} run{'s' * (n != 1)} with a seed already counted {'were' if n != 1 else 'was'} "
            f"left out (only distinct seeds are replicates): "
            f"{', '.join(shown(p.name) for p in table.duplicates)}", width)]
    return "\n".join(out)


def _csv(table: Comparison) -> str:
    """``compare.csv``: the statistics; a cell a spreadsheet would read as a formula gets a
    leading ``'`` (OWASP's advice)."""
    stats = table.stats().reset_index()
    stats["variant"] = stats.variant.replace(DIFF, "unblocked_minus_blocked")
    stats.insert(2, "seeds", [" ".join(map(str, table.seeds(e, c)))
                              for e, c in zip(stats.experiment, stats.config)])
    for column in ("experiment", "config", "quantity"):
        stats[column] = stats[column].str.replace(r"^(?=[=+\-@\t\r])", "'", regex=True)
    return stats.assign(std=stats["std"].fillna(0.0)).to_csv(index=False, lineterminator="\n")


def point_style(index: int) -> dict[str, Any]:
    """Colour and marker of the ``index``-th config: no two of the first 36 look alike."""
    n = len(EXTRA_COLORS)
    return {"color": EXTRA_COLORS[index % n],
            "marker": MARKERS[(index + index // n) % len(MARKERS)]}


def _legend(fig: Any, handles: list[Any], chars: int) -> None:
    """One legend under the axes, labels wrapped at ``chars`` characters, in as many columns
    as fit (9 pt: about 0.075 inch a character)."""
    for h in handles:
        h.set_label("\n".join(textwrap.fill(part, chars, break_long_words=True)
                              for part in h.get_label().split("\n")))
    longest = max(len(line) for h in handles for line in h.get_label().split("\n"))
    fig.legend(handles=handles, loc="outside lower center", fontsize=9, frameon=False,
               ncols=max(1, min(len(handles), int(fig.get_figwidth() / (0.075 * longest + 0.6)))))


def metric_figure(table: Comparison, experiment: str, quantity: str) -> Any:
    """Every config of ``experiment`` in one panel of ``quantity``: blocked left, unblocked
    right, a thick line joining a config's means (its colour and marker), a thin line per
    seed; the legend names each config with its paired difference."""
    rows = table.of(experiment)
    rows = rows[rows.quantity == quantity]
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
        handles.append(Line2D([], [], lw=2.0, markersize=6, **style,
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


def _number(text: str) -> float | None:
    """A swept value as a number (``"5"`` → 5.0), or ``None`` for text, lists, booleans."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _band(ax: Any, x: Sequence[float], by_x: Sequence[np.ndarray], **style: Any) -> Any:
    """The mean over seeds at each ``x`` as a line with markers, their range as a band (at a
    single ``x``, a bar along the y axis: a band there would have no width)."""
    mean = np.array([v.mean() if v.size else np.nan for v in by_x])
    lo = np.array([v.min() if v.size else np.nan for v in by_x])
    hi = np.array([v.max() if v.size else np.nan for v in by_x])
    (line,) = ax.plot(x, mean, markersize=5, linewidth=1.6, **style)
    if len(x) > 1:
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0,
                        zorder=line.get_zorder() - 0.5)
    else:
        ax.vlines(x, lo, hi, color=line.get_color(), alpha=0.35, linewidth=4,
                  zorder=line.get_zorder() - 0.5)
    return line


def swept_keys(table: Comparison, experiment: str) -> list[str]:
    """The keys ``experiment``'s configs vary that are swept: two or more of their values
    among configs that agree in every other varying key (a key that only tells apart runs
    that differ in many keys is no sweep of it)."""
    sweep = table.sweep(experiment)
    out = []
    for key in sweep.varying:
        seen: dict[tuple[str, ...], set[str]] = {}
        for point in sweep.points.values():
            rest = tuple(point[k] for k in sweep.varying if k != key)
            seen.setdefault(rest, set()).add(point[key])
        if any(len(v) > 1 for v in seen.values()):
            out.append(key)
    return out


def sweep_figure(table: Comparison, experiment: str, key: str,
                 quantities: Sequence[str]) -> Any:
    """The sweep's question in one figure: a row per quantity of ``quantities``, against the
    swept ``key`` on the x axis. Left, the value with the block and without it; right, their
    difference Δ (paired by seed) with zero marked. Lines are the means over the seeds, bands
    their range. Where other keys vary too, each of their combinations is a line of its own
    (its marker in the legend)."""
    sweep = table.sweep(experiment)
    others = [k for k in sweep.varying if k != key]
    points = {label: point for label, point in sweep.points.items()
              if (experiment, label) in table.runs}
    values = {label: point[key] for label, point in points.items()}
    numbers = {label: _number(v) for label, v in values.items()}
    numeric = all(n is not None for n in numbers.values())
    order = sorted(dict.fromkeys(values.values()),
                   key=lambda v: (0, n, "") if (n := _number(v)) is not None else (1, 0.0, v))
    where = {v: (_number(v) if numeric else float(i)) for i, v in enumerate(order)}
    groups: dict[str, list[str]] = {}
    for label, point in points.items():
        groups.setdefault(", ".join(f"{k}={point[k]}" for k in others), []).append(label)
    fig, axes = subplots(len(quantities), 2, figsize=(8.8, 0.6 + 2.9 * len(quantities)),
                         squeeze=False)
    fig.get_layout_engine().set(h_pad=0.12)  # a row's title clear of the ticks above it
    rows = table.of(experiment)
    xs_all = sorted(where.values())
    handles: list[Any] = []
    for (left, right), quantity in zip(axes, quantities):
        mine = rows[rows.quantity == quantity]
        for g, labels in enumerate(groups.values()):
            labels = sorted(labels, key=lambda label: where[values[label]])
            x = [where[values[label]] for label in labels]
            marker = MARKERS[g % len(MARKERS)]
            for ax, variant in ((left, BLOCKED), (left, UNBLOCKED), (right, DIFF)):
                by_x = [mine.loc[(mine.config == label) & (mine.variant == variant),
                                 "value"].to_numpy(dtype=float) for label in labels]
                by_x = [v[np.isfinite(v)] for v in by_x]
                style = (variant_style(variant) if variant != DIFF else
                         {"color": COLORS["reference"], "linestyle": "-", "zorder": 2.2})
                _band(ax, x, by_x, marker=marker, label=f"{DELTA} = {DIFF}"
                      if variant == DIFF else variant, **style)
        right.axhline(0.0, color="#999999", linewidth=0.8, zorder=1)
        for ax, title in ((left, quantity), (right, f"{DELTA} {quantity}")):
            ax.set_title(wrap(title, 44), fontsize=10)
            ax.set_xticks(xs_all, [str(v) for v in order], fontsize=9)
            if numeric and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 10:
                ax.set_xscale("log")
                ax.set_xticks(xs_all, [str(v) for v in order], fontsize=9)
                ax.xaxis.set_minor_locator(plt.NullLocator())
            ax.tick_params(axis="y", labelsize=9)
            ax.grid(alpha=0.3)
            ax.margins(x=0.08)
        if quantity == quantities[-1]:
            for ax in (left, right):
                ax.set_xlabel(key, fontsize=10)
    handles += [Line2D([], [], label=f"{variant} (mean over seeds; band: their range)",
                       **variant_style(variant)) for variant in (BLOCKED, UNBLOCKED)]
    handles.append(Line2D([], [], color=COLORS["reference"], label=f"{DELTA} = {DIFF}, "
                          f"paired by seed"))
    if len(groups) > 1:
        handles += [Line2D([], [], color="#404040", linestyle="none", label=group,
                           marker=MARKERS[g % len(MARKERS)], markersize=6)
                    for g, group in enumerate(groups)]
    _legend(fig, handles, 60)
    return fig


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
    of ``groups`` (label → its runs) as its blocked and unblocked curve."""
    fig, axes = panels(len(names), 2, 4.4, 3.4, title=1.2)
    for ax, name in zip(axes, names):
        ys_all = []
        for i, (label, units) in enumerate(groups.items()):
            for variant in (BLOCKED, UNBLOCKED):
                steps, ys = series(units, f"{variant}/{name}")
                if not len(steps):
                    continue
                every = max(1, math.ceil(len(steps) / 8))
                draw_spread(ax, steps, ys, marker=point_style(i)["marker"], markersize=5,
                            linewidth=1.4, markevery=(i % every, every), band_alpha=0.07,
                            label=f"{label} ({variant})", **variant_style(variant))
                ys_all += ys
        log_if_wide(ax, ys_all)
        ax.set_title(wrap(name, 40), fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=9)
        integer_ticks(ax)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], label=label, linestyle="none", color="#404040",
                      marker=point_style(i)["marker"], markersize=6)
               for i, label in enumerate(groups)]
    handles += [Line2D([], [], label=v, **variant_style(v)) for v in (BLOCKED, UNBLOCKED)]
    _legend(fig, handles, 40)
    fig.suptitle(textwrap.fill(f"{experiment}: every config on the same axes (marker: the "
                               f"config; the mean over seeds, band: their range)",
                               int(fig.get_figwidth() * 11)), fontsize=10)
    return fig


def compare_figures(table: Comparison) -> Iterator[tuple[str, str, str, Any]]:
    """``(experiment, name, caption, figure)`` of every figure: first, for a sweep, its
    headline metrics against each swept key (:func:`sweep_figure`); then one per headline
    metric of each experiment (a config's blocked → unblocked slope), and for several configs
    their logged curves."""
    for exp in table.sweeps:
        headline = headline_metrics(table, exp)
        for key in swept_keys(table, exp) if headline else ():
            others = [k for k in table.sweep(exp).varying if k != key]
            yield exp, f"sweep_{key}", (
                f"{exp}: {', '.join(headline)} against {key}, the swept key. Left, with the "
                f"block (solid blue) and without it (dashed vermillion); right, their "
                f"difference {DELTA} = {DIFF}, paired by seed (grey line: zero). Lines are "
                f"the means over the seeds, bands their range (smallest to largest)"
                + (f"; each combination of {', '.join(others)} has its marker." if others
                   else ".")), sweep_figure(table, exp, key, headline)
        for quantity in headline:
            yield exp, quantity, (
                f"{exp}: {quantity} of every config; a thick line joins a config's blocked "
                f"and unblocked means (its colour and marker in the legend, with {DIFF}), thin "
                f"lines the two values of each seed."), metric_figure(table, exp, quantity)
        groups = {label: table.runs[(exp, label)] for label in table.labels(exp)}
        if len(groups) > 1 and (names := curve_names(groups)):
            yield exp, "curves", (
                f"{exp}: the logged curves of every config, a panel per metric: the marker "
                f"says the config, a solid blue line blocked, a dashed vermillion line "
                f"unblocked (the mean over the seeds; the band, their range)."), \
                curve_figure(groups, exp, names)


def write_compare(table: Comparison, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``compare.csv``, ``compare.html`` (every value, the runs pooled, the figures) and
    the figures as ``compare_figures/<experiment>__<name>.png``; returns the CSV's and the
    page's paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(csv_path := out_dir / "compare.csv", _csv(table), root=out_dir)
    figures: dict[str, list[FigureItem]] = {}
    folder = inside(out_dir, out_dir / "compare_figures")  # never through a link out
    for exp, name, caption, fig in compare_figures(table):
        item = FigureItem(safe_name(f"{exp}__{name}"), caption, png(fig))
        atomic_write_bytes(folder / f"{item.name}.png", item.png, root=out_dir)
        figures.setdefault(exp, []).append(item)
    sections = []
    for exp, sweep in table.sweeps.items():
        rows, pooled = [], []
        for label in table.labels(exp):
            text = cells(table, exp, label).reindex(columns=[BLOCKED, UNBLOCKED, DIFF, "value"])
            seeds = ", ".join(map(str, table.seeds(exp, label)))
            pooled.append((label, seeds, [shown(u.run_dir.name) for u in table.runs[(exp, label)]]))
            rows += [[*sweep.points[label].values(), seeds, q, *row]
                     for q, row in text.astype(object).fillna("").iterrows()]
        sections.append({"experiment": exp, "sweep": sweep, "rows": rows, "pooled": pooled,
                         "columns": [*sweep.varying, "seeds", "quantity", BLOCKED, UNBLOCKED,
                                     DELTA, "value"], "figures": figures.get(exp, [])})
    n_runs = len({u.run_dir for runs in table.runs.values() for u in runs})  # a showcase: 1
    atomic_write_text(html_path := out_dir / "compare.html", page(
        "compare.html.j2", sections=sections, diff=DIFF, delta=DELTA, n_runs=n_runs,
        n_groups=len(table.runs)), root=out_dir)
    return csv_path, html_path
