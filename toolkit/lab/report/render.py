"""``report.html`` (self-contained, images embedded) and ``report.md`` of a run or a seed
group, built from its files (:func:`build`) and laid out top-down by the templates: title, what
was found, Figure 1, overview; per experiment its story, findings and headline figures; the
details, collapsed. Hooks for tools: each experiment is a ``<section class="experiment"
id="<name>">``, its findings a ``<ul class="findings">`` of items with ``data-verdict`` and
``data-seeds`` (``"3/3"``, ``"seed-independent"`` or a seed count), each figure a ``<figure>``
with a ``<figcaption>``.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import gc
import hashlib
import html
import io
import json
import logging
import multiprocessing
import os
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image
from tqdm.auto import tqdm

from toolkit._utils.formatting import fmt, format_value, round_floats
from toolkit.lab.report.figures import WordTable, default_figures, plt, summary_pairs
from toolkit.lab.report.summary import summary_caption, summary_figure
from toolkit.lab.results.files import atomic_write_bytes, atomic_write_text, inside, read_record
from toolkit.lab.results.findings import BADGES, Verdict, aggregate, found_sentence
from toolkit.lab.results.records import compute_findings, record_group
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, FindingsFile, flatten
from toolkit.lab.results.view import RunResults, SeedGroup, is_group
from toolkit.lab.style import COLORS, REPORT_DPI

log = logging.getLogger(__name__)

HEADLINE = 2  # how many of an experiment's own figures lead its section; the rest: details
MAX_STEM = 80  # the longest file stem of a figure (names come from results: any length)
PARALLEL_SECTIONS = 4  # the fewest sections worth a second drawing process (a showcase: ten)
#: How a figure says how it was drawn (``toolkit.lens.graph_draw``'s, named here: no torch).
_NOTE_ATTR = "gradient_graph_layout_note"
_METRICS_CAPTION = ("Logged metrics of the group {!r} against the step, every variant on the "
                    "same axes (blocked solid blue, unblocked dashed vermillion).")
_SUMMARY_CAPTION = "Summary numbers that differ between the blocked and the unblocked variant."
#: Names of a summary's or costs' parts, as a reader says them.
_WORDS = {
    "timers": "wall time", "cpu_seconds": "CPU time", "seconds": "time",
    "seconds_per_epoch": "time per epoch", "step_seconds": "time per step",
    "time_median_s": "median time", "peak_bytes": "peak memory",
    "saved_tensor_bytes": "bytes saved for backward",
    "saved_tensor_peak_bytes": "peak of the bytes saved for backward",
    "graph_nodes": "autograd nodes", "n_iter": "iterations", "rounds": "interleaved rounds",
}
_SUFFIXES = (("_seconds", " time"), ("_s", " time"), ("_bytes", " bytes"))


def safe_name(name: str) -> str:
    """A figure's file stem: unsafe characters become ``_``; past :data:`MAX_STEM` characters it
    is cut and given a hash of the whole, so two long names never share a file.

    >>> safe_name("em_gmm__blocked/loss"), len(safe_name("k" * 300))
    ('em_gmm__blocked_loss', 80)
    """
    stem = re.sub(r"[^A-Za-z0-9_.\-]+", "_", name)
    if len(stem) <= MAX_STEM:
        return stem
    return f"{stem[:MAX_STEM - 13]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def split_variant(path: str) -> tuple[str | None, str]:
    """``(variant, quantity)`` of a dotted summary path, the variant being ``blocked`` or
    ``unblocked`` at any depth, or a last part ending in ``_blocked``/``_unblocked``;
    ``(None, path)`` for anything else.

    >>> split_variant("blocked.final_loss"), split_variant("a_split.unblocked.values.B")
    (('blocked', 'final_loss'), ('unblocked', 'a_split.values.B'))
    >>> split_variant("gradients.l2.norm_unblocked"), split_variant("blocked_vs_unblocked.x")
    (('unblocked', 'gradients.l2.norm'), (None, 'blocked_vs_unblocked.x'))
    """
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part in VARIANTS:
            return part, ".".join(parts[:i] + parts[i + 1:]) or "value"
    for variant in (UNBLOCKED, BLOCKED):  # "unblocked" first: it ends in "blocked"
        stem = parts[-1].removesuffix(f"_{variant}")
        # "x_blocked_and_unblocked", "ratio_unblocked_over_blocked": both variants, not one
        if stem != parts[-1] and stem and BLOCKED not in stem:
            return variant, ".".join([*parts[:-1], stem])
    return None, path


def quantity_words(path: str) -> str:
    """A dotted summary or costs path as words, its parts separated by commas.

    >>> quantity_words("timers.train_gradient_blocked_and_unblocked")
    'wall time, train gradient blocked and unblocked'
    >>> quantity_words("memory.peak_bytes"), quantity_words("time_ratio_buggy_over_fixed")
    ('peak memory', 'time ratio buggy ÷ fixed')
    """
    words: list[str] = []
    for part in filter(None, path.split(".")):
        said = _WORDS.get(part)
        if said is None:
            said = next((part[:-len(s)] + w for s, w in _SUFFIXES
                         if part.endswith(s) and len(part) > len(s)), part)
            said = said.replace("_over_", " ÷ ").replace("_", " ")
        if words and words[-1] in said.split():  # "memory, peak memory": said once
            words.pop()
        words.append(said)
    return ", ".join(words)


def variant_table(tree: Mapping[str, Any]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    """``(columns, rows, rest)`` of a summary/costs dict: the values whose path names a variant
    (:func:`split_variant`) side by side with their difference, and the other values, flat."""
    pairs: dict[str, dict[str, Any]] = {}
    rest = {}
    for path, value in flatten(tree, keep_empty=True).items():
        variant, quantity = split_variant(path)
        if variant is None:
            rest[path] = value
        else:
            pairs.setdefault(quantity, {})[variant] = value
    rows = []
    for name, values in pairs.items():
        b, u = values.get(BLOCKED), values.get(UNBLOCKED)
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (b, u))
        diff = ("0 (equal)" if b == u else format_value(u - b, name)) if numbers else ""
        rows.append([name, format_value(b, name), format_value(u, name), diff])
    return ["quantity", BLOCKED, UNBLOCKED, "unblocked − blocked"], rows, rest


def tables(tree: Mapping[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The side-by-side table and a table of the other values, each ``(columns, rows)``."""
    columns, rows, rest = variant_table(tree)
    return [(columns, rows)] * bool(rows) + [
        (["quantity", "value"], [[k, format_value(v, k)] for k, v in rest.items()])] * bool(rest)


@dataclass
class FigureItem:
    """A drawn figure: file stem under ``figures/``, caption, PNG bytes; ``note``: how it was
    drawn, said once in the footer; ``table``: ``(columns, rows)`` of a
    :class:`~toolkit.lab.report.figures.WordTable`, shown as words (``png`` empty)."""

    name: str
    caption: str
    png: bytes = field(repr=False)
    headline: bool = False
    note: str = ""
    table: tuple[list[str], list[list[str]]] | None = None


@dataclass
class Section:
    """One experiment of the report (the run itself, or one child of a showcase)."""

    name: str
    experiment: str
    description: str
    story: dict[str, str] | None
    findings: list[Verdict]
    figures: list[FigureItem]
    summary_tables: list[tuple[list[str], list[list[str]]]]
    cost_tables: list[tuple[list[str], list[list[str]]]]
    equal: list[str]
    params: dict[str, Any]
    notes: list[str]
    tables_note: str = ""


@dataclass
class ReportContent:
    """Everything a report shows, in order; ``summary`` is Figure 1, ``found`` what was found
    in one sentence (the report opens with it, as findings.md does)."""

    run: RunResults
    title: str
    sections: list[Section]
    overview: str
    top_figures: list[FigureItem]
    problems: list[str]
    report_seconds: float = 0.0
    group: SeedGroup | None = None
    summary: FigureItem | None = None
    found: str = ""

    @property
    def figures(self) -> list[FigureItem]:
        return [f for s in self.sections for f in s.figures] + self.top_figures + \
            ([self.summary] if self.summary is not None else [])

    @property
    def footer_notes(self) -> list[str]:
        """How figures were drawn, each said once (e.g. graphs laid out without graphviz)."""
        return list(dict.fromkeys(f.note for f in self.figures if f.note))

    @property
    def out_dir(self) -> Path:
        """Where the report goes: the run directory, or the seed group's directory."""
        return self.group.path if self.group is not None else self.run.run_dir


def png(fig: Any) -> bytes:
    """PNG of a figure at :data:`~toolkit.lab.style.REPORT_DPI`, quantised to 256 colours
    (plots have few: 3–5x smaller), from the canvas's pixels; the figure is closed."""
    try:
        if not hasattr(fig.canvas, "print_to_buffer"):  # a Figure() without a canvas
            FigureCanvasAgg(fig)
        fig.set_dpi(REPORT_DPI)
        raw, size = fig.canvas.print_to_buffer()
    finally:
        plt.close(fig)
    out = io.BytesIO()
    Image.frombuffer("RGBA", size, raw, "raw", "RGBA", 0, 1).convert("RGB").quantize(
        colors=256, method=Image.Quantize.FASTOCTREE).save(out, format="PNG")
    return out.getvalue()


def _item(name: str, caption: str, fig: Any, headline: bool = False) -> FigureItem:
    if isinstance(fig, WordTable):  # words stay words: no image is drawn
        plt.close(fig)
        return FigureItem(safe_name(name), caption, b"", headline, table=(fig.columns, fig.rows))
    return FigureItem(safe_name(name), caption, png(fig), headline,
                      str(getattr(fig, _NOTE_ATTR, "") or ""))


def _experiment_figures(view: RunResults, experiment: Any, prefix: str, quiet: bool
                        ) -> tuple[list[FigureItem], list[str]]:
    """The figures ``experiment.figures(view)`` draws, the first :data:`HEADLINE` leading, and
    the problems met (``quiet``: an unfinished run's failure is none, its figures may need
    what is missing)."""
    if experiment is None:
        return [], [f"{view.experiment}: experiment figures not drawn (the report was not given "
                    f"the experiment; `toolkit report` finds it when it is installed)"]
    try:
        figures = experiment.figures(view) or {} if experiment.figures is not None else {}
        if not isinstance(figures, Mapping):
            raise TypeError(f"figures() must return a dict name → Figure, got "
                            f"{type(figures).__name__}")
    except Exception as err:
        plt.close("all")
        if quiet:
            return [], []
        last = traceback.extract_tb(err.__traceback__)[-1]
        return [], [f"{view.experiment}: figures() failed: {type(err).__name__}: {err} "
                    f"({Path(last.filename).name}:{last.lineno})"]
    out = []
    for i, (name, value) in enumerate(figures.items()):
        fig, caption = value if isinstance(value, tuple) else (value, "")
        if not caption:
            title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
            text = " ".join((title or (fig.axes[0].get_title() if fig.axes else "")
                             or name.replace("_", " ")).split())
            caption = text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
        out.append(_item(f"{prefix}{name}", caption, fig, i < HEADLINE))
    return out, []


def section_figures(run: RunResults, child: str | None, experiment: Any
                    ) -> tuple[list[FigureItem], list[str]]:
    """One section's figures (the run's, or a showcase child's, named ``"<child>__…"``), drawn
    from the files: the experiment's own, else the generic views of its numbers; ``(figures,
    problems)``."""
    view = run.child(child) if child is not None else run
    prefix = f"{child}__" if child else ""
    items, problems = _experiment_figures(view, experiment, prefix, run.status != "complete")
    if items:  # the generic views of the same numbers would only repeat them
        return items, problems
    try:
        defaults = default_figures(view)
    except Exception as err:
        plt.close("all")
        return items, [*problems, f"{view.experiment}: default figures failed: "
                                  f"{type(err).__name__}: {err}"]
    for i, (name, fig) in enumerate(defaults.items()):
        group = name.removeprefix("metrics_").rstrip("_0123456789") or "misc"
        items.append(_item(f"{prefix}{name}", _METRICS_CAPTION.format(group)
                           if name.startswith("metrics") else _SUMMARY_CAPTION, fig, i == 0))
    return items, problems


def _summary(headlines: list[tuple[str, list[Verdict]]]) -> tuple[list[FigureItem], list[str]]:
    """Figure 1 (none when no experiment has a headline finding)."""
    fig = summary_figure(headlines)
    if fig is None:
        return [], []
    return [_item("figure_1", summary_caption(headlines), fig)], []


#: The jobs of :func:`draw_all`: set before its processes fork, read by index.
_JOBS: list[Callable[[], tuple[list[FigureItem], list[str]]]] = []


def _draw(index: int) -> tuple[list[FigureItem], list[str]]:
    """Job ``index``; the pyplot figures it opened are closed, whatever happened, and
    ``draw_gradient_graph``'s fallback warning is held back (the footer says it once)."""
    opened = set(plt.get_fignums())
    logger = logging.getLogger("toolkit.lens.graph_draw")
    disabled, logger.disabled = logger.disabled, True
    try:
        return _JOBS[index]()
    finally:
        logger.disabled = disabled
        for number in set(plt.get_fignums()) - opened:
            plt.close(number)


def _others() -> float:
    """How many other processes want a core now: Linux's runnable tasks less this one, else the
    1-minute load average less this process's own share (up to 1 after a minute's work)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1
    except (OSError, IndexError, ValueError):
        return os.getloadavg()[0] - min(1.0, time.process_time() / 60)


def draw_all(jobs: list[Callable[[], tuple[list[FigureItem], list[str]]]]
             ) -> list[tuple[list[FigureItem], list[str]]]:
    """Each job's ``(figures, problems)``, in order, under a tqdm bar; in two forked processes
    for :data:`PARALLEL_SECTIONS` jobs or more where a second core is free now (not in a
    daemonic process: a Dask worker's)."""
    global _JOBS
    bar = {"total": len(jobs), "desc": "report", "unit": "figure set", "leave": False,
           "dynamic_ncols": True, "disable": None if multiprocessing.parent_process() is None
           else True}  # on a terminal only, and only the command's process
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    _JOBS = jobs
    try:
        if len(jobs) < PARALLEL_SECTIONS or "fork" not in multiprocessing.get_all_start_methods() \
                or multiprocessing.current_process().daemon or (cores or 1) - _others() < 1.5:
            return [_draw(i) for i in tqdm(range(len(jobs)), **bar)]
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
        try:
            drawn = list(tqdm(pool.map(_draw, range(len(jobs))), **bar))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: nothing new is started
            raise
        pool.shutdown()
        return drawn
    finally:
        _JOBS = []


def _overview(sections: list[Section], showcase: bool, seeds: list[int]) -> str:
    findings = [f for s in sections for f in s.findings]
    n = len(sections)
    what = (f"{n} experiment{'s' * (n != 1)}, each run" if showcase else "The experiment ran")
    text = (f"{what} twice from the same seed: once with its stop_gradient block active "
            f"(“blocked”, the method as published) and once with the same code inside "
            f"disable_blocks (“unblocked”), where gradient flows through the blocked quantity. "
            f"Each section states what theory predicts and what the run found.")
    if len(seeds) > 1:
        text += (f" Every comparison ran with {len(seeds)} seeds ({', '.join(map(str, seeds))}):"
                 f" a number in a finding is the mean over the seeds with its range in brackets, "
                 f"[smallest, largest], and a prediction counts as held only where it held in "
                 f"every seed (or in the share its finding states). Curves in the figures "
                 f"show every seed, as a band (the range) around the mean or, where the seeds "
                 f"sit at different levels, as one line per seed; images, graphs and the "
                 f"tables in the details are the first seed's.")
    if findings:
        yes, no, k = *(sum(f.verdict is v for f in findings) for v in (True, False)), len(findings)
        text += (f" Of {k} finding{'s' * (k != 1)}, {yes} came out as predicted by a named "
                 f"theorem, closed form or paper" + (f", {no} did not" if no else "")
                 + f", and {k - yes - no} are measurements without a prediction; "
                   f"{sum(f.seed_independent for f in findings)} cannot depend on the seed "
                   f"(exact values, closed forms, graph sizes).")
    return text


def build(run: RunResults, experiment: Any = None, *, group: SeedGroup | None = None
          ) -> ReportContent:
    """A report's content from the run's files, figures drawn; with a seed ``group``, ``run``
    is its first seed, the findings the group's and the figures see every seed."""
    complete = run.status == "complete"
    root = group.path if group is not None else run.run_dir
    record = read_record(root / "findings.json", FindingsFile, root=root)
    findings = record.findings if record is not None else {}
    problems = list(record.problems) if group is not None and record is not None else []
    parts = experiment.parts if experiment is not None else {}
    if not findings and complete and group is None and experiment is not None:
        computed, problems_found = compute_findings(run.run_dir, experiment)
        findings, more = aggregate({run.seed: computed})
        problems += problems_found + more
    views = [(name, run.child(name)) for name in run.children] or [(run.experiment, run)]
    found = {name: findings.get(name, []) for name, _ in views}
    if run.children and findings.get(run.experiment):  # the parent's own (a pattern that
        found[views[0][0]] = found[views[0][0]] + findings[run.experiment]  # matched nothing)
    headlines = list(found.items())
    (summary, _), (top, top_problems), *drawn = draw_all([
        functools.partial(_summary, headlines),
        functools.partial(_experiment_figures, run, experiment, "", not complete)
        if run.children else lambda: ([], []),
        *(functools.partial(section_figures, run, name if run.children else None,
                            parts.get(view.experiment)) for name, view in views)])
    sections = []
    for (name, view), (figures, drawn_problems) in zip(views, drawn):
        problems += drawn_problems
        about = run.meta.get("about", {}).get(view.experiment)
        part = parts.get(view.experiment)
        if about is not None:  # as the run wrote it, else from the experiment (older runs)
            description, story = about.get("description", ""), about.get("story")
        else:
            description = part.description if part is not None else ""
            story = part.story.to_dict() if hasattr(getattr(part, "story", None),
                                                    "to_dict") else None
        if run.children and description and view.config.get("dtype"):
            description = f"{description} (run in {view.config['dtype']})"
        notes = [] if complete else [
            f"This run is {run.status_line()}: the numbers below are what it wrote before it "
            f"stopped; figures that need the rest are left out."]
        sections.append(Section(
            name=name, experiment=view.experiment, description=description,
            story=story, findings=found[name], figures=figures,
            summary_tables=tables(view.summary), cost_tables=tables(view.costs),
            equal=[k for k, v in summary_pairs(view.summary).items() if v[BLOCKED] == v[UNBLOCKED]],
            params=view.params, notes=notes,
            tables_note=(f" (seed {run.seed}; every seed's are in its own run folder)"
                         if group is not None and len(run.replicates) > 1 else "")))
    seeds = [r.seed for r in run.replicates]
    return ReportContent(
        run, "Showcase: where the gradient must be cut" if run.children else
        f"{run.experiment or 'run'}", sections, _overview(sections, bool(run.children), seeds),
        top, problems + top_problems, group=group, summary=summary[0] if summary else None,
        found=found_sentence(found))


#: The verdict's CSS class (``data-verdict`` keeps the verdict's label for tools).
_CLASS = {True: "yes", False: "no", None: "measured"}
#: The longest an "at a glance" cell may be, in words, and the most of them its finding takes.
GLANCE_WORDS = 45
GLANCE_TEXT = 24
_META_KEYS = ("status", "experiment", "run_id", "seed", "device", "dtype", "threads",
              "disable_blocks", "executor", "started", "ended", "duration_s", "wall_seconds",
              "blocks_seen", "versions", "error", "warnings")
_RANGE = re.compile(r"\s\[[^\[\]]*\]")


def seeds_words(f: Any) -> str:
    """How many seeds a finding rests on ("held in 3 of 3 seeds", "seed-independent", …); for a
    prediction that did not hold, "; predicted: " and what its basis says after its source's
    colon ("Chen & He (2021): the output collapses" → "the output collapses")."""
    predicted = str(getattr(f, "basis", "") or "").strip().rstrip(".").split(": ", 1)[-1]
    return f.seeds_note + (f"; predicted: {predicted}" if f.verdict is False and predicted else "")


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
    """One finding for an "at a glance" cell in at most ``words`` words: badge, seed note (and
    the prediction, for one that did not hold), the finding in at most :data:`GLANCE_TEXT`
    words; ``words=0``: no finding; ``whole``: every word of it (the seeds' ranges left out)."""
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
    n = Counter(f.verdict for f in section.findings)
    return ", ".join([f"{n[True]} as predicted"] * bool(section.findings) + [
        f"{n[False]} did not hold"] * bool(n[False]) + [f"{n[None]} measured"] * bool(n[None]))


def _lead(section: Section, topic: str) -> Any:
    """The finding that stands for a section's ``topic`` at a glance: the experiment's
    headline, else one that did not hold, else the first."""
    of_topic = [f for f in section.findings if f.topic == topic]
    return next((f for f in of_topic if f.headline is not None), None) or next(
        (f for f in of_topic if f.verdict is False), of_topic[0] if of_topic else None)


def _md_escape(value: Any) -> Any:
    """A value as Markdown shows it: escaped, no ``|`` to break a table; Markup as it is."""
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
    meta, group, seeds = content.run.meta, content.group, [r.seed for r in content.run.replicates]
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
    """Draw a run's (or a seed group's) figures into ``figures/`` and write ``report.html``
    and ``report.md``; returns the path of ``report.html``. ``experiment`` (the
    :class:`~toolkit.lab.Experiment` that made the run) draws its own figures, else the report
    shows the generic ones. Reads only the files, so it can be drawn again at any time, also
    for an interrupted or failed run; it writes only the files it names, and deletes nothing.
    """
    t0 = time.perf_counter()
    group = SeedGroup(run_dir) if is_group(run_dir) else None
    run = group.results() if group is not None else RunResults(run_dir)
    if group is None and not (run.run_dir / "meta.json").exists():
        raise FileNotFoundError(f"write_report: {run.run_dir} has no meta.json; is it a run "
                                f"folder?")
    gc.freeze()  # what is alive now outlives the report: no collection scans it while drawing
    try:
        content = build(run, experiment, group=group)
    finally:
        gc.unfreeze()
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
    """The notes reports log inside the ``with`` (graphs laid out without graphviz), collected
    into the list instead of printed: the caller prints them where they break no lines."""
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
