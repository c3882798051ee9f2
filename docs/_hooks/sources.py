"""Each algorithm page links to its source files, shown on pages of this site.

The site has no repository to link to, and must work opened from disk: the source files are
rendered as pages of the site itself (``source/<path>.md``, the code with line numbers, left
out of search), as built from the same commit as the rest. Under the first paragraph of
every ``algorithms/<name>.md`` (the index aside) goes one line: the algorithm's module
``toolkit/algorithms/<name>.py`` (or each file of the package ``toolkit/algorithms/<name>/``),
the experiment of its ``<!-- showcase: X -->`` marker (``experiments/X/``), and that
experiment's table in the metrics glossary.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
ALGORITHMS = ROOT / "toolkit" / "algorithms"
_SHOWCASE = re.compile(r"<!--\s*showcase:\s*([A-Za-z0-9_]+)\s*-->")


def module_files(name: str) -> list[Path]:
    """The source files of algorithm ``name``: its module, or every file of its package."""
    if (ALGORITHMS / f"{name}.py").exists():
        return [ALGORITHMS / f"{name}.py"]
    return sorted((ALGORITHMS / name).glob("*.py"))


def experiment_files(experiment: str) -> list[Path]:
    """The experiment's files, its ``__main__.py`` (``python -m``) aside."""
    return sorted(p for p in (ROOT / "experiments" / experiment).glob("*.py")
                  if p.name != "__main__.py")


def source_uri(path: Path) -> str:
    """The site page of a source file: ``source/toolkit/algorithms/td.py.md``."""
    return f"source/{path.relative_to(ROOT).as_posix()}.md"


def source_page(path: Path) -> str:
    """A page showing the file ``path``, numbered, out of search."""
    text = path.read_text(encoding="utf-8").rstrip("\n")
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    fence = "`" * max(3, *(n + 1 for n in runs)) if runs else "```"
    relative = path.relative_to(ROOT).as_posix()
    return "\n".join(["---", "search:", "  exclude: true", "---", "",
                      f"# `{relative}`", "",
                      "The source file as this site was built from it.", "",
                      f'{fence}python linenums="1"', text, fence, ""])


def _pages(config) -> list[tuple[str, str, list[Path]]]:
    """``(page, experiment or "", files)`` of every algorithm page but the index."""
    out = []
    for page in sorted((Path(config.docs_dir) / "algorithms").glob("*.md")):
        if page.stem == "index":
            continue
        files = module_files(page.stem)
        if not files:
            raise PluginError(f"sources: algorithms/{page.name} has no module "
                              f"toolkit/algorithms/{page.stem}.py or package of that name")
        found = _SHOWCASE.findall(page.read_text(encoding="utf-8"))
        out.append((f"algorithms/{page.name}", found[0] if found else "", files))
    return out


_LINKS: dict[str, str] = {}


def _link(path: Path, text: str | None = None) -> str:
    return f"[`{text or path.relative_to(ROOT).as_posix()}`](../{source_uri(path)})"


def on_files(files: Files, config, **kwargs) -> Files:
    """Add a page per source file an algorithm page links to; note each page's line."""
    _LINKS.clear()
    shown: set[Path] = set()
    for page, experiment, module in _pages(config):
        if len(module) == 1:
            parts = [f"**Source:** {_link(module[0])}"]
        else:
            folder = module[0].parent.relative_to(ROOT).as_posix()
            parts = [f"**Source:** `{folder}/`: " + ", ".join(_link(p, p.name) for p in module)]
        shown.update(module)
        if experiment:
            ran = experiment_files(experiment)
            parts.append(f"**its experiment** `experiments/{experiment}/`: "
                         + ", ".join(_link(p, p.name) for p in ran))
            parts.append(f"[what its metrics mean](../reference/metrics.md#{experiment})")
            shown.update(ran)
        _LINKS[page] = " · ".join(parts)
    for path in sorted(shown):
        files.append(File.generated(config, source_uri(path), content=source_page(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Put the page's source line under its first paragraph."""
    line = _LINKS.get(page.file.src_uri)
    if not line:
        return markdown
    blocks = markdown.split("\n\n")
    first = next((i for i, b in enumerate(blocks) if b.strip() and not b.startswith("#")), 0)
    blocks.insert(first + 1, line)
    return "\n\n".join(blocks)
