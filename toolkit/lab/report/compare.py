"""``toolkit compare``: complete runs pooled over seeds, blocked vs unblocked side by side, the
configs of a sweep in one table and on shared axes.

Every numeric summary value of every complete run below a folder is one row of a long
:class:`pandas.DataFrame` (experiment, config, seed, quantity, variant, value). Runs of the same
experiment whose configs agree apart from ``seed`` (and ``output_dir``) are one config, labelled
by the keys whose values differ between the experiment's configs (``inner_steps=5``); only
distinct seeds are replicates (the latest run of a seed counts, the others are listed as
duplicates). A showcase run contributes one config per child experiment. A summary path that
names a variant (``blocked.q``, ``q_unblocked``: :func:`~toolkit.lab.report.tables.split_variant`)
is the ``blocked`` or ``unblocked`` value of quantity ``q``; ``unblocked − blocked`` (Δ) is paired
by seed (both variants of a seed start from the same random state).

The statistics are one ``groupby`` over experiment, config, quantity and variant
(:meth:`Comparison.stats`: mean, standard deviation with ddof = 1, count, smallest, largest),
written as ``compare.csv``; a value over seeds reads ``mean [smallest, largest]``. The terminal
shows each config's headline quantities (:func:`headline_metrics`); ``compare.html`` every value
and the figures (:mod:`toolkit.lab.report.compare_plots`).
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit._utils.formatting import shown
from toolkit.lab.report.content import FigureItem, safe_name
from toolkit.lab.report.figures import numeric_leaves
from toolkit.lab.report.tables import format_value, split_variant
from toolkit.lab.results.check import readable_runs
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.results.view import RunResults

__all__ = ["DELTA", "DIFF", "HEADLINE", "WIDTH", "Comparison", "Sweep", "cell", "compare_runs",
           "format_table", "headline_metrics", "write_compare"]

#: Widest line of the terminal table.
WIDTH = 120
#: Headline metrics (one figure each, the terminal's rows) per config.
HEADLINE = 3
#: Values this small in both variants are rounding, not a difference.
NOISE = 1e-9
DIFF = "unblocked − blocked"
DELTA = "Δ"
_KEYS = ["experiment", "config", "quantity", "variant"]


@dataclass
class Sweep:
    """How the configs of one experiment differ: ``varying``, the keys whose values differ
    (in order of first appearance); ``constant``, every other key with its one value;
    ``points``, each config's label → its values of the varying keys (as the tables show
    them)."""

    varying: list[str] = field(default_factory=list)
    constant: dict[str, Any] = field(default_factory=dict)
    points: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Comparison:
    """What ``toolkit compare`` pooled: ``values``, one row per number (columns ``experiment,
    config, seed, quantity, variant, value``, Δ rows included as variant :data:`DIFF`);
    ``sweeps``, per experiment, how its configs differ; ``runs``, ``(experiment, config)`` →
    the runs pooled (a showcase's child view for its part), one per seed; ``duplicates``, the runs left out because a later
    run has their seed."""

    values: pd.DataFrame
    sweeps: dict[str, Sweep]
    runs: dict[tuple[str, str], list[RunResults]]
    duplicates: list[Path] = field(default_factory=list)

    @property
    def rows(self) -> list[tuple[str, str, str]]:
        """Every ``(experiment, config, quantity)``, in summary order."""
        return list(dict.fromkeys(self.values[["experiment", "config", "quantity"]]
                                  .itertuples(index=False, name=None)))

    def labels(self, experiment: str) -> list[str]:
        """The configs of ``experiment``, in table order."""
        return list(self.sweeps[experiment].points) if experiment in self.sweeps else []

    def sweep(self, experiment: str) -> Sweep:
        return self.sweeps.get(experiment) or Sweep()

    def seeds(self, experiment: str, config: str) -> list[int]:
        return sorted(int(s) for s in self.values.loc[
            (self.values.experiment == experiment) & (self.values.config == config), "seed"]
            .unique())

    def stats(self) -> pd.DataFrame:
        """Mean, standard deviation (ddof = 1), count, smallest and largest of each
        experiment, config, quantity and variant over the seeds (finite values only)."""
        finite = self.values[np.isfinite(self.values.value)]
        out = finite.groupby(_KEYS, sort=False).value.agg(
            ["mean", "std", "count", "min", "max"])
        return out.rename(columns={"count": "n"})

    def paired(self, experiment: str, config: str) -> list[str]:
        """The quantities of a config with both a blocked and an unblocked value."""
        rows = self.values[(self.values.experiment == experiment)
                           & (self.values.config == config)]
        return list(rows.loc[rows.variant == DIFF, "quantity"].unique())


def _knobs(config: dict[str, Any]) -> dict[str, str]:
    """A config as one flat table of JSON texts: the common keys and the ``params`` (a param
    named like a common key keeps ``params.`` in front)."""
    params = config.get("params") if isinstance(config.get("params"), dict) else {}
    top = {k: v for k, v in config.items() if k not in ("params", "experiment", "seed",
                                                         "output_dir")}
    flat = {**top, **{(f"params.{k}" if k in top else k): v for k, v in params.items()}}
    return {k: json.dumps(v, sort_keys=True) for k, v in flat.items()}


def _shown(text: Any) -> str:
    """A config value (JSON text) as the tables write it: text as it is, else its JSON."""
    if not isinstance(text, str):
        return "—"  # a key this config does not have
    value = json.loads(text)
    return value if isinstance(value, str) else text


def _order(text: Any) -> tuple[int, Any]:
    """Sort key of a config value: numbers by size, before text, before anything else."""
    value = json.loads(text) if isinstance(text, str) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (0, value)
    return (1, value) if isinstance(value, str) else (2, str(text))


def _units(run: RunResults) -> list[RunResults]:
    return [run.child(name) for name in run.children] if run.children else [run]


def _sweep(knobs: pd.DataFrame) -> tuple[Sweep, dict[str, str]]:
    """The :class:`Sweep` of one experiment's configs (a row of ``knobs`` each) and the label
    of each row."""
    varying = [k for k in knobs.columns if knobs[k].nunique(dropna=False) > 1]
    constant = {k: json.loads(knobs[k].iloc[0]) for k in knobs.columns
                if k not in varying and isinstance(knobs[k].iloc[0], str)}
    order = sorted(knobs.index, key=lambda i: [_order(knobs.at[i, k]) for k in varying])
    sweep, labels = Sweep(varying, constant), {}
    for i in order:
        point = {k: _shown(knobs.at[i, k]) for k in varying}
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
    units = []
    for run_dir in readable_runs(root, on_damaged):
        run = RunResults(run_dir)
        if run.status == "complete":
            units += [(run, unit) for unit in _units(run)]
    if latest and units:
        argv = max(units, key=lambda u: str(u[0].meta.get("started") or ""))[0].meta.get("argv")
        units = [u for u in units if u[0].meta.get("argv") == argv]
    runs = pd.DataFrame([{"experiment": unit.experiment, "seed": int(run.meta.get("seed", 0)),
                          "started": str(run.meta.get("started") or ""), "unit": unit,
                          "key": json.dumps(_knobs(unit.config), sort_keys=True)}
                         for run, unit in units],
                        columns=["experiment", "seed", "started", "unit", "key"])
    runs = runs.sort_values("started", kind="stable")
    latest_seed = runs.duplicated(["experiment", "key", "seed"], keep="last")
    duplicates = [u.run_dir for u in runs.loc[latest_seed, "unit"]]
    runs = runs[~latest_seed].copy()
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
    values = values.drop(columns="rank")
    pooled = {(exp, label): list(runs.loc[(runs.experiment == exp) & (runs.config == label),
                                          "unit"])
              for exp, s in sweeps.items() for label in s.points}
    return Comparison(values, sweeps, pooled, duplicates)


# --- text -------------------------------------------------------------------------------------


def _number(value: float, quantity: str, digits: int) -> str:
    return format_value(float(f"{value:.{digits}g}") if digits < 4 else float(value), quantity)


def cell(values: Iterable[float], quantity: str) -> str:
    """Values over seeds as the tables write them: ``mean [smallest, largest] unit``, the range
    with as few digits as tell its ends apart (none when the seeds agree).

    >>> cell([1.0, 3.0], "loss"), cell([0.25, 0.5], "seconds"), cell([2.0], "x")
    ('2 [1, 3]', '375 [250, 500] ms', '2')
    """
    xs = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if not xs.size:
        return ""
    mean = _number(xs.mean(), quantity, 4)
    for digits in (3, 4, 6):
        lo, hi = _number(xs.min(), quantity, digits), _number(xs.max(), quantity, digits)
        if lo != hi:
            break
    if lo == hi:
        return mean
    number, _, unit = mean.partition(" ")
    (a, _, ua), (b, _, ub) = lo.partition(" "), hi.partition(" ")
    if ua == ub == unit:
        return f"{number} [{a}, {b}]" + (f" {unit}" if unit else "")
    return f"{mean} [{lo}, {hi}]"


def cells(table: Comparison, experiment: str, config: str) -> pd.DataFrame:
    """One config's values as text: a row per quantity, a column per variant."""
    rows = table.values[(table.values.experiment == experiment)
                        & (table.values.config == config)]
    grouped = rows.groupby(["quantity", "variant"], sort=False).value
    text = grouped.agg(lambda v: cell(v, v.name[0] if isinstance(v.name, tuple) else ""))
    return text.unstack("variant").reindex(rows.quantity.unique()).fillna("")


def headline_metrics(table: Comparison, experiment: str, config: str | None = None,
                     k: int = HEADLINE) -> list[str]:
    """The first ``k`` quantities of ``experiment`` (summary order; of one ``config``, or of
    any) whose blocked and unblocked values differ in some seed by more than rounding; the
    first paired quantity when none do."""
    v = table.values
    rows = v[(v.experiment == experiment) & ((v.config == config) if config else True)]
    pairs = rows[rows.variant.isin([BLOCKED, UNBLOCKED, DIFF])]
    scale = pairs[pairs.variant != DIFF].groupby("quantity", sort=False).value.agg(
        lambda x: np.nanmax(np.abs(x)) if len(x) else 0.0)
    gap = pairs[pairs.variant == DIFF].groupby("quantity", sort=False).value.agg(
        lambda x: np.nanmax(np.abs(x)))
    paired = [q for q in gap.index if q in scale.index]
    chosen = [q for q in paired if scale[q] > NOISE and gap[q] > NOISE * max(1.0, scale[q])]
    return (chosen or paired[:1])[:k]


def _fits(frame: pd.DataFrame, width: int, indent: str = "  ") -> list[str] | None:
    widths = {c: max(len(str(c)), *map(len, frame[c])) for c in frame.columns}
    text = frame.to_string(index=False, justify="left", formatters={
        c: (lambda x, w=w: x.ljust(w)) for c, w in widths.items()}).splitlines()
    lines = [indent + line.rstrip() for line in text]
    return lines if max(map(len, lines)) <= width else None


def _stacked(frame: pd.DataFrame, width: int) -> list[str]:
    """A table too wide for the terminal: each row on lines of its own."""
    out = []
    for _, row in frame.iterrows():
        first, *rest = [f"{k}: {v}" for k, v in row.items() if v != ""]
        out += textwrap.wrap(first, width, initial_indent="    ", subsequent_indent="      ")
        out += textwrap.wrap("; ".join(rest), width, initial_indent="      ",
                             subsequent_indent="      ", break_on_hyphens=False)
    return out


def format_table(table: Comparison, width: int = WIDTH) -> str:
    """The terminal's view: per experiment, which runs were pooled, and for each config its
    headline quantities, blocked and unblocked side by side with Δ (every value is in
    ``compare.csv`` and ``compare.html``); no line is longer than ``width``."""
    out = textwrap.wrap(f"mean over seeds [smallest, largest]; {DELTA} = {DIFF}, paired by "
                        f"seed; headline quantities only (every value in compare.csv and "
                        f"compare.html)", width)
    for exp, sweep in table.sweeps.items():
        labels = table.labels(exp)
        n_runs = sum(len(table.runs[(exp, label)]) for label in labels)
        head = (f"{exp} · {len(labels)} config{'s' * (len(labels) != 1)}, {n_runs} "
                f"run{'s' * (n_runs != 1)} pooled")
        if sweep.varying:
            head += f"; configs differ in {', '.join(sweep.varying)}"
        out += ["", *textwrap.wrap(head, width)]
        for label in labels:
            text = cells(table, exp, label)
            seeds = ", ".join(map(str, table.seeds(exp, label)))
            if sweep.varying:
                out += textwrap.wrap(f"{label} · seeds {seeds}", width, initial_indent="  ",
                                     subsequent_indent="    ")
            else:
                out += [f"  seeds {seeds}"]
            chosen = headline_metrics(table, exp, label) or list(text.index[:HEADLINE])
            frame = text.reindex(index=chosen, columns=[BLOCKED, UNBLOCKED, DIFF, "value"])
            frame = frame.astype(object).fillna("").rename(columns={DIFF: DELTA}).rename_axis(
                "quantity").reset_index()
            frame = frame.loc[:, (frame != "").any()]
            out += _fits(frame, width, "    ") or _stacked(frame, width)
            if len(text) > len(chosen):
                out.append(f"    + {len(text) - len(chosen)} more in compare.csv and "
                           f"compare.html")
    if table.duplicates:
        out += ["", *textwrap.wrap(
            f"note: {len(table.duplicates)} run(s) with a seed already counted were left out "
            f"(only distinct seeds are replicates): "
            f"{', '.join(shown(p.name) for p in table.duplicates)}", width,
            break_on_hyphens=False)]
    return "\n".join(out)


# --- files ------------------------------------------------------------------------------------


def _csv(table: Comparison) -> str:
    """``compare.csv``: the statistics, long format; a text cell that a spreadsheet would read
    as a formula (``= + - @``, tab, CR first) gets a leading ``'`` (OWASP's advice)."""
    stats = table.stats().reset_index()
    stats["variant"] = stats.variant.replace(DIFF, "unblocked_minus_blocked")
    stats.insert(2, "seeds", [" ".join(map(str, table.seeds(e, c)))
                              for e, c in zip(stats.experiment, stats.config)])
    for column in ("experiment", "config", "quantity"):
        stats[column] = stats[column].map(
            lambda s: "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s)
    stats["std"] = stats["std"].fillna(0.0)
    buffer = io.StringIO()
    stats.to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue()


def _sections(table: Comparison, figures: dict[str, list[FigureItem]]) -> list[dict[str, Any]]:
    """What ``compare.html.j2`` shows of each experiment: the runs pooled, the figures, and
    one table with a row per config and quantity (the varying keys as its first columns)."""
    sections = []
    for exp, sweep in table.sweeps.items():
        rows, pooled = [], []
        for label in table.labels(exp):
            text = cells(table, exp, label)
            seeds = ", ".join(map(str, table.seeds(exp, label)))
            pooled.append((label, seeds, [shown(u.run_dir.name) for u in table.runs[(exp, label)]]))
            for q in text.index:
                rows.append([*sweep.points[label].values(), seeds, q,
                             *(text.at[q, v] if v in text.columns else ""
                               for v in (BLOCKED, UNBLOCKED, DIFF, "value"))])
        columns = [*sweep.varying, "seeds", "quantity", BLOCKED, UNBLOCKED, DELTA, "value"]
        sections.append({"experiment": exp, "sweep": sweep, "rows": rows, "pooled": pooled,
                         "columns": columns, "figures": figures.get(exp, [])})
    return sections


def write_compare(table: Comparison, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``compare.csv``, ``compare.html`` (every value, the runs pooled, the figures) and
    the figures as ``compare_figures/<experiment>__<name>.png``; returns the CSV's and the
    page's paths."""
    from toolkit.lab.report.compare_plots import compare_figures
    from toolkit.lab.report.render import page

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "compare.csv"
    atomic_write_text(csv_path, _csv(table), root=out_dir)
    figures: dict[str, list[FigureItem]] = {}
    folder = inside(out_dir, out_dir / "compare_figures")  # never through a link out
    for exp, name, caption, png in compare_figures(table):
        stem = safe_name(f"{exp}__{name}")
        atomic_write_bytes(folder / f"{stem}.png", png, root=out_dir)
        figures.setdefault(exp, []).append(FigureItem(stem, caption, png))
    html_path = out_dir / "compare.html"
    n_runs = len({u.run_dir for runs in table.runs.values() for u in runs})  # a showcase: 1
    atomic_write_text(html_path, page(
        "compare.html.j2", sections=_sections(table, figures), diff=DIFF, delta=DELTA,
        blocked=BLOCKED, unblocked=UNBLOCKED, n_runs=n_runs, n_groups=len(table.runs)),
        root=out_dir)
    return csv_path, html_path
