"""``report.html`` (one self-contained file, images embedded) and ``report.md`` of a run.

HTML hooks that tools can rely on: each experiment is a ``<section class="experiment"
id="<name>">``, its findings a ``<ul class="findings">`` whose items carry
``data-verdict="as predicted|not as predicted|measured"`` and ``data-seeds`` (``"3/3"``: held in
3 of 3 seeds, ``"seed-independent"``, or the seed count of a measurement), and each figure a
``<figure>`` with a ``<figcaption>`` of words. A seed group gets one report over its seeds.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import html
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from toolkit._utils.formatting import fmt, round_floats
from toolkit.lab.report.content import ReportContent, Section, build, format_value, quantity_words
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside
from toolkit.lab.results.findings import BADGES
from toolkit.lab.results.records import record_group
from toolkit.lab.results.view import RunResults, SeedGroup, is_group
from toolkit.lab.style import COLORS

log = logging.getLogger(__name__)

#: The verdict's CSS class (``data-verdict`` keeps the verdict's label for tools).
_CLASS = {True: "yes", False: "no", None: "measured"}
#: The longest an "at a glance" cell may be, in words, and the most of them its finding takes.
GLANCE_WORDS = 45
GLANCE_TEXT = 24
_META_KEYS = ("status", "experiment", "run_id", "seed", "device", "dtype", "threads",
              "disable_blocks", "executor", "started", "ended", "duration_s", "wall_seconds",
              "blocks_seen", "versions", "error", "warnings")
_RANGE = re.compile(r"\s\[[^\[\]]*\]")


def prediction(f: Any) -> str:
    """What the finding's basis predicted: the words after its source's colon ("Chen & He
    (2021), Figure 2: without stop-gradient the output collapses" → "without stop-gradient
    the output collapses"), else the whole basis."""
    basis = str(getattr(f, "basis", "") or "").strip().rstrip(".")
    return basis.split(": ", 1)[1] if ": " in basis else basis


def seeds_words(f: Any) -> str:
    """How many seeds a finding rests on: "held in 3 of 3 seeds", "seed-independent", "3
    seeds", …; for a prediction that did not hold, "; predicted: …" after it."""
    return f.seeds_note + (f"; predicted: {prediction(f)}" if f.verdict is False and
                           prediction(f) else "")


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


def glance(f: Any, words: int = GLANCE_WORDS, whole: bool = False) -> dict[str, Any]:
    """One finding for an "at a glance" cell in at most ``words`` words: badge, seed note
    (and what was predicted, for one that did not hold), and the finding shortened to at most
    :data:`GLANCE_TEXT` words; ``words=0``: the badge and notes alone, the prediction in
    full; ``whole``: the finding's every word (the seeds' ranges left out)."""
    note, _, predicted = seeds_words(f).partition("; predicted: ")
    cell = {"cls": _CLASS[f.verdict], "label": BADGES[f.verdict], "note": note,
            "predicted": predicted, "cut": False, "found": f.verdict is False, "text": ""}
    if whole:
        return {**cell, "text": " ".join(_RANGE.sub("", f.text).split())}
    if not words:
        return cell
    head = len(f"{cell['label']} {note}".split()) + \
        (len(f"predicted: {predicted}.".split()) if predicted else 0)
    budget = min(GLANCE_TEXT, words - head)
    if budget < 4:  # a long prediction: shortened too, so that the finding keeps 4 words
        room = words - 4 - len(f"{cell['label']} {note}; predicted:".split())
        cell.update(predicted=short_text(predicted, max(1, room)), cut=True)
        budget = words - len(f"{cell['label']} {note} predicted: {cell['predicted']}".split())
    cell["text"] = short_text(f.text, budget - cell["found"])
    return cell


def _tally(section: Section) -> str:
    """A section's findings counted: "3 as predicted, 1 did not hold, 1 measured"."""
    found = section.findings
    held = sum(f.verdict is True for f in found)
    missed = sum(f.verdict is False for f in found)
    rest = len(found) - held - missed
    return ", ".join([f"{held} as predicted"] * bool(found) + [f"{missed} did not hold"]
                     * bool(missed) + [f"{rest} measured"] * bool(rest))


def _lead(section: Section, topic: str) -> Any:
    """The finding that stands for a section's ``topic`` at a glance: the experiment's
    headline, else one that did not hold, else the first."""
    of_topic = [f for f in section.findings if f.topic == topic]
    return next((f for f in of_topic if f.headline is not None), None) or next(
        (f for f in of_topic if f.verdict is False), of_topic[0] if of_topic else None)


def _md_escape(value: Any) -> Any:
    """What a Markdown page shows of a value: no HTML of its own, no table cell broken by
    ``|``; a :class:`~markupsafe.Markup` value (a fenced config) as it is."""
    if isinstance(value, Markup) or value is None:
        return "" if value is None else value
    return html.escape(str(value), quote=False).replace("|", "\\|")


@functools.cache
def _environment(markdown: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("toolkit.lab.report", "templates"),
        autoescape=True, finalize=(lambda v: Markup(_md_escape(v))) if markdown else None,
        keep_trailing_newline=True)
    env.globals.update(
        glance=glance, tally=_tally, words=quantity_words, seeds_words=seeds_words,
        badge=lambda f: BADGES[f.verdict], leads=lambda s: [_lead(s, t) for t in ("result",
                                                                                 "cost")],
        png64=lambda fig: base64.b64encode(fig.png).decode("ascii"),
        params_rows=lambda s: [[k, format_value(v)] for k, v in s.params.items()],
        cells=lambda row: Markup(" | ".join(str(_md_escape(c)) for c in row)),
        worded=lambda rows: [[quantity_words(r[0]), *r[1:]] for r in rows],
        seeds_attr=lambda f: ("seed-independent" if f.seed_independent else
                              f"{f.held}/{f.n_seeds - f.outside_seeds}"
                              if f.predicts and f.timing is None else str(f.n_seeds)))
    env.globals["css"] = Markup(env.from_string(env.loader.get_source(env, "report.css")[0])
                                .render(colors=COLORS))
    return env


def page(name: str, **values: Any) -> str:
    """An HTML page of the report's templates (``compare.html.j2``), with the report's CSS."""
    return _environment(False).get_template(name).render(**values)


def _values(content: ReportContent, markdown: bool) -> dict[str, Any]:
    """What a page of the report shows."""
    meta, group, seeds = content.run.meta, content.group, content.seeds
    run_s = meta.get("duration_s") or 0.0
    if group is not None and group.info.get("started") and group.info.get("ended"):
        run_s = (dt.datetime.fromisoformat(group.info["ended"])
                 - dt.datetime.fromisoformat(group.info["started"])).total_seconds()
    what = "experiments" if group is None else f"{len(seeds)} seeds side by side"
    threads = int(meta.get("threads") or 1)
    path = content.out_dir / "config.toml"
    config = path.read_text(encoding="utf-8").rstrip() \
        if path.is_file() and not path.is_symlink() else ""
    if markdown and config:  # a fence longer than any run of backticks in the config
        fence = "`" * max(3, 1 + max(map(len, re.findall("`+", config)), default=0))
        config = Markup(f"{fence}toml\n{config}\n{fence}")
    shown = {}
    for k in (k for k in _META_KEYS if k in meta):
        with contextlib.suppress(TypeError, ValueError):  # a time to the second
            shown[k] = dt.datetime.fromisoformat(meta[k]).isoformat(timespec="seconds") \
                if k in ("started", "ended") else meta[k]
        shown.setdefault(k, meta[k])
    head = {"what": f"seed group {group.path.name} ({len(seeds)} runs)" if group is not None
            else f"run {content.run.run_dir.name}", "status": content.run.status,
            "seeds": f"seed {seeds[0]}" if len(seeds) == 1 else
            f"seeds {', '.join(map(str, seeds))}",
            "device": meta.get("device", ""), "dtype": meta.get("dtype", ""),
            "threads": f"{threads} thread{'s' * (threads != 1)}",
            "wall": f"wall time {fmt(run_s + content.report_seconds, 's')} ({what} "
                    f"{fmt(run_s, 's')}, report {fmt(content.report_seconds, 's')})",
            "error": meta.get("error"), "warnings": meta.get("warnings") or [],
            "traceback": meta.get("traceback")}
    return {"content": content, "head": head, "config_text": config,
            "missed": [(s, f) for s in content.sections for f in s.findings
                       if f.verdict is False],
            "meta_text": json.dumps(round_floats(shown), indent=2)}


def render_html(content: ReportContent) -> str:
    """``report.html``: one self-contained page (images embedded), escaped throughout."""
    return page("report.html.j2", **_values(content, False))


def render_markdown(content: ReportContent) -> str:
    """``report.md``: the same content; every value escaped for Markdown."""
    return _environment(True).get_template("report.md.j2").render(**_values(content, True))


def write_report(run_dir: str | Path, experiment: Any = None) -> Path:
    """Draw the figures of a run into ``figures/`` and write ``report.html`` and ``report.md``.

    ``experiment``: the :class:`~toolkit.lab.Experiment` that made the run; its ``figures``
    (and for a showcase its parts') draw the experiment's own figures; without it the report
    shows the generic figures of the logged numbers. ``finish=write_report`` works as it is.

    ``run_dir`` is a run folder or a seed group's: then the report covers every seed. Reads
    only the files, so it can be drawn again at any time (``toolkit report DIR``), also for an
    interrupted or failed run. A figure's file name comes from the figure's own name; only
    files this report names are written, and nothing is ever deleted. Returns the path of
    ``report.html``.
    """
    t0 = time.perf_counter()
    group = SeedGroup(run_dir) if is_group(run_dir) else None
    run = group.results() if group is not None else RunResults(run_dir)
    if group is None and not (run.run_dir / "meta.json").exists():
        raise FileNotFoundError(f"write_report: {run.run_dir} has no meta.json; is it a run "
                                f"folder?")
    content = build(run, experiment, group=group)
    out = content.out_dir
    folder = inside(out, out / "figures")  # written only inside its own folder
    folder.mkdir(exist_ok=True)
    for fig in (f for f in content.figures if f.table is None):
        atomic_write_bytes(folder / f"{fig.name}.png", fig.png, root=out)
    for note in content.footer_notes:  # said once, not once per figure
        log.warning("%s", note)
    content.report_seconds = round(time.perf_counter() - t0, 3)
    if group is not None:  # the tally says the same seconds
        record_group(out, finish_s=content.report_seconds)
    atomic_write_text(out / "report.md", render_markdown(content), root=out)
    atomic_write_text(path := out / "report.html", render_html(content), root=out)
    return path


@contextlib.contextmanager
def held_notes() -> Iterator[list[str]]:
    """Inside the ``with``, the notes reports log (e.g. graphs laid out without graphviz) are
    collected into the list instead of printed, so that a caller can print them where they do
    not break its own lines."""
    notes: list[str] = []
    handler, propagate = logging.Handler(logging.WARNING), log.propagate
    handler.emit = lambda record: notes.append(record.getMessage())  # type: ignore[method-assign]
    log.addHandler(handler)
    log.propagate = False
    try:
        yield notes
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


#: The command line's report (kept as a name of its own: ``finish=draw_report``).
draw_report = write_report
