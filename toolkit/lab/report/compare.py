"""``toolkit compare``: aggregate complete runs over seeds, blocked vs unblocked side by side.

Runs with the same experiment and the same resolved config apart from ``seed`` (and
``output_dir``) form a group. Only distinct seeds are replicates: when several complete runs of a
group share a seed, the latest one counts and the others are listed as duplicates (``toolkit
compare`` prints them). A showcase run contributes one group per child experiment.

Each numeric summary value is a row of its group. A path that names a variant (``blocked.q``,
``part.unblocked.q``, ``q_blocked``; see :func:`~toolkit.lab.report.tables.split_variant`) is the
``blocked`` or ``unblocked`` column of quantity ``q``; the ``unblocked − blocked`` column holds
the difference paired by seed (both variants of a seed start from the same random state). Every
other value (``closed_form.x``, ``n_iter``) is listed with its whole path. A value over seeds
reads ``mean [smallest, largest]``: the mean and the range over the seeds, as the reports give
them.

Outputs: the terminal table (:func:`format_table`, at most :data:`WIDTH` characters a line:
blocked and unblocked only), ``compare.csv`` (every value, long format: mean, standard deviation
with ddof = 1, count, smallest, largest) and ``compare.html`` (every table, and a figure per
headline metric, also written to ``compare_figures/``). The headline metrics of an experiment
are its first :data:`HEADLINE` quantities, in summary order, whose blocked and unblocked values
differ in some seed by more than rounding (see :func:`headline_metrics`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.lab.report.content import FigureItem, safe_name
from toolkit.lab.report.figures import numeric_leaves
from toolkit.lab.report.tables import format_value, split_variant
from toolkit.lab.results.check import readable_runs
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import REPORT_DPI

__all__ = ["HEADLINE", "WIDTH", "CompareRow", "CompareTable", "cell", "compare_runs",
           "format_table", "headline_metrics", "metric_figure", "write_compare"]

#: Widest line of the terminal table; wider tables go to compare.csv and compare.html only.
WIDTH = 120
#: Headline metrics (one figure each) per experiment.
HEADLINE = 3
#: Values this small in both variants are rounding, not a difference worth a figure.
NOISE = 1e-9
DIFF = "unblocked − blocked"


@dataclass
class CompareRow:
    """One quantity of one group: per variant, the value of each seed (``seeds[variant]``
    names the seed of each value)."""

    experiment: str
    group: str
    quantity: str
    values: dict[str, list[float]] = field(default_factory=dict)
    seeds: dict[str, list[int]] = field(default_factory=dict)

    @property
    def paired(self) -> bool:
        """Both blocked and unblocked present."""
        return bool(self.values.get(BLOCKED)) and bool(self.values.get(UNBLOCKED))

    def add(self, variant: str, seed: int, value: float) -> None:
        self.values.setdefault(variant, []).append(value)
        self.seeds.setdefault(variant, []).append(seed)

    def stats(self, variant: str) -> tuple[float, float, int]:
        """``(mean, standard deviation with ddof = 1 (0 for one seed), n)`` of a variant."""
        xs = self._finite(variant)
        n = len(xs)
        if n == 0:
            return math.nan, math.nan, 0
        mean = math.fsum(xs) / n
        if n == 1:
            return mean, 0.0, 1
        return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)), n

    def interval(self, variant: str) -> tuple[float, float, float, int]:
        """``(mean, smallest, largest, n)`` of a variant over the seeds (NaN when absent)."""
        xs = self._finite(variant)
        if not xs:
            return math.nan, math.nan, math.nan, 0
        return math.fsum(xs) / len(xs), min(xs), max(xs), len(xs)

    def differences(self) -> list[float]:
        """``unblocked − blocked`` of every seed that has both."""
        blocked = dict(zip(self.seeds.get(BLOCKED, []), self.values.get(BLOCKED, [])))
        return [u - blocked[s] for s, u in zip(self.seeds.get(UNBLOCKED, []),
                                               self.values.get(UNBLOCKED, []))
                if s in blocked and math.isfinite(u) and math.isfinite(blocked[s])]

    def _finite(self, variant: str) -> list[float]:
        if variant == DIFF:
            return self.differences()
        return [x for x in self.values.get(variant, []) if x is not None and math.isfinite(x)]


@dataclass
class CompareTable:
    rows: list[CompareRow]
    variants: list[str]
    groups: dict[tuple[str, str], dict[str, Any]]  # (experiment, group) → {"seeds", "runs"}


def _units(run: RunResults) -> list[RunResults]:
    if run.children:
        return [run.child(name) for name in run.children]
    return [run]


def _knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's config with its ``params`` merged in: the values that can tell groups apart."""
    params = config.get("params")
    if not isinstance(params, Mapping):
        return dict(config)
    return {**{k: v for k, v in config.items() if k != "params"}, **params}


def _label(knobs: Mapping[str, Any], varying: set[str]) -> str:
    parts = [f"{k}={json.dumps(knobs[k]) if not isinstance(knobs[k], str) else knobs[k]}"
             for k in sorted(varying) if k in knobs]
    return ", ".join(parts) or "default"


def compare_runs(root: str | Path, *, on_damaged: Any = None) -> CompareTable:
    """Aggregate every complete run below ``root`` (see the module docstring); a damaged run is
    handed to ``on_damaged`` and left out (:func:`~toolkit.lab.results.check.readable_runs`)."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for run_dir in readable_runs(root, on_damaged):
        run = RunResults(run_dir)
        if run.status != "complete":
            continue
        for unit in _units(run):
            config = {k: v for k, v in unit.config.items() if k not in ("seed", "output_dir")}
            key = (unit.experiment, json.dumps(config, sort_keys=True))
            group = groups.setdefault(key, {"config": config, "runs": []})
            group["runs"].append(unit)
    # label each group by the config values that differ between groups of the same experiment
    by_exp: dict[str, list[dict[str, Any]]] = {}
    for (exp, _), group in groups.items():
        by_exp.setdefault(exp, []).append(_knobs(group["config"]))
    varying = {exp: {k for k in set().union(*flat)
                     if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1}
               for exp, flat in by_exp.items()}
    table_groups: dict[tuple[str, str], dict[str, Any]] = {}
    rows: dict[tuple[str, str, str], CompareRow] = {}
    variants: list[str] = []
    for (exp, _), group in sorted(groups.items(), key=lambda kv: kv[0]):
        label = _label(_knobs(group["config"]), varying[exp])
        by_seed: dict[int, RunResults] = {}
        duplicates = []
        for unit in sorted(group["runs"], key=lambda u: str(u.meta.get("started") or "")):
            seed = int(unit.meta.get("seed", 0))
            if seed in by_seed:
                duplicates.append(str(by_seed[seed].run_dir))
            by_seed[seed] = unit  # the latest run of a seed counts
        table_groups[(exp, label)] = {"seeds": sorted(by_seed), "duplicates": duplicates,
                                      "runs": [str(u.run_dir) for u in by_seed.values()]}
        for seed in sorted(by_seed):
            for path, value in numeric_leaves(by_seed[seed].summary).items():
                variant, quantity = split_variant(path)
                variant = variant or "value"
                if variant not in variants:
                    variants.append(variant)
                row = rows.setdefault((exp, label, quantity), CompareRow(exp, label, quantity))
                row.add(variant, seed, value)
    head = [v for v in (BLOCKED, UNBLOCKED) if v in variants]
    ordered = head + [v for v in variants if v not in head]
    return CompareTable(list(rows.values()), ordered, table_groups)


# --- text -------------------------------------------------------------------------------------


def _number(value: float, key: str, digits: int) -> tuple[str, str]:
    """``(number, unit)`` of a value as the tables write it (the unit from the key)."""
    text = format_value(float(value), key) if digits == 4 else format_value(
        float(f"{value:.{digits}g}"), key)
    number, _, unit = text.partition(" ")
    return number, unit


def _interval(row: CompareRow, variant: str) -> tuple[str, str]:
    """``("mean", "[lo, hi] unit")`` of a cell: the range only where the seeds differ."""
    mean, lo, hi, n = row.interval(variant)
    if n == 0:
        return "", ""
    m, unit = _number(mean, row.quantity, 4)
    for digits in (3, 4, 6):  # as few digits as tell the two ends apart
        (a, ua), (b, ub) = _number(lo, row.quantity, digits), _number(hi, row.quantity, digits)
        if (a, ua) != (b, ub):
            break
    if n == 1 or (a, ua) == (b, ub):
        return m + (f" {unit}" if unit else ""), ""
    if ua == ub == unit:
        return m, f"[{a}, {b}]" + (f" {unit}" if unit else "")
    return m + (f" {unit}" if unit else ""), f"[{a} {ua}, {b} {ub}]".replace(" ]", "]").replace(
        " ,", ",")


def cell(row: CompareRow, variant: str) -> str:
    """A value over seeds as the tables write it: ``mean [smallest, largest]``."""
    return " ".join(part for part in _interval(row, variant) if part)


def _fit(lines: list[list[list[str]]], width: int, least: int = 0) -> list[str] | None:
    """Rows of cells (each a list of lines) as text, columns padded, no line longer than
    ``width``: the first column is wrapped at dots to make room, down to ``least`` characters
    (``None`` when even that does not fit)."""
    n_cols = len(lines[0])
    col = [max((len(text) for row in lines for text in row[i]), default=0) for i in range(n_cols)]
    room = width - 2 - 2 * (n_cols - 1) - sum(col[1:])
    if col[0] > room:
        if room < least:
            return None
        col[0] = max(room, 1)
        lines = [[_wrap(row[0], col[0]), *row[1:]] for row in lines]
    out = []
    for row in lines:
        height = max(len(c) for c in row)
        for k in range(height):
            parts = [(c[k] if k < len(c) else "").ljust(col[i]) for i, c in enumerate(row)]
            out.append(("  " + "  ".join(parts)).rstrip()[:width])
    return out


def _stacked(row: CompareRow, width: int) -> list[str]:
    """One quantity for a narrow terminal: its name, then a line per variant."""
    lines = ["  " + line for line in _wrap([row.quantity], width - 2)]
    for variant in (BLOCKED, UNBLOCKED, DIFF):
        lines += textwrap.wrap(f"{variant}: {cell(row, variant)}", width,
                               initial_indent="    ", subsequent_indent="      ")
    return lines


def _wrap(texts: list[str], width: int) -> list[str]:
    out: list[str] = []
    for text in texts:
        pieces = re.split(r"(?<=[._/])", text)
        line = ""
        for piece in pieces:
            if line and len(line) + len(piece) > width:
                out.append(line)
                line = "  "
            line += piece
        out.extend(textwrap.wrap(line, width, subsequent_indent="  ") or [""])
    return out


def _group_lines(table: CompareTable, key: tuple[str, str], width: int) -> list[str]:
    exp, label = key
    seeds = table.groups[key]["seeds"]
    rows = [r for r in table.rows if (r.experiment, r.group) == key and r.paired]
    others = list(dict.fromkeys(r.quantity.split(".")[0] for r in table.rows
                                if (r.experiment, r.group) == key and not r.paired))
    head = (f"{exp}" + (f" [{label}]" if label != "default" else "")
            + f" · {len(seeds)} seed{'s' * (len(seeds) != 1)} ({', '.join(map(str, seeds))})")
    out = textwrap.wrap(head, width, subsequent_indent="  ", break_on_hyphens=False)
    if rows:
        header = [["quantity"], [BLOCKED], [UNBLOCKED], [DIFF]]
        variants = (BLOCKED, UNBLOCKED, DIFF)
        one_line = [header] + [[[r.quantity], *([cell(r, v)] for v in variants)] for r in rows]
        two_lines = [header] + [[[r.quantity], *([p for p in _interval(r, v) if p] or [""]
                                                 for v in variants)] for r in rows]
        # ranges beside the means while the quantities keep 28 characters, else below them,
        # else each value on a line of its own
        out += (_fit(one_line, width, 28) or _fit(two_lines, width, 16)
                or [line for r in rows for line in _stacked(r, width)])
    else:
        out.append("  (no quantity with both a blocked and an unblocked value)")
    if others:
        n = sum(1 for r in table.rows if (r.experiment, r.group) == key and not r.paired)
        names = ", ".join(others[:4]) + (", …" if len(others) > 4 else "")
        out += textwrap.wrap(f"+ {n} other value{'s' * (n != 1)} ({names}) in compare.csv "
                             f"and compare.html", width, initial_indent="  ",
                             subsequent_indent="    ", break_on_hyphens=False)
    return out


def format_table(table: CompareTable, width: int = WIDTH) -> str:
    """The terminal table: per group, blocked and unblocked side by side with their paired
    difference, ``mean [smallest, largest]`` over seeds; no line longer than ``width``."""
    out = textwrap.wrap("mean over seeds [smallest, largest]; unblocked − blocked paired by "
                        "seed", width)
    for key in table.groups:
        out += ["", *_group_lines(table, key, width)]
    for (exp, label), group in table.groups.items():
        if group.get("duplicates"):
            out.append(textwrap.fill(
                f"note: {exp} [{label}]: {len(group['duplicates'])} more run(s) with a seed "
                f"already counted were left out (only distinct seeds are replicates): "
                f"{', '.join(group['duplicates'])}", width, break_on_hyphens=False))
    return "\n".join(out)


# --- figures ----------------------------------------------------------------------------------


def headline_metrics(table: CompareTable, experiment: str, k: int = HEADLINE) -> list[str]:
    """The first ``k`` quantities of ``experiment`` (summary order) whose blocked and unblocked
    values differ in some seed, values below :data:`NOISE` in both variants left out; the
    first paired quantity when none differ."""
    paired = [r for r in table.rows if r.experiment == experiment and r.paired]
    chosen: list[str] = []
    for row in paired:
        scale = max(abs(x) for v in (BLOCKED, UNBLOCKED) for x in row.values[v])
        if row.quantity not in chosen and scale > NOISE and any(
                abs(d) > NOISE * max(1.0, scale) for d in row.differences()):
            chosen.append(row.quantity)
    if not chosen and paired:
        chosen.append(paired[0].quantity)
    return chosen[:k]


def metric_figure(rows: list[CompareRow], experiment: str, quantity: str) -> Any:
    """One headline metric: per group (``rows``) a panel with each seed's blocked and unblocked
    value joined by a line (a paired difference) and the means as short bars across; the y
    axis spans the data, not zero; the title gives the paired difference, also relative to
    the blocked mean. Returns the ``Figure``."""
    from toolkit.lab.report.figures import panels, wrap
    from toolkit.lab.style import COLORS

    fig, axes = panels(len(rows), 3, 3.4, 3.1, title=0.55)
    for ax, row in zip(axes, rows):
        blocked = dict(zip(row.seeds[BLOCKED], row.values[BLOCKED]))
        for seed, u in zip(row.seeds[UNBLOCKED], row.values[UNBLOCKED]):
            if seed in blocked:
                ax.plot([0, 1], [blocked[seed], u], color="#999999", lw=0.8, zorder=1)
        for x, variant in enumerate((BLOCKED, UNBLOCKED)):
            ys = row.values[variant]
            ax.scatter([x] * len(ys), ys, color=COLORS[variant], s=22, zorder=3,
                       marker="o" if variant == BLOCKED else "s")
            mean = row.interval(variant)[0]
            ax.plot([x - 0.18, x + 0.18], [mean, mean], color=COLORS[variant], lw=2.2, zorder=2)
        ax.set_xlim(-0.5, 1.5)
        ax.set_xticks([0, 1], [BLOCKED, UNBLOCKED], fontsize=9)
        for tick, variant in zip(ax.get_xticklabels(), (BLOCKED, UNBLOCKED)):
            tick.set_color(COLORS[variant])
        ax.margins(y=0.25)
        ax.tick_params(axis="y", labelsize=9)
        ax.grid(axis="y", alpha=0.3)
        n = len(row.differences())
        base = row.interval(BLOCKED)[0]
        relative = 100 * row.interval(DIFF)[0] / abs(base) if base else math.nan
        lines = [f"{DIFF}{f' ({n} seeds)' if n > 1 else ''}:", cell(row, DIFF)]
        if math.isfinite(relative) and relative:
            lines[-1] += f" ({relative:+.3g} % of blocked)"
        if len(rows) > 1:
            lines.insert(0, row.group)
        ax.set_title("\n".join(textwrap.fill(line, 40) for line in lines), fontsize=9)
    fig.suptitle(wrap(f"{experiment}: {quantity}", 60), fontsize=10)
    return fig


def _png(fig: Any) -> bytes:
    from toolkit.lab.report.figures import plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=REPORT_DPI)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _figures(table: CompareTable) -> dict[str, list[tuple[str, str, bytes]]]:
    """experiment → its headline figures as ``(file stem, caption, PNG)``."""
    out: dict[str, list[tuple[str, str, bytes]]] = {}
    for experiment in dict.fromkeys(exp for exp, _ in table.groups):
        for quantity in headline_metrics(table, experiment):
            rows = [r for r in table.rows
                    if r.experiment == experiment and r.quantity == quantity and r.paired]
            stem = safe_name(f"{experiment}__{quantity}")
            caption = (f"{experiment}: {quantity}, blocked and unblocked in each seed (a line "
                       f"joins the two values of one seed; bars: the means).")
            png = _png(metric_figure(rows, experiment, quantity))
            out.setdefault(experiment, []).append((stem, caption, png))
    return out


# --- files ------------------------------------------------------------------------------------


def _cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: one that starts with ``= + - @``, a tab or a
    carriage return (a formula, such as ``=HYPERLINK(...)``) gets a leading ``'`` (OWASP's
    advice for CSV injection); numbers are left alone."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv(table: CompareTable) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["experiment", "config", "seeds", "quantity", "variant", "mean", "std", "n",
                     "min", "max"])
    for row in table.rows:
        seeds = " ".join(map(str, table.groups[(row.experiment, row.group)]["seeds"]))
        variants = [*table.variants, *([DIFF] if row.paired else [])]
        for variant in variants:
            mean, std, n = row.stats(variant)
            if n:
                _, lo, hi, _ = row.interval(variant)
                name = "unblocked_minus_blocked" if variant == DIFF else variant
                writer.writerow([_cell(row.experiment), _cell(row.group), seeds,
                                 _cell(row.quantity), name, repr(mean), repr(std), n, repr(lo),
                                 repr(hi)])
    return buffer.getvalue()


def _page(table: CompareTable, figures: dict[str, list[tuple[str, str, bytes]]]) -> str:
    """``compare.html``: one section per group (its figures once per experiment), from the
    template ``compare.html.j2``, escaped throughout."""
    from toolkit.lab.report.render import page

    drawn: set[str] = set()
    sections = []
    for (exp, label), group in table.groups.items():
        rows = [r for r in table.rows if (r.experiment, r.group) == (exp, label)]
        shown = [FigureItem(*item) for item in figures.get(exp, [])] if exp not in drawn else []
        drawn.add(exp)
        sections.append({
            "experiment": exp, "label": label, "seeds": group["seeds"], "figures": shown,
            "paired": [[r.quantity, *(cell(r, v) for v in (BLOCKED, UNBLOCKED, DIFF))]
                       for r in rows if r.paired],
            "others": [[r.quantity if v == "value" else f"{r.quantity} ({v} only)", cell(r, v)]
                       for r in rows for v in r.values
                       if not r.paired or v not in (BLOCKED, UNBLOCKED)]})
    return page("compare.html.j2", sections=sections, diff=DIFF, blocked=BLOCKED,
                unblocked=UNBLOCKED, n_runs=sum(len(g["seeds"]) for g in table.groups.values()))


def write_compare(table: CompareTable, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``compare.csv`` (long format), ``compare.html`` (tables and figures) and the
    figures as ``compare_figures/<experiment>__<quantity>.png``; returns the CSV's and the
    page's paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "compare.csv"
    atomic_write_text(csv_path, _csv(table), root=out_dir)
    figures = _figures(table)
    folder = inside(out_dir, out_dir / "compare_figures")  # never through a link out
    for items in figures.values():
        for stem, _, png in items:
            atomic_write_bytes(folder / f"{stem}.png", png, root=out_dir)
    html_path = out_dir / "compare.html"
    atomic_write_text(html_path, _page(table, figures), root=out_dir)
    return csv_path, html_path
