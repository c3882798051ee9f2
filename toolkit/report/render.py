"""``report.html`` (one self-contained file, images embedded) and ``report.md`` of a run."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.report.figures import default_figures, plt
from toolkit.runner.results import RunResults, atomic_write_bytes, atomic_write_text

__all__ = ["ReportFigure", "collect_figures", "flatten", "format_value", "write_report"]

DPI = 100
_SAFE = re.compile(r"[^A-Za-z0-9_.\-]+")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}
img{max-width:100%;border:1px solid #eee;margin:.3em 0}
.status-complete{color:#176317}.status-failed,.status-interrupted{color:#a31515}
.note{color:#a31515}
figure{margin:0 0 1em}figcaption{font-size:.8em;color:#555}
"""


@dataclass
class ReportFigure:
    """A rendered figure: file name under ``figures/``, caption, section, PNG bytes."""

    name: str
    caption: str
    section: str
    png: bytes = field(repr=False)


def format_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "—"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        text = json.dumps(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return str(value)


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts → ``{"a.b.c": leaf}``."""
    out: dict[str, Any] = {}
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif prefix:
        out[prefix] = tree
    return out


def variant_table(tree: Mapping[str, Any]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    """Split a summary/costs dict into a side-by-side table and the rest.

    Returns ``(columns, rows, rest)``: columns are ``["quantity", "blocked", "unblocked",
    "unblocked − blocked"]`` for the keys under ``blocked``/``unblocked``; ``rest`` holds the
    other top-level entries, flattened.
    """
    blocked = flatten(tree.get("blocked", {})) if isinstance(tree.get("blocked"), Mapping) else {}
    unblocked = (flatten(tree.get("unblocked", {}))
                 if isinstance(tree.get("unblocked"), Mapping) else {})
    names = list(dict.fromkeys([*blocked, *unblocked]))
    rows = []
    for name in names:
        b, u = blocked.get(name), unblocked.get(name)
        diff = ""
        if (isinstance(b, (int, float)) and isinstance(u, (int, float))
                and not isinstance(b, bool) and not isinstance(u, bool)):
            diff = format_value(u - b)
        rows.append([name, format_value(b), format_value(u), diff])
    rest = flatten({k: v for k, v in tree.items()
                    if not (k in ("blocked", "unblocked") and isinstance(v, Mapping))})
    return ["quantity", "blocked", "unblocked", "unblocked − blocked"], rows, rest


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def _experiment_figures(view: RunResults, experiment: str, problems: list[str]
                        ) -> dict[str, Any]:
    try:
        from toolkit.runner.registry import load_experiment

        exp = load_experiment(experiment)
    except Exception as err:
        problems.append(f"{experiment}: experiment figures skipped ({type(err).__name__}: {err})")
        return {}
    if exp.figures is None:
        return {}
    try:
        figures = exp.figures(view) or {}
        if not isinstance(figures, Mapping):
            raise TypeError(f"figures() must return a dict name → Figure, got "
                            f"{type(figures).__name__}")
        return dict(figures)
    except Exception as err:
        last = traceback.extract_tb(err.__traceback__)[-1]
        problems.append(f"{experiment}: figures() failed: {type(err).__name__}: {err} "
                        f"({Path(last.filename).name}:{last.lineno})")
        plt.close("all")
        return {}


def collect_figures(run: RunResults, problems: list[str]) -> list[ReportFigure]:
    """Experiment figures then default figures, for the run or for each child of a showcase."""
    views: list[tuple[str, RunResults]] = [("", run)]
    if run.children:
        views += [(name, run.child(name)) for name in run.children]
    out: list[ReportFigure] = []
    for section, view in views:
        prefix = f"{section}__" if section else ""
        custom = _experiment_figures(view, view.experiment, problems)
        for name, fig in custom.items():
            out.append(ReportFigure(_SAFE.sub("_", f"{prefix}{name}"), name, section, _png(fig)))
        if run.children and not section:
            continue  # the parent of children: its metrics are the children's
        try:
            defaults = default_figures(view)
        except Exception as err:
            problems.append(f"{section or view.experiment}: default figures failed: "
                            f"{type(err).__name__}: {err}")
            plt.close("all")
            defaults = {}
        for name, fig in defaults.items():
            out.append(ReportFigure(_SAFE.sub("_", f"{prefix}{name}"), name, section, _png(fig)))
    return out


# ----------------------------------------------------------------------------- HTML


def _html_table(columns: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i else ""
            cells.append(f"<td{cls}>{html.escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _tables(tree: Mapping[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    columns, rows, rest = variant_table(tree)
    tables = []
    if rows:
        tables.append((columns, rows))
    if rest:
        tables.append((["quantity", "value"], [[k, format_value(v)] for k, v in rest.items()]))
    return tables


def _sections(run: RunResults) -> list[tuple[str, RunResults]]:
    if run.children:
        return [(name, run.child(name)) for name in run.children]
    return [("", run)]


_META_KEYS = ("status", "experiment", "run_id", "seed", "device", "dtype", "disable_blocks",
              "started", "ended", "duration_s", "blocks_seen", "versions", "error", "warnings")


def _html_figure(fig: ReportFigure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (f'<figure><img alt="{html.escape(fig.name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>")


def render_html(run: RunResults, figures: list[ReportFigure], problems: list[str]) -> str:
    meta = run.meta
    status = str(meta.get("status", "unknown"))
    title = f"{run.experiment or 'run'} — {run.run_dir.name}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p>status: <b class="status-{html.escape(status)}">{html.escape(status)}</b>'
        f" · seed {html.escape(str(meta.get('seed', '')))}"
        f" · device {html.escape(str(meta.get('device', '')))}"
        f" · dtype {html.escape(str(meta.get('dtype', '')))}"
        f" · {html.escape(format_value(meta.get('duration_s')))} s</p>",
    ]
    if meta.get("error"):
        parts.append(f'<p class="note">error: {html.escape(str(meta["error"]))}</p>')
    for problem in problems:
        parts.append(f'<p class="note">{html.escape(problem)}</p>')
    for warning in meta.get("warnings") or []:
        parts.append(f'<p class="note">warning: {html.escape(str(warning))}</p>')
    if run.children:
        for fig in (f for f in figures if f.section == ""):
            parts.append(_html_figure(fig))
    for section, view in _sections(run):
        if section:
            parts.append(f"<h2>{html.escape(section)}</h2>")
            if view.params:
                params = ", ".join(f"{k}={format_value(v)}" for k, v in view.params.items())
                parts.append(f"<p>params: <code>{html.escape(params)}</code></p>")
        level = "h3" if section else "h2"
        summary_tables = _tables(view.summary)
        if summary_tables:
            parts.append(f"<{level}>Summary</{level}>")
            parts += [_html_table(c, r) for c, r in summary_tables]
        for fig in (f for f in figures if f.section == section):
            parts.append(_html_figure(fig))
        cost_tables = _tables(view.costs)
        if cost_tables:
            parts.append(f"<{level}>Costs (measured on this machine)</{level}>")
            parts += [_html_table(c, r) for c, r in cost_tables]
    if run.children:
        top_costs = {k: v for k, v in run.costs.items() if k not in run.children}
        if top_costs:
            parts.append("<h2>Costs of the whole run</h2>")
            parts += [_html_table(c, r) for c, r in _tables(top_costs)]
    config_path = run.run_dir / "config.toml"
    if config_path.exists():
        parts.append("<h2>Config</h2>")
        parts.append(f"<pre>{html.escape(config_path.read_text(encoding='utf-8'))}</pre>")
    parts.append("<h2>Meta</h2>")
    shown = {k: meta.get(k) for k in _META_KEYS if k in meta}
    parts.append(f"<pre>{html.escape(json.dumps(shown, indent=2))}</pre>")
    if meta.get("traceback"):
        parts.append("<h3>Traceback</h3>")
        parts.append(f"<pre>{html.escape(str(meta['traceback']))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_markdown(run: RunResults, figures: list[ReportFigure], problems: list[str]) -> str:
    meta = run.meta
    lines = [f"# {run.experiment or 'run'} — {run.run_dir.name}", "",
             f"status: **{meta.get('status', 'unknown')}** · seed {meta.get('seed', '')} · "
             f"device {meta.get('device', '')} · dtype {meta.get('dtype', '')} · "
             f"{format_value(meta.get('duration_s'))} s", ""]
    if meta.get("error"):
        lines += [f"error: `{meta['error']}`", ""]
    lines += [f"- {p}" for p in problems]
    lines += [f"- warning: {w}" for w in meta.get("warnings") or []]
    if run.children:
        lines += [f"![{f.caption}](figures/{f.name}.png)\n" for f in figures if f.section == ""]
    for section, view in _sections(run):
        if section:
            lines += [f"## {section}", ""]
            if view.params:
                params = ", ".join(f"{k}={format_value(v)}" for k, v in view.params.items())
                lines += [f"params: `{params}`", ""]
        level = "###" if section else "##"
        summary_tables = _tables(view.summary)
        if summary_tables:
            lines += [f"{level} Summary", ""]
            for c, r in summary_tables:
                lines += [_md_table(c, r), ""]
        for fig in (f for f in figures if f.section == section):
            lines += [f"![{fig.caption}](figures/{fig.name}.png)", ""]
        cost_tables = _tables(view.costs)
        if cost_tables:
            lines += [f"{level} Costs (measured on this machine)", ""]
            for c, r in cost_tables:
                lines += [_md_table(c, r), ""]
    config_path = run.run_dir / "config.toml"
    if config_path.exists():
        lines += ["## Config", "", "```toml", config_path.read_text(encoding="utf-8").rstrip(),
                  "```", ""]
    return "\n".join(lines)


def write_report(run_dir: str | Path) -> Path:
    """Draw the figures of a run into ``figures/`` and write ``report.html`` and ``report.md``.

    Reads only the run's files, so it can be re-run at any time (``toolkit report RUN_DIR``).
    Returns the path of ``report.html``.
    """
    run = RunResults(run_dir)
    if not (run.run_dir / "meta.json").exists():
        raise FileNotFoundError(f"write_report: {run.run_dir} has no meta.json; is it a run "
                                f"directory?")
    problems: list[str] = []
    figures = collect_figures(run, problems)
    folder = run.run_dir / "figures"
    folder.mkdir(exist_ok=True)
    for fig in figures:
        atomic_write_bytes(folder / f"{fig.name}.png", fig.png)
    keep = {f"{fig.name}.png" for fig in figures}
    for old in folder.glob("*.png"):  # figures of an earlier report that no longer exist
        if old.name not in keep:
            old.unlink()
    atomic_write_text(run.run_dir / "report.md", render_markdown(run, figures, problems))
    path = run.run_dir / "report.html"
    atomic_write_text(path, render_html(run, figures, problems))
    return path
