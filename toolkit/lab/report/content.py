"""What a report says, gathered from a run's files: sections, stories, findings, figures, tables.

The HTML and Markdown renderers (:mod:`toolkit.lab.report.render`) lay this out top-down:

1. title, one-paragraph overview, table of contents (and for a showcase a table over all
   experiments: block, effect on the result, effect on cost);
2. per experiment: its story, its findings, one or two headline figures with captions;
3. the details, collapsed: tables, every other figure, parameters, config, meta.
"""

from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing
import os
import re
import traceback
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.lab.report.figures import default_figures, plt, summary_pairs
from toolkit.lab.report.summary import summary_caption, summary_figure
from toolkit.lab.report.tables import tables
from toolkit.lab.results.files import read_record
from toolkit.lab.results.findings import Verdict, aggregate, found_sentence
from toolkit.lab.results.records import compute_findings
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, FindingsFile
from toolkit.lab.results.view import RunResults, SeedGroup
from toolkit.lab.style import REPORT_DPI

__all__ = ["FigureItem", "ReportContent", "Section", "build", "draw_sections", "safe_name",
           "section_figures"]

DPI = REPORT_DPI  # the grammar's font sizes are checked at this resolution
#: How many of an experiment's own figures lead its section; the others go to the details.
HEADLINE = 2
#: Runs of characters a figure's file name may not hold (see :func:`safe_name`).
SAFE = re.compile(r"[^A-Za-z0-9_.\-]+")
#: the longest file stem a figure gets: names come from results (metric keys, summary keys)
#: and may be of any length, file names may not
MAX_STEM = 80


def safe_name(name: str) -> str:
    """A file stem for ``name`` (a figure's, which may come from a metric key): unsafe
    characters become ``_``; a name longer than :data:`MAX_STEM` is cut and given a hash of
    the whole name, so two long names never share a file. The full name stays in the page.

    >>> safe_name("em_gmm__blocked/loss"), len(safe_name("k" * 300))
    ('em_gmm__blocked_loss', 80)
    """
    import hashlib

    stem = SAFE.sub("_", name)
    if len(stem) <= MAX_STEM:
        return stem
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
    return f"{stem[:MAX_STEM - 13]}-{digest}"


@dataclass
class FigureItem:
    """A rendered figure: file stem under ``figures/``, caption in words, PNG bytes; ``note``:
    how it was drawn, said once in the report's footer (a backward graph laid out without
    graphviz); ``table``: ``(columns, rows)`` of a :class:`~toolkit.lab.report.plots.WordTable`,
    shown as a table of words instead of an image (its ``png`` is empty)."""

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

    @property
    def headline(self) -> list[FigureItem]:
        return [f for f in self.figures if f.headline]

    @property
    def details(self) -> list[FigureItem]:
        return [f for f in self.figures if not f.headline]

    def first(self, topic: str) -> Verdict | None:
        return next((f for f in self.findings if f.topic == topic), None)


@dataclass
class ReportContent:
    """Everything a report shows, in order."""

    run: RunResults
    title: str
    sections: list[Section]
    overview: str
    top_figures: list[FigureItem]
    problems: list[str]
    report_seconds: float = 0.0
    group: SeedGroup | None = None
    #: Figure 1: every section's headline finding (:mod:`toolkit.lab.report.summary`)
    summary: FigureItem | None = None
    #: what was found, in one sentence: the report opens with it, as findings.md does
    found: str = ""

    @property
    def footer_notes(self) -> list[str]:
        """How figures were drawn, each said once (e.g. graphs laid out without graphviz)."""
        figures = [f for s in self.sections for f in s.figures] + self.top_figures + \
            ([self.summary] if self.summary is not None else [])
        return list(dict.fromkeys(f.note for f in figures if f.note))

    @property
    def showcase(self) -> bool:
        return bool(self.run.children)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.run.replicates]

    @property
    def out_dir(self) -> Path:
        """Where the report goes: the run directory, or the seed group's directory."""
        return self.group.path if self.group is not None else self.run.run_dir


def _png(fig: Any) -> bytes:
    """PNG of a figure at ``DPI``, quantised to a 256-colour palette (plots have few colours:
    3–5x smaller); the figure is closed. The pixels are taken from the canvas (no PNG is
    encoded twice)."""
    try:
        if not hasattr(fig.canvas, "print_to_buffer"):  # a Figure() without a canvas
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            FigureCanvasAgg(fig)
        if fig.get_dpi() != DPI:
            fig.set_dpi(DPI)
        if not fig.stale and fig.get_layout_engine() is not None:
            # drawn already (a legend measured, labels nudged) and unchanged since: its layout
            # is current, and a second constrained-layout search would only repeat it
            fig.set_layout_engine("none")
        raw, size = fig.canvas.print_to_buffer()
    finally:
        plt.close(fig)
    from PIL import Image  # a dependency of matplotlib

    image = Image.frombuffer("RGBA", size, raw, "raw", "RGBA", 0, 1).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, format="PNG")
    return out.getvalue()


def _caption_of(fig: Any, name: str) -> str:
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    if not title and fig.axes:
        title = fig.axes[0].get_title()
    text = " ".join((title or name.replace("_", " ")).split())
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _experiment_figures(view: RunResults, experiment: Any, problems: list[str], quiet: bool
                        ) -> list[tuple[str, Any, str]]:
    """The figures ``experiment.figures(view)`` draws (none without an experiment)."""
    if experiment is None:
        problems.append(f"{view.experiment}: experiment figures not drawn (the report was not "
                        f"given the experiment; `toolkit report` finds it when it is installed)")
        return []
    if experiment.figures is None:
        return []
    try:
        figures = experiment.figures(view) or {}
        if not isinstance(figures, Mapping):
            raise TypeError(f"figures() must return a dict name → Figure, got "
                            f"{type(figures).__name__}")
    except Exception as err:
        plt.close("all")
        if not quiet:  # an unfinished run: figures that need missing results are left out
            last = traceback.extract_tb(err.__traceback__)[-1]
            problems.append(f"{view.experiment}: figures() failed: {type(err).__name__}: "
                            f"{err} ({Path(last.filename).name}:{last.lineno})")
        return []
    out = []
    for name, value in figures.items():
        fig, caption = value if isinstance(value, tuple) else (value, "")
        out.append((name, fig, caption or _caption_of(fig, name)))
    return out


_DEFAULT_CAPTIONS = {
    "metrics": "Logged metrics of the group {group!r} against the step, every variant on the "
               "same axes (blocked solid blue, unblocked dashed vermillion).",
    "summary": "Summary numbers that differ between the blocked and the unblocked variant.",
}


#: The attribute with which a figure says how it was drawn (``toolkit.lens.graph_draw``'s
#: ``LAYOUT_NOTE``, named here so that the report does not import torch).
_NOTE_ATTR = "gradient_graph_layout_note"


def _item(name: str, caption: str, fig: Any, headline: bool = False) -> FigureItem:
    from toolkit.lab.report.plots import WordTable

    if isinstance(fig, WordTable):  # words stay words: no image is drawn
        plt.close(fig)
        return FigureItem(safe_name(name), caption, b"", headline=headline,
                          table=(fig.columns, fig.rows))
    note = str(getattr(fig, _NOTE_ATTR, "") or "")
    return FigureItem(safe_name(name), caption, _png(fig), headline=headline, note=note)


@contextlib.contextmanager
def _drawing() -> Iterator[None]:
    """Draw inside: every pyplot figure opened here is closed at the end, whatever happened,
    and ``draw_gradient_graph``'s fallback warning is held back (the report says it once, in
    its footer and its log, from the figures' notes)."""
    opened = set(plt.get_fignums())
    logger = logging.getLogger("toolkit.lens.graph_draw")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled
        for number in set(plt.get_fignums()) - opened:
            plt.close(number)


def _figures(view: RunResults, experiment: Any, prefix: str, problems: list[str],
             complete: bool) -> list[FigureItem]:
    drawn = _experiment_figures(view, experiment, problems, not complete)
    items = [_item(f"{prefix}{name}", caption, fig, i < HEADLINE)
             for i, (name, fig, caption) in enumerate(drawn)]
    if items:
        # the experiment draws its own results; the generic views of the same numbers would
        # only repeat them (every number stays in the tables and metrics.jsonl)
        return items
    try:
        defaults = default_figures(view)
    except Exception as err:
        plt.close("all")
        problems.append(f"{view.experiment}: default figures failed: {type(err).__name__}: {err}")
        defaults = {}
    for name, fig in defaults.items():
        if name.startswith("metrics"):
            group = name.removeprefix("metrics_").rstrip("_0123456789") or "misc"
            caption = _DEFAULT_CAPTIONS["metrics"].format(group=group)
        else:
            caption = _DEFAULT_CAPTIONS["summary"]
        items.append(_item(f"{prefix}{name}", caption, fig))
    if items and not any(f.headline for f in items):
        items[0].headline = True
    return items


def section_figures(run: RunResults, child: str | None, experiment: Any
                    ) -> tuple[list[FigureItem], list[str]]:
    """One section's figures (the run's, or a showcase child's, whose names start with
    ``"<child>__"``), drawn from the files; ``(figures, problems)``."""
    view = run.child(child) if child is not None else run
    problems: list[str] = []
    with _drawing():
        return _figures(view, experiment, f"{child}__" if child else "", problems,
                        run.status == "complete"), problems


#: What the processes of :func:`draw_sections` draw: set before they fork, read by index.
_SECTIONS: list[tuple[RunResults, str | None, Any]] = []
#: The fewest sections worth a second process (a showcase has ten).
PARALLEL_SECTIONS = 4


def _draw_section(index: int) -> tuple[list[FigureItem], list[str]]:
    return section_figures(*_SECTIONS[index])


def draw_sections(run: RunResults, sections: list[tuple[str | None, Any]]
                  ) -> list[tuple[list[FigureItem], list[str]]]:
    """:func:`section_figures` of each ``(child, experiment)``, in order. Matplotlib draws on
    one core; a report of :data:`PARALLEL_SECTIONS` sections or more (the showcase) draws them
    in two processes forked from this one (``ProcessPoolExecutor`` on a fork context: the
    experiments and the files read so far come along), one section at a time each, where a
    second core is idle (the 1-minute load average leaves one and a half free: on a busy
    machine a second process only adds the cost of forking); a daemonic process (a Dask
    worker's) draws them itself."""
    global _SECTIONS
    from tqdm.auto import tqdm

    # a bar on a terminal (tqdm's disable=None), drawn by the command's process only
    bar = {"total": len(sections), "desc": "report", "unit": "section", "leave": False,
           "dynamic_ncols": True, "disable": None if multiprocessing.parent_process() is None
           else True}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    idle = (cores or 1) - (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)
    if len(sections) < PARALLEL_SECTIONS or idle < 1.5 or \
            "fork" not in multiprocessing.get_all_start_methods() or \
            multiprocessing.current_process().daemon:  # a Dask worker may have no children
        return [section_figures(run, child, part) for child, part in tqdm(sections, **bar)]
    _SECTIONS = [(run, child, part) for child, part in sections]
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    try:
        drawn = list(tqdm(pool.map(_draw_section, range(len(sections))), **bar))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: nothing new is started
        raise
    finally:
        _SECTIONS = []
    pool.shutdown()
    return drawn


def _story(run: RunResults, name: str, parts: Mapping[str, Any]
           ) -> tuple[str, dict[str, str] | None]:
    """An experiment's description and story: as the run wrote them into ``meta.json``
    (``about``), else from the experiment handed to the report (runs written before)."""
    about = run.meta.get("about", {}).get(name)
    if about is not None:
        return about.get("description", ""), about.get("story")
    if name not in parts:
        return "", None
    story = parts[name].story
    return parts[name].description, (story.to_dict() if hasattr(story, "to_dict") else None)


def _overview(sections: list[Section], showcase: bool, seeds: list[int]) -> str:
    findings = [f for s in sections for f in s.findings]
    n = len(sections)
    what = (f"{n} experiment{'s' * (n != 1)}, each run" if showcase else "The experiment ran")
    n_seeds = len(seeds)
    text = (f"{what} twice from the same seed: once with its stop_gradient block active "
            f"(“blocked”, the method as published) and once with the same code inside "
            f"disable_blocks (“unblocked”), where gradient flows through the blocked quantity. "
            f"Each section states what theory predicts and what the run found.")
    if n_seeds > 1:
        text += (f" Every comparison ran with {n_seeds} seeds ({', '.join(map(str, seeds))}): a "
                 f"number in a finding is the mean over the seeds with its range in brackets, "
                 f"[smallest, largest], and a prediction counts as held only where it held in "
                 f"every seed (or in the share its finding states). Curves in the figures "
                 f"show every seed, as a band (the range) around the mean or, where the seeds "
                 f"sit at different levels, as one line per seed; images, graphs and the "
                 f"tables in the details are the first seed's.")
    if findings:
        yes = sum(f.verdict is True for f in findings)
        no = sum(f.verdict is False for f in findings)
        fixed = sum(f.seed_independent for f in findings)
        k = len(findings)
        text += (f" Of {k} finding{'s' * (k != 1)}, {yes} came out as predicted by a named "
                 f"theorem, closed form or paper"
                 + (f", {no} did not" if no else "")
                 + f", and {k - yes - no} are measurements without a prediction; {fixed} "
                   f"cannot depend on the seed (exact values, closed forms, graph sizes).")
    return text


def build(run: RunResults, experiment: Any = None, *, group: SeedGroup | None = None
          ) -> ReportContent:
    """Gather a report's content from the run's files (figures are drawn here).

    ``experiment`` (a :class:`~toolkit.lab.Experiment`) draws its own figures, and for a
    showcase its parts draw theirs; without it the report shows the generic figures of the
    logged numbers. With ``group`` (a seed group) ``run`` is its first seed with the others
    as replicates: the findings are the group's, over every seed, and the figures see every
    seed.
    """
    problems: list[str] = []
    complete = run.status == "complete"
    record = read_record((group.path if group is not None else run.run_dir) / "findings.json",
                         FindingsFile, root=group.path if group is not None else run.run_dir)
    findings = record.findings if record is not None else {}
    if group is not None and record is not None:
        problems += record.problems
    parts = experiment.parts if experiment is not None else {}
    if not findings and complete and group is None and experiment is not None:
        found, problems_found = compute_findings(run.run_dir, experiment)
        findings, more = aggregate({run.seed: found})
        problems += problems_found + more
    views = [(name, run.child(name)) for name in run.children] or [("", run)]
    drawn = draw_sections(run, [(name or None, parts.get(view.experiment))
                                for name, view in views])
    sections = []
    for (name, view), (figures, drawn_problems) in zip(views, drawn):
        problems += drawn_problems
        description, story = _story(run, view.experiment, parts)
        pairs = summary_pairs(view.summary)
        equal = [k for k, v in pairs.items() if v[BLOCKED] == v[UNBLOCKED]]
        notes = []
        if run.children:
            dtype = view.config.get("dtype")
            description = (f"{description} (run in {dtype})" if description and dtype
                           else description)
        if not complete:
            notes.append(f"This run is {run.status_line()}: the numbers below are what it "
                         f"wrote before it stopped; figures that need the rest are left out.")
        tables_note = (f" (seed {run.seed}; every seed's are in its own run folder)"
                       if group is not None and len(run.replicates) > 1 else "")
        sections.append(Section(
            name=name or view.experiment, experiment=view.experiment, description=description,
            story=story, findings=findings.get(name or view.experiment, []), figures=figures,
            summary_tables=tables(view.summary), cost_tables=tables(view.costs), equal=equal,
            params=view.params, notes=notes, tables_note=tables_note))
    top: list[FigureItem] = []
    if run.children:
        with _drawing():
            top = [_item(name, caption, fig) for name, fig, caption in
                   _experiment_figures(run, experiment, problems, not complete)]
        extra = findings.get(run.experiment)  # the parent's own (a pattern that matched nothing)
        if extra:
            sections[0].findings = sections[0].findings + extra
    title = ("Showcase: where the gradient must be cut" if run.children
             else f"{run.experiment or 'run'}")
    seeds = [r.seed for r in run.replicates]
    with _drawing():
        headlines = [(s.name, s.findings) for s in sections]
        fig = summary_figure(headlines)
        summary = (_item("figure_1", summary_caption(headlines), fig) if fig is not None
                   else None)
    found = found_sentence({s.name: s.findings for s in sections})
    return ReportContent(run, title, sections, _overview(sections, bool(run.children), seeds),
                         top, problems, group=group, summary=summary, found=found)
