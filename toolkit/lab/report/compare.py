"""``toolkit compare``: aggregate complete runs over seeds, blocked vs unblocked side by side,
and the configs of a sweep in one table and on shared axes.

Runs with the same experiment and the same resolved config apart from ``seed`` (and
``output_dir``) form a group: one config, or one point of a sweep. Only distinct seeds are
replicates: when several complete runs of a group share a seed, the latest one counts and the
others are listed as duplicates (``toolkit compare`` prints them). A showcase run contributes
one group per child experiment.

Each numeric summary value is a row of its group. A path that names a variant (``blocked.q``,
``part.unblocked.q``, ``q_blocked``; see :func:`~toolkit.lab.report.tables.split_variant`) is the
``blocked`` or ``unblocked`` column of quantity ``q``; the ``unblocked − blocked`` column (Δ)
holds the difference paired by seed (both variants of a seed start from the same random state).
Every other value (``closed_form.x``, ``n_iter``) is listed with its whole path. A value over
seeds reads ``mean [smallest, largest]``: the mean and the range over the seeds, as the reports
give them.

An experiment with several configs (a sweep, or configs run one after the other) is one table
(:func:`sweep_table`): a row per config, the config keys whose values differ between them as
its first columns (the others said once above it: :class:`Sweep`), then blocked, unblocked and
Δ of each quantity. Its figures put every config on the same axes: a panel per headline metric
with a line per config, and a panel per logged curve with a line per config and variant
(:mod:`toolkit.lab.report.compare_plots`).

Outputs: the terminal table (:func:`format_table`, at most :data:`WIDTH` characters a line),
``compare.csv`` (every value, long format: mean, standard deviation with ddof = 1, count,
smallest, largest; a cell that would read as a spreadsheet formula is neutralised) and
``compare.html`` (every table, and the figures, also written to ``compare_figures/``). The
headline metrics of an experiment are its first :data:`HEADLINE` quantities, in summary order,
whose blocked and unblocked values differ in some seed by more than rounding (see
:func:`headline_metrics`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.lab.report.compare_plots import point_style
from toolkit.lab.report.content import FigureItem, safe_name
from toolkit.lab.report.figures import numeric_leaves
from toolkit.lab.report.tables import format_value, split_variant
from toolkit.lab.results.check import readable_runs
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults
from toolkit.lab.style import REPORT_DPI

__all__ = ["HEADLINE", "WIDTH", "CompareRow", "CompareTable", "Sweep", "cell", "compare_runs",
           "format_table", "headline_metrics", "metric_figure", "shown_value", "sweep_table",
           "write_compare"]

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
class Sweep:
    """How the configs of one experiment's groups differ: ``varying``, the keys (common keys
    and params) whose values differ between its groups, in order; ``constant``, every other
    key with its one value; ``points``, each group's values of the varying keys."""

    varying: list[str] = field(default_factory=list)
    constant: dict[str, Any] = field(default_factory=dict)
    points: dict[str, dict[str, Any]] = field(default_factory=dict)  # group label → values


@dataclass
class CompareTable:
    """What ``toolkit compare`` found: a row per quantity of each group, the groups (``(experiment,
    label)`` → ``{"seeds", "runs", "duplicates", "units"}``, an experiment's groups in the
    order of their values) and, per experiment, how its groups differ (:class:`Sweep`)."""

    rows: list[CompareRow]
    variants: list[str]
    groups: dict[tuple[str, str], dict[str, Any]]
    sweeps: dict[str, Sweep] = field(default_factory=dict)

    def sweep(self, experiment: str) -> Sweep:
        """The :class:`Sweep` of ``experiment`` (an empty one when it has a single group)."""
        return self.sweeps.get(experiment) or Sweep()

    def labels(self, experiment: str) -> list[str]:
        """The group labels of ``experiment``, in table order."""
        return [label for exp, label in self.groups if exp == experiment]


def _units(run: RunResults) -> list[RunResults]:
    if run.children:
        return [run.child(name) for name in run.children]
    return [run]


def _knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's config as one flat table of the values that can tell groups apart: the common
    keys and the ``params`` (a param named like a common key keeps ``params.`` in front)."""
    params = config.get("params")
    top = {k: v for k, v in config.items() if k not in ("params", "experiment")}
    if not isinstance(params, Mapping):
        return top
    return {**top, **{(f"params.{k}" if k in top else k): v for k, v in params.items()}}


_MISSING = object()  # a key that a group's config does not have


def shown_value(value: Any) -> str:
    """A config value as the tables write it: text as it is, anything else as JSON
    (``[1, 2]``, ``true``); ``—`` for a key a config does not have."""
    if value is _MISSING:
        return "—"
    return value if isinstance(value, str) else json.dumps(value)


def _order(value: Any) -> tuple[int, Any]:
    """Sort key of a config value: numbers by size, before text, before everything else."""
    if isinstance(value, bool) or value is _MISSING:
        return (2, str(value))
    if isinstance(value, (int, float)):
        return (0, value) if value == value else (2, "nan")
    return (1, value) if isinstance(value, str) else (2, json.dumps(value, sort_keys=True))


def _sweep(knobs: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """The keys whose values differ between ``knobs`` (in order of first appearance) and the
    others with their one value."""
    keys = list(dict.fromkeys(k for flat in knobs for k in flat))
    varying = [k for k in keys if len({json.dumps(f.get(k, "\0missing"), sort_keys=True)
                                       for f in knobs}) > 1]
    constant = {k: knobs[0][k] for k in keys if k not in varying}
    return varying, constant


def _label(point: Mapping[str, Any]) -> str:
    parts = [f"{k}={shown_value(v)}" for k, v in point.items()]
    return ", ".join(parts) or "default"


def compare_runs(root: str | Path, *, on_damaged: Any = None) -> CompareTable:
    """Aggregate every complete run below ``root`` (see the module docstring); a damaged run is
    handed to ``on_damaged`` and left out (:func:`~toolkit.lab.results.check.readable_runs`)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for run_dir in readable_runs(root, on_damaged):
        run = RunResults(run_dir)
        if run.status != "complete":
            continue
        for unit in _units(run):
            config = {k: v for k, v in unit.config.items() if k not in ("seed", "output_dir")}
            key = (unit.experiment, json.dumps(config, sort_keys=True))
            group = found.setdefault(key, {"config": config, "runs": []})
            group["runs"].append(unit)
    # each group is labelled by the config values that differ between the experiment's groups
    by_exp: dict[str, list[dict[str, Any]]] = {}
    for (exp, _), group in found.items():
        group["knobs"] = _knobs(group["config"])
        by_exp.setdefault(exp, []).append(group)
    sweeps: dict[str, Sweep] = {}
    ordered: list[tuple[str, dict[str, Any]]] = []
    for exp in sorted(by_exp):
        varying, constant = _sweep([g["knobs"] for g in by_exp[exp]])
        sweep = sweeps[exp] = Sweep(varying, constant)
        for group in by_exp[exp]:
            group["point"] = {k: group["knobs"].get(k, _MISSING) for k in varying}
        for group in sorted(by_exp[exp], key=lambda g: [_order(v) for v in g["point"].values()]):
            label = _label(group["point"])
            while label in sweep.points:  # two values that read the same ("1" and 1)
                label += "'"
            sweep.points[label] = {k: shown_value(v) for k, v in group["point"].items()}
            ordered.append((label, group))
    table_groups: dict[tuple[str, str], dict[str, Any]] = {}
    rows: dict[tuple[str, str, str], CompareRow] = {}
    variants: list[str] = []
    for label, group in ordered:
        exp = group["runs"][0].experiment
        by_seed: dict[int, RunResults] = {}
        duplicates = []
        for unit in sorted(group["runs"], key=lambda u: str(u.meta.get("started") or "")):
            seed = int(unit.meta.get("seed", 0))
            if seed in by_seed:
                duplicates.append(str(by_seed[seed].run_dir))
            by_seed[seed] = unit  # the latest run of a seed counts
        units = [by_seed[seed] for seed in sorted(by_seed)]
        table_groups[(exp, label)] = {"seeds": sorted(by_seed), "duplicates": duplicates,
                                      "runs": [str(u.run_dir) for u in units], "units": units}
        for seed in sorted(by_seed):
            for path, value in numeric_leaves(by_seed[seed].summary).items():
                variant, quantity = split_variant(path)
                variant = variant or "value"
                if variant not in variants:
                    variants.append(variant)
                row = rows.setdefault((exp, label, quantity), CompareRow(exp, label, quantity))
                row.add(variant, seed, value)
    head = [v for v in (BLOCKED, UNBLOCKED) if v in variants]
    ordered_variants = head + [v for v in variants if v not in head]
    return CompareTable(list(rows.values()), ordered_variants, table_groups, sweeps)


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


#: The column of the paired difference in the sweep tables (the page says what it is).
DELTA = "Δ"


def sweep_rows(table: CompareTable, experiment: str) -> tuple[list[str], list[str]]:
    """The quantities of ``experiment``'s sweep table, in summary order: those with both
    variants (three columns each: blocked, unblocked, Δ) and the other values (one column
    each: ``quantity`` or ``quantity (variant)``)."""
    paired: dict[str, None] = {}
    others: dict[str, None] = {}
    for row in table.rows:
        if row.experiment != experiment:
            continue
        if row.paired:
            paired[row.quantity] = None
    for row in table.rows:
        if row.experiment == experiment and row.quantity not in paired:
            for variant in row.values:
                others[row.quantity if variant == "value" else
                       f"{row.quantity} ({variant})"] = None
    return list(paired), list(others)


def _other_cell(rows: Mapping[str, CompareRow], name: str) -> str:
    quantity, _, variant = name.partition(" (")
    row = rows.get(quantity)
    return cell(row, variant.rstrip(")") or "value") if row is not None else ""


def sweep_table(table: CompareTable, experiment: str) -> dict[str, Any]:
    """``experiment``'s groups as one table, a row per sweep point: ``params`` (the varying
    keys), ``quantities`` (paired), ``others``, and ``rows``, each ``{"point": [values of the
    params], "seeds": "0, 1", "paired": [[blocked, unblocked, Δ] per quantity], "others":
    [cell per other value]}``; cells read ``mean [smallest, largest]`` over the seeds."""
    sweep = table.sweep(experiment)
    quantities, others = sweep_rows(table, experiment)
    rows = []
    for label in table.labels(experiment):
        mine = {r.quantity: r for r in table.rows if (r.experiment, r.group) == (experiment,
                                                                              label)}
        point = sweep.points.get(label, {})
        rows.append({
            "point": [point.get(k, "—") for k in sweep.varying],
            "seeds": ", ".join(map(str, table.groups[(experiment, label)]["seeds"])),
            "paired": [[cell(mine[q], v) if q in mine else "" for v in (BLOCKED, UNBLOCKED, DIFF)]
                       for q in quantities],
            "others": [_other_cell(mine, name) for name in others]})
    return {"params": list(sweep.varying), "constant": {k: shown_value(v) for k, v in
                                                        sweep.constant.items()},
            "quantities": quantities, "others": others, "rows": rows}


def _columns(blocks: list[tuple[list[str], list[list[list[str]]]]], width: int
             ) -> list[str] | None:
    """Columns of text side by side, two spaces apart and indented by two, no line longer
    than ``width``. A block is ``(its header lines, its columns)``, a column a list of cells
    (each a list of lines, the first cell its header); a block's header is wrapped to the
    block's width. ``None`` when the first block alone is wider than ``width``."""
    widths = [[max(len(line) for c in col for line in c) for col in cols] for _, cols in blocks]
    spans = [sum(w) + 2 * (len(w) - 1) for w in widths]
    if 2 + spans[0] > width:
        return None
    chunks: list[list[int]] = [[0]]  # the first block (the keys) starts every chunk
    used = 2 + spans[0]
    for i in range(1, len(blocks)):
        if used + 2 + spans[i] > width and len(chunks[-1]) > 1:
            chunks.append([0])
            used = 2 + spans[0]
        if used + 2 + spans[i] > width:
            return None
        chunks[-1].append(i)
        used += 2 + spans[i]
    out: list[str] = []
    for chunk in chunks:
        heads = [_wrap([blocks[i][0][0]], spans[i]) if blocks[i][0] else [] for i in chunk]
        for k in range(max(len(h) for h in heads)):
            parts = [(h[k] if k < len(h) else "").ljust(spans[i]) for h, i in zip(heads, chunk)]
            out.append(("  " + "  ".join(parts)).rstrip())
        n_cells = len(blocks[0][1][0])
        for r in range(n_cells):
            cells = [(c[r], w) for i in chunk for c, w in zip(blocks[i][1], widths[i])]
            for k in range(max(len(c) for c, _ in cells)):
                out.append(("  " + "  ".join((c[k] if k < len(c) else "").ljust(w)
                                             for c, w in cells)).rstrip())
        out.append("")
    return out[:-1]


def _sweep_lines(table: CompareTable, experiment: str, width: int) -> list[str]:
    """One experiment's sweep as one table: a row per sweep point, its varying keys and seeds
    first, then blocked, unblocked and Δ of each quantity; split into column chunks (the keys
    repeated) to stay within ``width``."""
    data = sweep_table(table, experiment)
    n = len(data["rows"])
    seeds = {r["seeds"] for r in data["rows"]}
    head = (f"{experiment} · {n} configs" + (f" × seeds {next(iter(seeds))}" if len(seeds) == 1
                                             else ""))
    same = ", ".join(f"{k}={v}" for k, v in data["constant"].items())
    out = textwrap.wrap(head + (f"; the same in all: {same}" if same else ""), width,
                        subsequent_indent="  ", break_on_hyphens=False)
    if not data["quantities"]:
        return [*out, "  (no quantity with both a blocked and an unblocked value)"]
    for split in (False, True):  # ranges beside the means, else below them
        def lines(text: str, split: bool = split) -> list[str]:
            mean, _, rest = text.partition(" [")
            return [mean, f"[{rest}"] if split and rest else [text]
        keys = [[[name], *([v] for v in (r["point"][i] for r in data["rows"]))]
                for i, name in enumerate(data["params"])]
        keys.append([["seeds"], *([r["seeds"]] for r in data["rows"])])
        blocks = [([], keys)]
        for q, quantity in enumerate(data["quantities"]):
            cols = [[[label], *(lines(r["paired"][q][v]) for r in data["rows"])]
                    for v, label in enumerate((BLOCKED, UNBLOCKED, DELTA))]
            blocks.append(([quantity], cols))
        text = _columns(blocks, width)
        if text is not None:
            return [*out, *text]
    for r in data["rows"]:  # each sweep point on lines of its own
        point = ", ".join(f"{k}={v}" for k, v in zip(data["params"], r["point"]))
        out += textwrap.wrap(f"{point} · seeds {r['seeds']}", width, initial_indent="  ",
                             subsequent_indent="    ", break_on_hyphens=False)
        for quantity, cells in zip(data["quantities"], r["paired"]):
            out += textwrap.wrap(f"{quantity}: " + "; ".join(
                f"{v} {c}" for v, c in zip((BLOCKED, UNBLOCKED, DELTA), cells)), width,
                initial_indent="    ", subsequent_indent="      ", break_on_hyphens=False)
    return out


def format_table(table: CompareTable, width: int = WIDTH) -> str:
    """The terminal table: per experiment with one config, a row per quantity, blocked and
    unblocked side by side with their paired difference; per experiment with several (a
    sweep), one table with a row per config and its varying keys as columns. Values read
    ``mean [smallest, largest]`` over seeds; no line is longer than ``width``."""
    out = textwrap.wrap("mean over seeds [smallest, largest]; unblocked − blocked (Δ) paired "
                        "by seed", width)
    for experiment in dict.fromkeys(exp for exp, _ in table.groups):
        labels = table.labels(experiment)
        if len(labels) > 1:
            out += ["", *_sweep_lines(table, experiment, width)]
            others = len(sweep_rows(table, experiment)[1])
            if others:
                out += textwrap.wrap(f"+ {others} other value{'s' * (others != 1)} in "
                                     f"compare.csv and compare.html", width,
                                     initial_indent="  ")
        else:
            out += ["", *_group_lines(table, (experiment, labels[0]), width)]
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


def metric_figure(rows: list[CompareRow], experiment: str, quantity: str, *,
                  configs: Sequence[str] | None = None) -> Any:
    """One headline metric in one panel: blocked on the left, unblocked on the right, the y
    axis spanning the data, not zero.

    One config (one row): each seed's two values joined by a line (a paired difference), the
    means as short bars across; the title gives the paired difference, also relative to the
    blocked mean. Several configs (a row each, ``configs``: every config's label, in the
    comparison's order): each config is a line joining its blocked and unblocked means, in its
    colour and marker (:func:`~toolkit.lab.report.compare_plots.point_style`), with each seed's
    pair as a thin line behind it; every config shares the one y axis. Returns the
    ``Figure``."""
    from toolkit.lab.report.figures import panels, plt, wrap
    from toolkit.lab.style import COLORS, place_legend

    if len(rows) > 1:
        order = list(configs or [r.group for r in rows])
        fig, ax = plt.subplots(figsize=(5.2, 4.2), layout="constrained")
        step = min(0.08, 0.5 / len(rows))  # side by side: no config hides another's marker
        for k, row in enumerate(rows):
            style = point_style(order.index(row.group) if row.group in order else k)
            dx = (k - (len(rows) - 1) / 2) * step
            blocked = dict(zip(row.seeds[BLOCKED], row.values[BLOCKED]))
            for seed, u in zip(row.seeds[UNBLOCKED], row.values[UNBLOCKED]):
                if seed in blocked:
                    ax.plot([dx, 1 + dx], [blocked[seed], u], color=style["color"], lw=0.7,
                            alpha=0.35, zorder=1)
            means = [row.interval(BLOCKED)[0], row.interval(UNBLOCKED)[0]]
            ax.plot([dx, 1 + dx], means, lw=2.0, markersize=6, zorder=3,
                    label=f"{row.group}: {DELTA} {cell(row, DIFF)}", **style)
        ax.set_xlim(-0.6, 1.6)
        ax.set_xticks([0, 1], [BLOCKED, UNBLOCKED], fontsize=9)
        for tick, variant in zip(ax.get_xticklabels(), (BLOCKED, UNBLOCKED)):
            tick.set_color(COLORS[variant])
        ax.margins(y=0.15)
        ax.tick_params(axis="y", labelsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(wrap(f"{experiment}: {quantity}", 60), fontsize=10)
        place_legend(ax, fontsize=9, title=f"{DELTA} = unblocked − blocked (mean [range])",
                     title_fontsize=9, outside="below")
        return fig
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
    """experiment → its figures as ``(file stem, caption, PNG)``: one per headline metric,
    and for a sweep the logged curves of every config (:mod:`.compare_plots`)."""
    from toolkit.lab.report.compare_plots import curve_figure, curve_names

    out: dict[str, list[tuple[str, str, bytes]]] = {}
    for experiment in dict.fromkeys(exp for exp, _ in table.groups):
        labels = table.labels(experiment)
        for quantity in headline_metrics(table, experiment):
            rows = [r for r in table.rows
                    if r.experiment == experiment and r.quantity == quantity and r.paired]
            stem = safe_name(f"{experiment}__{quantity}")
            if len(labels) > 1:
                caption = (f"{experiment}: {quantity} of every config on one axis: a thick "
                           f"line joins a config's blocked and unblocked means, thin lines "
                           f"the two values of each seed.")
            else:
                caption = (f"{experiment}: {quantity}, blocked and unblocked in each seed (a "
                           f"line joins the two values of one seed; bars: the means).")
            png = _png(metric_figure(rows, experiment, quantity, configs=labels))
            out.setdefault(experiment, []).append((stem, caption, png))
        if len(labels) > 1:
            groups = {label: table.groups[(experiment, label)].get("units", [])
                      for label in labels}
            names = curve_names(groups)
            if names:
                caption = (f"{experiment}: the logged curves of every config on the same "
                           f"axes, a panel per metric: colour and marker say the config, a "
                           f"solid line blocked, a dashed line unblocked (the mean over the "
                           f"seeds; the band, their range).")
                png = _png(curve_figure(groups, experiment, names))
                out.setdefault(experiment, []).append(
                    (safe_name(f"{experiment}__curves"), caption, png))
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
    """``compare.html`` from the template ``compare.html.j2``, escaped throughout: per
    experiment with one config, its tables (a row per quantity); per experiment with several,
    one table (:func:`sweep_table`: a row per config, the keys that differ as columns, the
    others said once above it); each experiment's figures once."""
    from toolkit.lab.report.render import page

    sections = []
    for exp in dict.fromkeys(e for e, _ in table.groups):
        labels = table.labels(exp)
        shown = [FigureItem(*item) for item in figures.get(exp, [])]
        if len(labels) > 1:
            sweep = sweep_table(table, exp)
            runs = sum(len(table.groups[(exp, label)]["seeds"]) for label in labels)
            sections.append({"experiment": exp, "label": "default", "figures": shown,
                             "sweep": sweep, "n_configs": len(labels), "n_runs": runs})
            continue
        label = labels[0]
        rows = [r for r in table.rows if (r.experiment, r.group) == (exp, label)]
        sections.append({
            "experiment": exp, "label": label, "seeds": table.groups[(exp, label)]["seeds"],
            "figures": shown, "sweep": None,
            "paired": [[r.quantity, *(cell(r, v) for v in (BLOCKED, UNBLOCKED, DIFF))]
                       for r in rows if r.paired],
            "others": [[r.quantity if v == "value" else f"{r.quantity} ({v} only)", cell(r, v)]
                       for r in rows for v in r.values
                       if not r.paired or v not in (BLOCKED, UNBLOCKED)]})
    return page("compare.html.j2", sections=sections, diff=DIFF, delta=DELTA, blocked=BLOCKED,
                unblocked=UNBLOCKED, n_runs=sum(len(g["seeds"]) for g in table.groups.values()),
                n_groups=len(table.groups))


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
