"""The metrics glossary: what each metric key a run logs means, from the experiments themselves.

Each experiment declares its metrics in ``experiments/<name>/metrics.py`` (its ``METRICS``
hook, a tuple of :class:`toolkit.lab.results.schema.MetricDoc`), and
``tests/experiments/test_metrics_glossary.py`` checks the declarations against the keys a quick
run logs. This hook renders them as ``reference/metrics.md``, one table per experiment (the
algorithms' experiments in the nav's order, then the others), so the page cannot drift from
what runs write.
"""

from __future__ import annotations

import html
import importlib.metadata
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PAGE = "reference/metrics.md"
PACKAGE = "stop_gradient_experiments."  # the built-in experiments, not a user's
_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]+))?\}")
_SHOWCASE = re.compile(r"<!--\s*showcase:\s*([A-Za-z0-9_]+)\s*-->")


def declarations() -> dict[str, tuple[object, tuple]]:
    """``{experiment: (module, METRICS)}`` for every built-in experiment that declares them."""
    from toolkit.lab import load_experiment

    names = sorted(ep.name for ep in importlib.metadata.entry_points(group="toolkit.experiments")
                   if ep.value.startswith(PACKAGE))
    out = {}
    for name in names:
        module = load_experiment(name).module
        if getattr(module, "METRICS", None) is not None:
            out[name] = (module, tuple(module.METRICS))
    return out


def code(key: str) -> str:
    """How a key pattern shows in the table: ``{name:a|b}`` as ``{name}`` (the choices are
    listed under it), in code that breaks a line only after a ``/``."""
    shown = html.escape(_PLACEHOLDER.sub(lambda m: "{" + m.group(1) + "}", key))
    return f'<code class="metric-key">{shown.replace("/", "/<wbr>")}</code>'


def _choices(key: str) -> str:
    listed = [f"{m.group(1)}: {', '.join(m.group(2).split('|'))}"
              for m in _PLACEHOLDER.finditer(key) if m.group(2)]
    return f"<br><small>{'; '.join(listed)}</small>" if listed else ""


def _cell(text: str) -> str:
    return text.replace("|", r"\|").replace("\n", " ")


def _intro(module) -> str:
    """The metrics module's docstring after its first line, as Markdown."""
    doc = (sys.modules.get(f"{module.__name__}.metrics") or module).__doc__ or ""
    return doc.partition("\n")[2].strip().replace("``", "`")


def algorithm_pages(config) -> dict[str, str]:
    """``{experiment: algorithm page}`` from the ``<!-- showcase: X -->`` markers of the nav's
    algorithm pages, in the nav's order."""
    pages: dict[str, str] = {}
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Algorithms" in entry:
            for item in entry["Algorithms"]:
                page = next(iter(item.values())) if isinstance(item, dict) else item
                text = (Path(config.docs_dir) / page).read_text(encoding="utf-8")
                for name in _SHOWCASE.findall(text):
                    pages.setdefault(name, page)
    return pages


def glossary_page(found: dict[str, tuple[object, tuple]], pages: dict[str, str] | None = None
                  ) -> str:
    """The glossary's Markdown: an introduction, then one table per experiment."""
    pages = pages or {}
    order = [n for n in pages if n in found] + sorted(n for n in found if n not in pages)
    lines = [
        "# Metrics glossary", "",
        "What each number in a run's `metrics.jsonl` means. A metric key reads "
        "`<variant>/<group>/<name>`: `{variant}` below stands for `blocked` (the method as "
        "published) and `unblocked` (the same code inside `disable_blocks`); a key of neither "
        "variant names what it comes from instead (`sklearn/train/loglik`, a peer; "
        "`closed_form/...`, a reference). Any other `{name}` stands for one of the words "
        "listed under the key. In a showcase run every key starts with its experiment's name "
        "(`td_learning/blocked/a_split/V_A`).", "",
        "Each experiment declares these in `experiments/<name>/metrics.py` (its `METRICS`, a "
        "tuple of `toolkit.lab.results.schema.MetricDoc`), and a test checks them against the keys "
        "a quick run logs: this page is rendered from those declarations when the site is "
        "built.", ""]
    lines += [f"- [{name}](#{name})" for name in order] + [""]
    for name in order:
        module, docs = found[name]
        lines += [f"## {name} {{ #{name} }}", ""]
        description = getattr(module, "DESCRIPTION", "")
        where = f" ([the algorithm's page](../{pages[name]}))" if name in pages else ""
        if description:
            lines += [f"*{description[0].upper()}{description[1:]}*{where}.", ""]
        intro = _intro(module)
        if intro:
            lines += [intro, ""]
        if not docs:
            lines += ["It logs no metric per step: its numbers are in the run's "
                      "`summary.json`.", ""]
            continue
        lines += ["| key | meaning | unit |", "|---|---|---|"]
        for doc in docs:
            lines.append(f"| {code(doc.key)}{_choices(doc.key)} | {_cell(doc.meaning)} | "
                         f"{_cell(doc.unit) or '—'} |")
        lines.append("")
    return "\n".join(lines)


def on_files(files: Files, config, **kwargs) -> Files:
    """Add the glossary page, rendered from the experiments' declarations."""
    try:
        found = declarations()
    except Exception as err:  # an experiment that does not load: say which, fail the build
        raise PluginError(f"metrics glossary: {err}") from err
    if not found:
        raise PluginError("metrics glossary: no built-in experiment declares METRICS (is the "
                          "package installed: pip install -e .?)")
    files.append(File.generated(config, PAGE, content=glossary_page(found,
                                                                    algorithm_pages(config))))
    return files
