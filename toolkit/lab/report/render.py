"""``report.html`` (one self-contained file, images embedded) and ``report.md`` of a run.

HTML hooks that tools can rely on: each experiment is a ``<section class="experiment"
id="<name>">``, its findings a ``<ul class="findings">`` whose items carry
``data-verdict="as predicted|not as predicted|measured"`` and ``data-seeds`` (``"3/3"``: held in
3 of 3 seeds, ``"seed-independent"``, or the seed count of a measurement), and each figure a
``<figure>`` with a ``<figcaption>`` of words.

A seed group (``toolkit.lab.runner.seeds``) gets one report over its seeds, in its own directory.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import round_floats
from toolkit.lab.report.content import DrawnAhead, FigureItem, ReportContent, Section, build
from toolkit.lab.report.figure_cache import MANIFEST, dumps
from toolkit.lab.report.tables import format_value, quantity_words, variant_table
from toolkit.lab.runner.results import (
    RunResults,
    atomic_write_bytes,
    atomic_write_text,
    inside,
)
from toolkit.lab.runner.story import fmt
from toolkit.lab.style import COLORS

__all__ = ["CSS", "draw_report", "format_value", "held_notes", "render_html",
           "render_markdown", "variant_table", "write_report"]

CSS = f"""
body{{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.45}}
h1{{font-size:1.6em;margin-bottom:.2em}}h2{{font-size:1.3em;border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:2em}}h3{{font-size:1.05em}}
.meta{{color:#555;font-size:.9em}}.overview{{font-size:1.02em}}
table{{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}}
th,td{{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}}
td.num{{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}}
th{{background:#f3f3f3}}
pre{{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}}
img{{max-width:100%;border:1px solid #eee;margin:.3em 0}}
figure{{margin:.8em 0 1.4em}}figcaption{{font-size:.88em;color:#444;max-width:60em}}
.story p{{margin:.3em 0}}.story b{{display:inline-block;min-width:6.5em}}
ul.findings{{padding-left:1.2em}}ul.findings li{{margin:.35em 0}}
.badge{{display:inline-block;font-size:.75em;padding:0 .45em;border-radius:.6em;
margin-right:.4em;color:#fff;white-space:nowrap}}
.badge.yes{{background:{COLORS["blocked"]}}}.badge.no{{background:{COLORS["unblocked"]}}}
.badge.measured{{background:#777}}
.seeds{{display:inline-block;font-size:.75em;padding:0 .45em;border-radius:.6em;
margin-right:.45em;border:1px solid #bbb;color:#444;white-space:nowrap}}
.basis{{color:#555;font-size:.88em}}
details{{margin:1em 0;border:1px solid #e3e3e3;border-radius:4px;padding:.3em .8em}}
summary{{cursor:pointer;color:#333;font-weight:600}}
nav.toc{{font-size:.88em}}nav.toc h2{{font-size:1em;margin:0 0 .4em;border:0}}
nav.toc ul{{list-style:none;padding:0;margin:0}}nav.toc li{{margin:.15em 0}}
nav.toc a{{color:#234;text-decoration:none}}nav.toc a:hover{{text-decoration:underline}}
nav.toc .count{{color:#a31515;font-size:.85em}}
@media (min-width:1240px){{body{{max-width:1320px;display:grid;
grid-template-columns:12.5em minmax(0,1fr);column-gap:2em}}
body>nav.toc{{grid-column:1;grid-row:1/span 999;position:sticky;top:0;align-self:start;
max-height:100vh;overflow-y:auto;padding:1em 0;box-sizing:border-box}}
body>*{{grid-column:2}}}}
@media (max-width:1239px){{nav.toc{{position:sticky;top:0;background:#fff;z-index:1;
border-bottom:1px solid #ddd;padding:.3em 0}}nav.toc h2{{display:none}}
nav.toc ul{{display:flex;flex-wrap:wrap;gap:.2em 1em}}}}
ul.missed{{padding-left:1.2em}}ul.missed li{{margin:.3em 0}}
.predicted{{font-style:italic;color:#444}}
table.glance{{width:100%;table-layout:fixed}}table.glance th:nth-child(1){{width:10em}}
table.glance th:nth-child(2){{width:22%}}table.glance code{{font-size:.9em}}
.tally{{display:block;color:#555;font-size:.9em}}
.status-complete{{color:#176317}}
.status-failed,.status-interrupted,.status-abandoned{{color:#a31515}}
.note{{color:#a31515}}
"""

log = logging.getLogger(__name__)

#: The verdict's CSS class and the words of its badge; ``data-verdict`` keeps the verdict's
#: label (``as predicted``, ``not as predicted``, ``measured``) for tools.
_BADGE = {True: ("yes", "as predicted"), False: ("no", "did not hold"),
          None: ("measured", "measured")}
#: The longest an "at a glance" cell may be, in words, and how many of them its finding's own
#: words take at most (the rest: badge, seeds, what was predicted).
GLANCE_WORDS = 45
GLANCE_TEXT = 24
_META_KEYS = ("status", "experiment", "run_id", "seed", "device", "dtype", "threads",
              "disable_blocks", "executor", "started", "ended", "duration_s", "wall_seconds",
              "blocks_seen", "versions", "error", "warnings")


def _to_the_second(stamp: Any) -> Any:
    """An ISO time to the second, as a reader wants it ("2026-11-23T14:10:12+00:00"); anything
    else unchanged."""
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(stamp).isoformat(timespec="seconds")
    except (TypeError, ValueError):
        return stamp


def _group_span(content: ReportContent) -> float | None:
    """Seconds from the first seed's start to the last seed's end (a seed group)."""
    import datetime as dt

    info = content.group.info if content.group is not None else {}
    if not info.get("started") or not info.get("ended"):
        return None
    return (dt.datetime.fromisoformat(info["ended"])
            - dt.datetime.fromisoformat(info["started"])).total_seconds()


def _wall(content: ReportContent) -> str:
    meta = content.run.meta
    run_s = _group_span(content) if content.group is not None else None
    if run_s is None:
        run_s = meta.get("duration_s") or 0.0
    total = run_s + content.report_seconds
    what = "experiments" if content.group is None else \
        f"{len(content.seeds)} seeds side by side"
    return (f"wall time {fmt(total, 's')} ({what} {fmt(run_s, 's')}, "
            f"report {fmt(content.report_seconds, 's')})")


def _seeds(content: ReportContent) -> str:
    seeds = content.seeds
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"seeds {', '.join(map(str, seeds))}"


def _threads(meta: dict[str, Any]) -> str:
    n = int(meta.get("threads") or 1)
    return f"{n} thread{'s' * (n != 1)}"


def _e(text: Any) -> str:
    return html.escape(str(text))


def table_html(columns: list[str], rows: list[list[str]], *, named: bool = False,
               numbers: bool = True) -> str:
    """An HTML table; ``named``: the first column holds dotted paths of the run's files, shown
    in words (:func:`~toolkit.lab.report.tables.quantity_words`) with the path on hover;
    ``numbers``: the other columns are numbers, right-aligned."""
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)

    def cell(i: int, text: str) -> str:
        if i == 0 and named:
            words = quantity_words(text)
            return (f'<td title="{_e(text)}">{_e(words)}</td>' if words != text
                    else f"<td>{_e(text)}</td>")
        return f"<td{' class=num' if i and numbers else ''}>{_e(text)}</td>"

    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(fig: FigureItem) -> str:
    if fig.table is not None:  # a table of words: text, not an image
        return (f'<figure id="fig-{_e(fig.name)}">{table_html(*fig.table, numbers=False)}'
                f"<figcaption>{_e(fig.caption)}</figcaption></figure>")
    data = base64.b64encode(fig.png).decode("ascii")
    return (f'<figure id="fig-{_e(fig.name)}"><img alt="{_e(fig.caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(fig.caption)}</figcaption>'
            f"</figure>")


def _tags(f: Any) -> str:
    """The verdict badge and the seed note of a finding; for one that did not hold, what was
    predicted, in words next to them ("held in 2 of 3 seeds; predicted: …")."""
    cls, label = _BADGE[f.verdict]
    note, _, predicted = seeds_words(f).partition("; predicted: ")
    said = (f'<span class="predicted">predicted: {_e(predicted)}.</span> ' if predicted
            else "")
    return (f'<span class="badge {cls}">{label}</span>'
            f'<span class="seeds">{_e(note)}{";" if predicted else ""}</span>'
            f'{" " + said if said else ""}')


def prediction(f: Any) -> str:
    """What the finding's basis predicted: the words after its source's colon ("Chen & He
    (2021), Figure 2: without stop-gradient the output collapses" → "without stop-gradient
    the output collapses"), else the whole basis."""
    basis = str(getattr(f, "basis", "") or "").strip().rstrip(".")
    return basis.split(": ", 1)[1] if ": " in basis else basis


def seeds_words(f: Any) -> str:
    """How many seeds a finding rests on, in words: "held in 2 of 3 seeds; predicted: …" for
    a prediction that did not hold, "held in 3 of 3 seeds", "seed-independent", "27 rounds in
    3 seeds" (a timing) or "3 seeds" (a measurement)."""
    note = f.seeds_note
    if f.verdict is False and prediction(f):
        note += f"; predicted: {prediction(f)}"
    return note


_RANGE = re.compile(r"\s\[[^\[\]]*\]")


def short_text(text: str, words: int) -> str:
    """``text`` in at most ``words`` words: the seeds' ranges (" [0.865, 0.93]") left out,
    then cut after the first clause that fits, or at a word, with "…"."""
    text = " ".join(_RANGE.sub("", text).split())
    if len(text.split()) <= words:
        return text
    for stop in (": ", "; ", ", where ", ", "):
        head = text.split(stop, 1)[0]
        if 6 <= len(head.split()) <= words - 1:
            return head.rstrip(".,;:") + " …"
    return " ".join(text.split()[:max(1, words - 1)]).rstrip(".,;:") + " …"


def glance_words(html_text: str) -> int:
    """Words a reader sees in a piece of HTML (tags left out): the measure of a glance cell."""
    return len(html.unescape(re.sub(r"<[^>]+>", " ", html_text)).split())


def glance_cell(f: Any) -> str:
    """One finding in at most :data:`GLANCE_WORDS` words: its badge, seed note (and what was
    predicted, for one that did not hold), and the finding shortened to at most
    :data:`GLANCE_TEXT` words (the section holds the whole sentence)."""
    head = _tags(f)
    budget = min(GLANCE_TEXT, GLANCE_WORDS - glance_words(head))
    if budget < 4:  # a long prediction: shortened too, so that the finding keeps 4 words
        cls, label = _BADGE[f.verdict]
        note, _, predicted = seeds_words(f).partition("; predicted: ")
        room = GLANCE_WORDS - 4 - glance_words(f"{label} {note}; predicted:")
        head = (f'<span class="badge {cls}">{label}</span><span class="seeds">{_e(note)};'
                f'</span> <span class="predicted">predicted: '
                f"{_e(short_text(predicted, max(1, room)))}</span> ")
        budget = GLANCE_WORDS - glance_words(head)
    if f.verdict is False:  # after what was predicted, what was found
        head += "found: "
        budget -= 1
    return head + _e(short_text(f.text, budget))


def _findings_html(section: Section) -> list[str]:
    if not section.findings:
        return []
    items = []
    for f in section.findings:
        label = f.label
        seeds = ("seed-independent" if f.seed_independent else
                 f"{f.held}/{f.n_seeds}" if f.predicts and f.timing is None else
                 str(f.n_seeds))
        basis = f' <span class="basis">Basis: {_e(f.basis)}.</span>' if f.basis else ""
        items.append(f'<li data-verdict="{label}" data-seeds="{_e(seeds)}">{_tags(f)}'
                     f"{_e(f.text)}{basis}</li>")
    return ["<h3>Findings</h3>", f'<ul class="findings">{"".join(items)}</ul>']


def _section_html(section: Section) -> list[str]:
    parts = [f'<section class="experiment" id="{_e(section.name)}">',
             f"<h2>{_e(section.name)}</h2>"]
    if section.description:
        parts.append(f"<p>{_e(section.description[:1].upper() + section.description[1:])}.</p>")
    if section.story:
        parts.append('<div class="story">'
                     f"<p><b>Compares</b> {_e(section.story['compares'])}</p>"
                     f"<p><b>The block</b> <code>{_e(section.story['block'])}</code></p>"
                     f"<p><b>Theory</b> {_e(section.story['prediction'])}</p></div>")
    parts += [f'<p class="note">{_e(n)}</p>' for n in section.notes]
    parts += _findings_html(section)
    parts += [figure_html(f) for f in section.headline]
    details = []
    if section.summary_tables:
        details.append(f"<h3>Summary (deterministic for a config and seed)"
                       f"{_e(section.tables_note)}</h3>")
        details += [table_html(c, r, named=True) for c, r in section.summary_tables]
    if section.equal:
        details.append(f"<p>Equal in both variants: {_e(', '.join(section.equal))}.</p>")
    details += [figure_html(f) for f in section.details]
    if section.cost_tables:
        details.append(f"<h3>Costs (measured on this machine){_e(section.tables_note)}</h3>")
        details += [table_html(c, r, named=True) for c, r in section.cost_tables]
    if section.params:
        details.append("<h3>Parameters</h3>")
        details.append(table_html(["parameter", "value"],
                                  [[k, format_value(v)] for k, v in section.params.items()]))
    if details:
        n_fig = len(section.details)
        label = "Details: tables" + (f", {n_fig} more figure{'s' * (n_fig != 1)}" if n_fig else "")
        parts.append(f"<details><summary>{label}, parameters</summary>{''.join(details)}"
                     f"</details>")
    parts.append("</section>")
    return parts


def missed(content: ReportContent) -> list[tuple[Section, Any]]:
    """Every finding that did not hold, with its section, in the report's order."""
    return [(s, f) for s in content.sections for f in s.findings if f.verdict is False]


def _lead(section: Section, topic: str) -> Any:
    """The finding that stands for a section's ``topic`` at a glance: one that did not hold
    first, else the first."""
    of_topic = [f for f in section.findings if f.topic == topic]
    return next((f for f in of_topic if f.verdict is False), of_topic[0] if of_topic else None)


def _tally(section: Section) -> str:
    """A section's findings counted: "3 as predicted, 1 did not hold, 1 measured"."""
    found = section.findings
    if not found:
        return ""
    held = sum(f.verdict is True for f in found)
    not_held = sum(f.verdict is False for f in found)
    parts = [f"{held} as predicted"] + ([f"{not_held} did not hold"] if not_held else []) + \
        ([f"{len(found) - held - not_held} measured"] if len(found) > held + not_held else [])
    return f'<span class="tally">{_e(", ".join(parts))}</span>'


def _glance(content: ReportContent) -> list[str]:
    """What did not hold (listed first), then a table over the experiments: its cells at most
    :data:`GLANCE_WORDS` words each."""
    out = ['<h2 id="at-a-glance">At a glance</h2>']
    failed = missed(content)
    if failed:
        items = "".join(f'<li><a href="#{_e(s.name)}">{_e(s.name)}</a>: {glance_cell(f)}</li>'
                        for s, f in failed)
        n = len(failed)
        out.append(f'<h3 id="did-not-hold">{n} finding{"s" * (n != 1)} did not hold</h3>'
                   f'<ul class="missed">{items}</ul>')
    rows = []
    for s in content.sections:
        block = (s.story or {}).get("block", "")
        cells = [glance_cell(f) if f is not None else "—"
                 for f in (_lead(s, topic) for topic in ("result", "cost"))]
        rows.append(f'<tr><td><a href="#{_e(s.name)}">{_e(s.name)}</a>{_tally(s)}</td>'
                    f"<td><code>{_e(block)}</code></td>"
                    + "".join(f'<td class="glance">{c}</td>' for c in cells) + "</tr>")
    head = "".join(f"<th>{c}</th>" for c in ("experiment", "block", "effect on the result",
                                               "effect on cost"))
    out.append('<p class="basis">Each cell is one finding, shortened, with means only (one '
               "that did not hold first); the section holds every finding in full, with the "
               "seeds' ranges.</p>")
    out.append(f'<table class="glance"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
               f"</tbody></table>")
    return out


def _toc(content: ReportContent) -> str:
    items = ['<li><a href="#at-a-glance">At a glance</a></li>']
    n = len(missed(content))
    if n:
        items.append(f'<li><a href="#did-not-hold">Did not hold</a> '
                     f'<span class="count">({n})</span></li>')
    for s in content.sections:
        bad = sum(f.verdict is False for f in s.findings)
        count = f' <span class="count">({bad} did not hold)</span>' if bad else ""
        items.append(f'<li><a href="#{_e(s.name)}">{_e(s.name)}</a>{count}</li>')
    items.append('<li><a href="#run-details">Run details</a></li>')
    return f'<nav class="toc"><h2>Contents</h2><ul>{"".join(items)}</ul></nav>'


def render_html(content: ReportContent) -> str:
    meta = content.run.meta
    status = content.run.status  # read now: "abandoned" when its process is gone
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{_e(content.title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_e(content.title)}</h1>",
             f'<p class="meta">{_e(_what(content))} · status <b class="status-{_e(status)}">'
             f"{_e(status)}</b> · {_e(_seeds(content))} · device "
             f"{_e(meta.get('device', ''))} · dtype {_e(meta.get('dtype', ''))} · "
             f"{_e(_threads(meta))} · {_e(_wall(content))}</p>",
             f'<p class="overview">{_e(content.overview)}</p>']
    if meta.get("error"):
        parts.append(f'<p class="note">error: {_e(meta["error"])}</p>')
    parts += [f'<p class="note">{_e(p)}</p>' for p in content.problems]
    parts += [f'<p class="note">warning: {_e(w)}</p>' for w in meta.get("warnings") or []]
    if len(content.sections) > 1:
        parts.insert(3, _toc(content))  # first in the body: the sidebar that stays in view
        parts += _glance(content)
    for section in content.sections:
        parts += _section_html(section)
    details = [figure_html(f) for f in content.top_figures]
    config_path = content.out_dir / "config.toml"
    if config_path.exists():
        details.append(f"<h3>Config</h3><pre>{_e(config_path.read_text(encoding='utf-8'))}"
                       f"</pre>")
    shown = {k: _to_the_second(meta[k]) if k in ("started", "ended") else meta.get(k)
             for k in _META_KEYS if k in meta}
    details.append(f"<h3>Meta</h3><pre>{_e(json.dumps(round_floats(shown), indent=2))}</pre>")
    if meta.get("traceback"):
        details.append(f"<h3>Traceback</h3><pre>{_e(meta['traceback'])}</pre>")
    parts.append(f'<details id="run-details"><summary>Run details: config, meta'
                 f"{', timings' if content.top_figures else ''}</summary>{''.join(details)}"
                 f"</details>")
    parts += [f'<footer class="meta"><p>{_e(n[:1].upper() + n[1:])}.</p></footer>'
              for n in content.footer_notes]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _md_glance(f: Any) -> str:
    """A glance cell in Markdown: the same words as the HTML's."""
    text = glance_cell(f)
    text = re.sub(r'<span class="badge [^"]*">(.*?)</span>', r"**\1** ", text)
    text = re.sub(r'<span class="seeds">(.*?)</span>', r"(\1) ", text)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(c) for c in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(content: ReportContent) -> str:
    meta = content.run.meta
    lines = [f"# {content.title}", "",
             f"{_what(content)} · status **{content.run.status}** · "
             f"{_seeds(content)} · device {meta.get('device', '')} · dtype "
             f"{meta.get('dtype', '')} · {_wall(content)}", "", content.overview, ""]
    if meta.get("error"):
        lines += [f"error: `{meta['error']}`", ""]
    lines += [f"- {p}" for p in content.problems]
    if len(content.sections) > 1:
        lines += ["## At a glance", ""]
        failed = missed(content)
        if failed:
            n = len(failed)
            lines += [f"**{n} finding{'s' * (n != 1)} did not hold:**", ""]
            lines += [f"- {s.name}: {_md_glance(f)}" for s, f in failed] + [""]
        rows = []
        for s in content.sections:
            cells = [_lead(s, topic) for topic in ("result", "cost")]
            rows.append([s.name, (s.story or {}).get("block", ""),
                         *(_md_glance(f) if f is not None else "—" for f in cells)])
        lines += [_md_table(["experiment", "block", "effect on the result", "effect on cost"],
                            rows), ""]
    for s in content.sections:
        lines += [f"## {s.name}", ""]
        if s.description:
            lines += [s.description[:1].upper() + s.description[1:] + ".", ""]
        if s.story:
            lines += [f"- **Compares:** {s.story['compares']}",
                      f"- **The block:** `{s.story['block']}`",
                      f"- **Theory:** {s.story['prediction']}", ""]
        lines += [f"> {n}" for n in s.notes]
        if s.findings:
            lines += ["### Findings", ""] + [f"- **{_BADGE[f.verdict][1]}** ({seeds_words(f)}) "
                                             f"{f.text}"
                                             + (f" *Basis: {f.basis}.*" if f.basis else "")
                                             for f in s.findings] + [""]
        for fig in s.figures:
            if fig.table is not None:
                lines += [_md_table(*fig.table), "", f"*{fig.caption}*", ""]
            else:
                lines += [f"![{fig.caption}](figures/{fig.name}.png)", "", f"*{fig.caption}*",
                          ""]
        for c, r in [*s.summary_tables, *s.cost_tables]:
            lines += [_md_table(c, [[quantity_words(row[0]), *row[1:]] for row in r]), ""]
    config_path = content.out_dir / "config.toml"
    if config_path.exists():
        lines += ["## Config", "", "```toml", config_path.read_text(encoding="utf-8").rstrip(),
                  "```", ""]
    lines += [f"*{n[:1].upper() + n[1:]}.*" for n in content.footer_notes]
    return "\n".join(lines)


def _what(content: ReportContent) -> str:
    if content.group is not None:
        return f"seed group {content.group.path.name} ({len(content.seeds)} runs)"
    return f"run {content.run.run_dir.name}"


def write_report(run_dir: str | Path, experiment: Any = None, *, workers: int = 1,
                 drafts: DrawnAhead | None = None) -> Path:
    """Draw the figures of a run into ``figures/`` and write ``report.html`` and ``report.md``.

    ``experiment``: the :class:`~toolkit.lab.runner.Experiment` that made the run; its ``figures``
    (and for a showcase its parts') draw the experiment's own figures. Without it the report
    shows the generic figures of the logged numbers. The runner calls ``finish(run_dir,
    experiment)``, so ``finish=write_report`` works as it is.

    ``run_dir`` is a run directory or a seed group's (``toolkit.lab.runner.seeds``): then the report
    covers every seed of the group (findings over the seeds, figures with each seed) and is
    written into the group's directory. Reads only the files, so it can be re-run at any time
    (``toolkit report DIR``), also on an interrupted or failed run (it shows what exists).
    ``workers > 1`` draws the sections of a showcase in that many processes (spawned: call it
    from a script's ``if __name__ == "__main__":`` block; the command line does).
    ``drafts`` (:class:`~toolkit.lab.report.drafts.Drafts`): sections drawn while the run went
    on, used where the files they were drawn from are unchanged (it is closed here).
    Returns the path of ``report.html``.
    """
    from toolkit.lab.runner.seeds import SeedGroup, is_group

    t0 = time.perf_counter()
    group = SeedGroup(run_dir) if is_group(run_dir) else None
    run = group.results() if group is not None else RunResults(run_dir)
    if group is None and not (run.run_dir / "meta.json").exists():
        raise FileNotFoundError(f"write_report: {run.run_dir} has no meta.json; is it a run "
                                f"directory?")
    content = build(run, experiment, group=group, workers=workers, drafts=drafts)
    out = content.out_dir
    # the report writes and deletes only inside its own folder, whatever links it holds
    folder = inside(out, out / "figures")
    folder.mkdir(exist_ok=True)
    figures = [f for s in content.sections for f in s.figures if f.table is None] + \
        content.top_figures
    for fig in figures:
        path = folder / f"{fig.name}.png"
        if not (path.is_file() and path.stat().st_size == len(fig.png)
                and path.read_bytes() == fig.png):  # a reused figure is already there
            atomic_write_bytes(path, fig.png, root=out)
    keep = {f"{fig.name}.png" for fig in figures}
    for old in folder.glob("*.png"):  # figures of an earlier report that no longer exist
        if old.name not in keep:
            if not old.is_symlink():  # a link is removed itself, never what it points to
                inside(out, old)
            old.unlink()
    atomic_write_text(folder / MANIFEST, dumps(content.cache), root=out)
    for note in content.footer_notes:  # said once, not once per figure
        log.warning("%s", note)
    content.report_seconds = time.perf_counter() - t0
    atomic_write_text(out / "report.md", render_markdown(content), root=out)
    path = out / "report.html"
    atomic_write_text(path, render_html(content), root=out)
    return path


@contextlib.contextmanager
def held_notes() -> Iterator[list[str]]:
    """Inside the ``with``, the notes reports log (e.g. graphs laid out without graphviz) are
    collected into the list instead of printed, so that a caller can print them where they do
    not break its own lines."""
    notes: list[str] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    handler, propagate = Hold(logging.WARNING), log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield notes
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def draw_report(run_dir: str | Path, experiment: Any = None, *,
                drafts: DrawnAhead | None = None) -> Path:
    """:func:`write_report` with the sections drawn in parallel (:func:`report_workers`
    processes): the command line's report. A module-level function, so that a process pool can
    call it too."""
    from toolkit.lab.report.content import report_workers

    return write_report(run_dir, experiment, workers=report_workers(), drafts=drafts)
