"""``toolkit compare``: aggregate complete runs over seeds, blocked vs unblocked side by side.

Runs with the same experiment and the same resolved config apart from ``seed`` (and
``output_dir``) form a group. Only distinct seeds are replicates: when several complete runs of a
group share a seed, the latest one counts and the others are listed as duplicates (``toolkit
compare`` prints them). Each numeric summary value gets mean, standard deviation (ddof=1;
0 for a single run) and count over the group's seeds. Summary paths ``blocked.<q>`` and
``unblocked.<q>`` become the two columns of quantity ``<q>``; other paths (``closed_form.x``,
``n_iter``) have their first part as the variant when it is a table, else ``value``. A showcase
run contributes one group per child experiment.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.report.figures import numeric_leaves
from toolkit.runner.check import readable_runs
from toolkit.runner.results import RunResults, atomic_write_text

__all__ = ["CompareRow", "CompareTable", "compare_runs", "format_table", "write_compare"]


@dataclass
class CompareRow:
    """One quantity of one group: per variant ``(mean, std, n)``."""

    experiment: str
    group: str
    quantity: str
    values: dict[str, list[float]] = field(default_factory=dict)

    def stats(self, variant: str) -> tuple[float, float, int]:
        xs = [x for x in self.values.get(variant, []) if x is not None]
        n = len(xs)
        if n == 0:
            return math.nan, math.nan, 0
        mean = math.fsum(xs) / n
        if n == 1:
            return mean, 0.0, 1
        var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
        return mean, math.sqrt(var), n


@dataclass
class CompareTable:
    rows: list[CompareRow]
    variants: list[str]
    groups: dict[tuple[str, str], dict[str, Any]]  # (experiment, group) → {"seeds", "runs"}


def _split(path: str, summary: Mapping[str, Any]) -> tuple[str, str]:
    head, _, rest = path.partition(".")
    if rest and isinstance(summary.get(head), Mapping):
        return head, rest
    return "value", path


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
    handed to ``on_damaged`` and left out (:func:`~toolkit.runner.check.readable_runs`)."""
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
        for unit in by_seed.values():
            summary = unit.summary
            for path, value in numeric_leaves(summary).items():
                variant, quantity = _split(path, summary)
                if variant not in variants:
                    variants.append(variant)
                row = rows.setdefault((exp, label, quantity), CompareRow(exp, label, quantity))
                row.values.setdefault(variant, []).append(value)
    head = [v for v in ("blocked", "unblocked") if v in variants]
    ordered = head + [v for v in variants if v not in head]
    return CompareTable(list(rows.values()), ordered, table_groups)


def _cell(row: CompareRow, variant: str) -> str:
    mean, std, n = row.stats(variant)
    if n == 0:
        return ""
    return f"{mean:.4g} ± {std:.2g}" if n > 1 else f"{mean:.4g}"


def format_table(table: CompareTable) -> str:
    """A plain-text table: experiment, group, n, quantity, one column per variant."""
    columns = ["experiment", "config", "n", "quantity", *table.variants]
    lines = [columns]
    for row in table.rows:
        n = len(table.groups[(row.experiment, row.group)]["seeds"])
        lines.append([row.experiment, row.group, str(n), row.quantity,
                      *(_cell(row, v) for v in table.variants)])
    widths = [max(len(r[i]) for r in lines) for i in range(len(columns))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines]
    out.insert(1, "-" * len(out[0]))
    for (exp, label), group in table.groups.items():
        if group.get("duplicates"):
            out.append(f"note: {exp} [{label}]: {len(group['duplicates'])} more run(s) with a "
                       f"seed already counted were left out (only distinct seeds are "
                       f"replicates): {', '.join(group['duplicates'])}")
    return "\n".join(out)


def _figure_png(table: CompareTable) -> bytes | None:
    from toolkit.report.figures import panels, plt, wrap
    from toolkit.style import variant_style

    pairs = [r for r in table.rows if r.values.get("blocked") and r.values.get("unblocked")]
    if not pairs:
        return None
    # one panel per (experiment, quantity); bars per group
    by_panel: dict[tuple[str, str], list[CompareRow]] = {}
    for row in pairs:
        by_panel.setdefault((row.experiment, row.quantity), []).append(row)
    fig, axes = panels(len(by_panel), 3, 4.6, 3.6)
    for ax, ((exp, quantity), rows) in zip(axes, by_panel.items()):
        x = list(range(len(rows)))
        for offset, variant in ((-0.2, "blocked"), (0.2, "unblocked")):
            stats = [r.stats(variant) for r in rows]
            ax.bar([i + offset for i in x], [s[0] for s in stats], width=0.38,
                   yerr=[s[1] for s in stats], capsize=3, label=variant,
                   color=variant_style(variant)["color"])
        # whole labels, wrapped: groups that differ only at the end must stay apart
        ax.set_xticks(x, [wrap(r.group, 22) for r in rows], fontsize=6)
        ax.set_title(wrap(f"{exp}: {quantity}", 40), fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("blocked vs unblocked: mean ± std over seeds", fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def write_compare(table: CompareTable, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``compare.csv`` (long format) and ``compare.html`` (pivot table + figure)."""
    from toolkit.report.render import CSS

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["experiment", "config", "seeds", "quantity", "variant", "mean", "std", "n"])
    for row in table.rows:
        seeds = " ".join(map(str, table.groups[(row.experiment, row.group)]["seeds"]))
        for variant in table.variants:
            mean, std, n = row.stats(variant)
            if n:
                writer.writerow([row.experiment, row.group, seeds, row.quantity, variant,
                                 repr(mean), repr(std), n])
    csv_path = out_dir / "compare.csv"
    atomic_write_text(csv_path, buffer.getvalue())

    head = "".join(f"<th>{html.escape(c)}</th>" for c in
                   ["experiment", "config", "seeds", "quantity", *table.variants])
    body = []
    for row in table.rows:
        seeds = ", ".join(map(str, table.groups[(row.experiment, row.group)]["seeds"]))
        cells = [row.experiment, row.group, seeds, row.quantity,
                 *(_cell(row, v) for v in table.variants)]
        body.append("<tr>" + "".join(
            f'<td{" class=num" if i > 3 else ""}>{html.escape(c)}</td>'
            for i, c in enumerate(cells)) + "</tr>")
    png = _figure_png(table)
    img = (f'<img alt="blocked vs unblocked" src="data:image/png;base64,'
           f'{base64.b64encode(png).decode("ascii")}">' if png else "")
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>compare</title><style>{CSS}</style></head><body>\n"
            f"<h1>Comparison of {sum(len(g['seeds']) for g in table.groups.values())} runs "
            f"in {len(table.groups)} group(s)</h1>\n"
            f"<p>mean ± standard deviation over seeds (ddof = 1)</p>\n{img}\n"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>\n"
            f"</body></html>\n")
    html_path = out_dir / "compare.html"
    atomic_write_text(html_path, page)
    return csv_path, html_path
