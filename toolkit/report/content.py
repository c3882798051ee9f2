"""What a report says, gathered from a run's files: sections, stories, findings, figures, tables.

The HTML and Markdown renderers (:mod:`toolkit.report.render`) lay this out top-down:

1. title, one-paragraph overview, table of contents (and for a showcase a table over all
   experiments: block, effect on the result, effect on cost);
2. per experiment: its story, its findings, one or two headline figures with captions;
3. the details, collapsed: tables, every other figure, parameters, config, meta.
"""

from __future__ import annotations

import io
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.report.figures import default_figures, plt, summary_pairs
from toolkit.report.tables import tables
from toolkit.runner.results import RunResults
from toolkit.runner.story import Finding, compute_findings, read_findings

__all__ = ["FigureItem", "ReportContent", "Section", "build"]

DPI = 100
#: How many of an experiment's own figures lead its section; the others go to the details.
HEADLINE = 2
_SAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


@dataclass
class FigureItem:
    """A rendered figure: file stem under ``figures/``, caption in words, PNG bytes."""

    name: str
    caption: str
    png: bytes = field(repr=False)
    headline: bool = False


@dataclass
class Section:
    """One experiment of the report (the run itself, or one child of a showcase)."""

    name: str
    experiment: str
    description: str
    story: dict[str, str] | None
    findings: list[Finding]
    figures: list[FigureItem]
    summary_tables: list[tuple[list[str], list[list[str]]]]
    cost_tables: list[tuple[list[str], list[list[str]]]]
    equal: list[str]
    params: dict[str, Any]
    notes: list[str]

    @property
    def headline(self) -> list[FigureItem]:
        return [f for f in self.figures if f.headline]

    @property
    def details(self) -> list[FigureItem]:
        return [f for f in self.figures if not f.headline]

    def first(self, topic: str) -> Finding | None:
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

    @property
    def showcase(self) -> bool:
        return bool(self.run.children)


def _png(fig: Any) -> bytes:
    """PNG of a figure, quantised to a 256-colour palette (plots have few colours: 3–5x less)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    try:
        from PIL import Image

        image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
        out = io.BytesIO()
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, format="PNG",
                                                                          optimize=True)
        return out.getvalue()
    except Exception:  # pillow missing or too old: the plain PNG is fine
        return buffer.getvalue()


def _caption_of(fig: Any, name: str) -> str:
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    if not title and fig.axes:
        title = fig.axes[0].get_title()
    text = " ".join((title or name.replace("_", " ")).split())
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _experiment_figures(view: RunResults, problems: list[str], quiet: bool
                        ) -> list[tuple[str, Any, str]]:
    try:
        from toolkit.runner.registry import load_experiment

        exp = load_experiment(view.experiment)
    except Exception as err:
        problems.append(f"{view.experiment}: experiment figures skipped "
                        f"({type(err).__name__}: {err})")
        return []
    if exp.figures is None:
        return []
    try:
        figures = exp.figures(view) or {}
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


def _figures(view: RunResults, prefix: str, problems: list[str], complete: bool
             ) -> list[FigureItem]:
    items = []
    for i, (name, fig, caption) in enumerate(_experiment_figures(view, problems, not complete)):
        items.append(FigureItem(_SAFE.sub("_", f"{prefix}{name}"), caption, _png(fig),
                                headline=i < HEADLINE))
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
        items.append(FigureItem(_SAFE.sub("_", f"{prefix}{name}"), caption, _png(fig)))
    if items and not any(f.headline for f in items):
        items[0].headline = True
    return items


def _story(experiment: str) -> tuple[str, dict[str, str] | None]:
    try:
        from toolkit.runner.registry import load_experiment

        exp = load_experiment(experiment)
    except Exception:
        return "", None
    story = getattr(exp.module, "STORY", None)
    return exp.description, (story.to_dict() if hasattr(story, "to_dict") else None)


def _overview(sections: list[Section], showcase: bool) -> str:
    findings = [f for s in sections for f in s.findings]
    yes = sum(f.verdict is True for f in findings)
    no = sum(f.verdict is False for f in findings)
    n = len(sections)
    what = (f"{n} experiment{'s' * (n != 1)}, each run" if showcase else "The experiment ran")
    text = (f"{what} twice from the same seed: once with its stop_gradient block active "
            f"(“blocked”, the method as published) and once with the same code inside "
            f"disable_blocks (“unblocked”), where gradient flows through the blocked quantity. "
            f"Each section states what theory predicts and what the run found.")
    if findings:
        n = len(findings)
        text += (f" Of {n} finding{'s' * (n != 1)}, {yes} came out as predicted"
                 + (f", {no} did not" if no else "") + ".")
    return text


def build(run: RunResults) -> ReportContent:
    """Gather a report's content from the run's files (figures are drawn here)."""
    problems: list[str] = []
    complete = run.status == "complete"
    findings = read_findings(run.run_dir)
    if not findings and complete:
        findings, problems_found = compute_findings(run.run_dir)
        problems += problems_found
    views = [(name, run.child(name)) for name in run.children] or [("", run)]
    sections = []
    for name, view in views:
        description, story = _story(view.experiment)
        pairs = summary_pairs(view.summary)
        equal = [k for k, v in pairs.items() if v["blocked"] == v["unblocked"]]
        notes = []
        if run.children:
            dtype = view.config.get("dtype")
            description = (f"{description} (run in {dtype})" if description and dtype
                           else description)
        if not complete:
            notes.append(f"This run is {run.status}: the numbers below are what it wrote "
                         f"before it stopped; figures that need the rest are left out.")
        sections.append(Section(
            name=name or view.experiment, experiment=view.experiment, description=description,
            story=story, findings=findings.get(name or view.experiment, []),
            figures=_figures(view, f"{name}__" if name else "", problems, complete),
            summary_tables=tables(view.summary), cost_tables=tables(view.costs), equal=equal,
            params=view.params, notes=notes))
    top: list[FigureItem] = []
    if run.children:
        for name, fig, caption in _experiment_figures(run, problems, not complete):
            top.append(FigureItem(_SAFE.sub("_", name), caption, _png(fig)))
        # the parent's own findings (e.g. a disable pattern that matched nothing)
        extra = findings.get(run.experiment)
        if extra:
            sections[0].findings = sections[0].findings + extra
    title = ("Showcase: where the gradient must be cut" if run.children
             else f"{run.experiment or 'run'}")
    return ReportContent(run, title, sections, _overview(sections, bool(run.children)), top,
                         problems)
