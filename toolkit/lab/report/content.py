"""What a report says, gathered from a run's files: sections, findings, figures, tables (a
summary's or costs' values side by side, in words and numbers with units: times in s or ms,
bytes in KiB/MiB/GiB, four significant digits, :func:`toolkit._utils.formatting.format_value`).

The renderers (:mod:`toolkit.lab.report.render`) lay it out top-down: title, what was found,
Figure 1, overview (and for a showcase a table over all experiments); per experiment its story,
findings and one or two headline figures; the details, collapsed.
"""

from __future__ import annotations

import contextlib
import hashlib
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

from toolkit._utils.formatting import format_value
from toolkit.lab.report.figures import default_figures, plt, summary_pairs
from toolkit.lab.report.summary import summary_caption, summary_figure
from toolkit.lab.results.files import read_record
from toolkit.lab.results.findings import Verdict, aggregate, found_sentence
from toolkit.lab.results.records import compute_findings
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, FindingsFile, flatten
from toolkit.lab.results.view import RunResults, SeedGroup
from toolkit.lab.style import REPORT_DPI

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
    """A file stem for a figure's ``name``: unsafe characters become ``_``; a name longer than
    :data:`MAX_STEM` is cut and given a hash of the whole, so two long names never share a file.

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
    rest: dict[str, Any] = {}
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
    :class:`~toolkit.lab.report.plots.WordTable`, shown as words (``png`` empty)."""

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
    def seeds(self) -> list[int]:
        return [r.seed for r in self.run.replicates]

    @property
    def out_dir(self) -> Path:
        """Where the report goes: the run directory, or the seed group's directory."""
        return self.group.path if self.group is not None else self.run.run_dir


def png(fig: Any) -> bytes:
    """PNG of a figure at :data:`~toolkit.lab.style.REPORT_DPI`, quantised to 256 colours
    (plots have few: 3–5x smaller), from the canvas's pixels; the figure is closed."""
    from PIL import Image  # a dependency of matplotlib

    try:
        if not hasattr(fig.canvas, "print_to_buffer"):  # a Figure() without a canvas
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            FigureCanvasAgg(fig)
        if fig.get_dpi() != REPORT_DPI:
            fig.set_dpi(REPORT_DPI)
        if not fig.stale and fig.get_layout_engine() is not None:
            fig.set_layout_engine("none")  # drawn already and unchanged: laid out already
        raw, size = fig.canvas.print_to_buffer()
    finally:
        plt.close(fig)
    out = io.BytesIO()
    Image.frombuffer("RGBA", size, raw, "raw", "RGBA", 0, 1).convert("RGB").quantize(
        colors=256, method=Image.Quantize.FASTOCTREE).save(out, format="PNG")
    return out.getvalue()


def _item(name: str, caption: str, fig: Any, headline: bool = False) -> FigureItem:
    from toolkit.lab.report.plots import WordTable

    if isinstance(fig, WordTable):  # words stay words: no image is drawn
        plt.close(fig)
        return FigureItem(safe_name(name), caption, b"", headline, table=(fig.columns, fig.rows))
    return FigureItem(safe_name(name), caption, png(fig), headline,
                      str(getattr(fig, _NOTE_ATTR, "") or ""))


def _experiment_figures(view: RunResults, experiment: Any, prefix: str, problems: list[str],
                        quiet: bool) -> list[FigureItem]:
    """The figures ``experiment.figures(view)`` draws, the first :data:`HEADLINE` leading."""
    if experiment is None:
        problems.append(f"{view.experiment}: experiment figures not drawn (the report was not "
                        f"given the experiment; `toolkit report` finds it when it is installed)")
        return []
    try:
        figures = experiment.figures(view) or {} if experiment.figures is not None else {}
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
    for i, (name, value) in enumerate(figures.items()):
        fig, caption = value if isinstance(value, tuple) else (value, "")
        if not caption:
            title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
            text = " ".join((title or (fig.axes[0].get_title() if fig.axes else "")
                             or name.replace("_", " ")).split())
            caption = text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
        out.append(_item(f"{prefix}{name}", caption, fig, i < HEADLINE))
    return out


@contextlib.contextmanager
def _drawing() -> Iterator[None]:
    """Every pyplot figure opened inside is closed at the end, whatever happened, and
    ``draw_gradient_graph``'s fallback warning is held back (the footer says it once)."""
    opened = set(plt.get_fignums())
    logger = logging.getLogger("toolkit.lens.graph_draw")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled
        for number in set(plt.get_fignums()) - opened:
            plt.close(number)


def section_figures(run: RunResults, child: str | None, experiment: Any
                    ) -> tuple[list[FigureItem], list[str]]:
    """One section's figures (the run's, or a showcase child's, named ``"<child>__…"``), drawn
    from the files: the experiment's own, else the generic views of its numbers; ``(figures,
    problems)``."""
    view = run.child(child) if child is not None else run
    prefix, problems = f"{child}__" if child else "", []
    with _drawing():
        items = _experiment_figures(view, experiment, prefix, problems,
                                    run.status != "complete")
        if items:  # the generic views of the same numbers would only repeat them
            return items, problems
        try:
            defaults = default_figures(view)
        except Exception as err:
            plt.close("all")
            problems.append(f"{view.experiment}: default figures failed: "
                            f"{type(err).__name__}: {err}")
            defaults = {}
        for i, (name, fig) in enumerate(defaults.items()):
            group = name.removeprefix("metrics_").rstrip("_0123456789") or "misc"
            items.append(_item(f"{prefix}{name}", _METRICS_CAPTION.format(group)
                               if name.startswith("metrics") else _SUMMARY_CAPTION, fig, i == 0))
    return items, problems


#: What the processes of :func:`draw_sections` draw: set before they fork, read by index.
_SECTIONS: list[tuple[RunResults, str | None, Any]] = []


def _draw_section(index: int) -> tuple[list[FigureItem], list[str]]:
    return section_figures(*_SECTIONS[index])


def draw_sections(run: RunResults, sections: list[tuple[str | None, Any]]
                  ) -> list[tuple[list[FigureItem], list[str]]]:
    """:func:`section_figures` of each ``(child, experiment)``, in order, under a tqdm bar.
    Matplotlib draws on one core; :data:`PARALLEL_SECTIONS` sections or more are drawn in two
    processes forked from this one where a second core is idle (the 1-minute load leaves one
    and a half free), except in a daemonic process (a Dask worker's)."""
    global _SECTIONS
    from tqdm.auto import tqdm

    bar = {"total": len(sections), "desc": "report", "unit": "section", "leave": False,
           "dynamic_ncols": True, "disable": None if multiprocessing.parent_process() is None
           else True}  # on a terminal only, and only the command's process
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    idle = (cores or 1) - (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)
    if len(sections) < PARALLEL_SECTIONS or idle < 1.5 or \
            "fork" not in multiprocessing.get_all_start_methods() or \
            multiprocessing.current_process().daemon:
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
        yes = sum(f.verdict is True for f in findings)
        no = sum(f.verdict is False for f in findings)
        k = len(findings)
        text += (f" Of {k} finding{'s' * (k != 1)}, {yes} came out as predicted by a named "
                 f"theorem, closed form or paper" + (f", {no} did not" if no else "")
                 + f", and {k - yes - no} are measurements without a prediction; "
                   f"{sum(f.seed_independent for f in findings)} cannot depend on the seed "
                   f"(exact values, closed forms, graph sizes).")
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
    complete = run.status == "complete"
    root = group.path if group is not None else run.run_dir
    record = read_record(root / "findings.json", FindingsFile, root=root)
    findings = record.findings if record is not None else {}
    problems = list(record.problems) if group is not None and record is not None else []
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
            name=name or view.experiment, experiment=view.experiment, description=description,
            story=story, findings=findings.get(name or view.experiment, []), figures=figures,
            summary_tables=tables(view.summary), cost_tables=tables(view.costs),
            equal=[k for k, v in summary_pairs(view.summary).items() if v[BLOCKED] == v[UNBLOCKED]],
            params=view.params, notes=notes,
            tables_note=(f" (seed {run.seed}; every seed's are in its own run folder)"
                         if group is not None and len(run.replicates) > 1 else "")))
    top: list[FigureItem] = []
    if run.children:
        with _drawing():
            top = _experiment_figures(run, experiment, "", problems, not complete)
        if findings.get(run.experiment):  # the parent's own (a pattern that matched nothing)
            sections[0].findings = sections[0].findings + findings[run.experiment]
    headlines = [(s.name, s.findings) for s in sections]
    with _drawing():
        fig = summary_figure(headlines)
        summary = _item("figure_1", summary_caption(headlines), fig) if fig is not None else None
    seeds = [r.seed for r in run.replicates]
    return ReportContent(
        run, "Showcase: where the gradient must be cut" if run.children else
        f"{run.experiment or 'run'}", sections, _overview(sections, bool(run.children), seeds),
        top, problems, group=group, summary=summary,
        found=found_sentence({s.name: s.findings for s in sections}))
