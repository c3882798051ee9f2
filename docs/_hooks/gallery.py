"""The executed gallery: every ``examples/*.py`` runs when the site is built, cell by cell.

A gallery script is a plain Python file (``python examples/plot_td_baird.py`` runs it too) in
the cell format of scikit-learn's gallery and Jupytext's "percent" scripts:

- its module docstring: the first line is the title, the rest the introduction;
- ``# %%`` starts a cell (``# %% Heading`` gives it a heading); the comment lines that open
  a cell are its prose (Markdown), the lines after them its code.

Each script runs in its own process (matplotlib's Agg backend, a fresh working directory, at
most ``TIMEOUT`` seconds, one torch thread), its cells in order in one namespace. After each
cell, every figure open in pyplot, then every new ``matplotlib.figure.Figure`` held in a
global variable, is saved as a PNG, closed, and rendered under that cell, after what the cell
printed. A script that fails fails the build, with its traceback (line numbers are the
script's). What it prints and says follows the docs' rule for numbers (``digits.py``: at most
4 significant digits).

Each example's page shows its run time and links to the script and to a notebook made from
its cells (no outputs); the gallery's front page has every example, in the order of the
"Algorithms" section of the nav (an example ``plot_<page>_*.py`` belongs to
``algorithms/<page>.md``), then the others, and links to the scripts and notebooks of all of
them in two zip files.

The results are cached under ``.cache/docs-gallery/``, keyed by the script, this hook and every
source file of the package (so ``mkdocs serve`` does not rerun unchanged scripts); ``CI`` set,
or ``TOOLKIT_DOCS_NO_CACHE=1``, runs every script. ``<!-- gallery: NAME -->`` in any page
embeds that example's first figure with a link to its page.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CACHE = ROOT / ".cache" / "docs-gallery"
TIMEOUT = 240
WORKERS = 2

# Runs one script's cells in one namespace (argv: cells.json, script, output folder) and writes
# result.json: per cell what it printed, its figures (PNG names and alt texts) and its seconds.
_RUNNER = r"""
import contextlib, io, json, sys, time, traceback
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
plt.show = lambda *args, **kwargs: None
cells_file, script, out = sys.argv[1:4]
sys.argv = [script]
cells = json.load(open(cells_file, encoding="utf-8"))
names = {"__name__": "__main__", "__file__": script}
seen, results, n = set(), [], 0

def alt(fig):
    titles = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
    return "; ".join(t for t in titles if t)

for cell in cells:
    buffer = io.StringIO()
    start = time.perf_counter()
    try:
        code = compile("\n" * (cell["line"] - 1) + cell["code"], script, "exec")
        with contextlib.redirect_stdout(buffer):
            exec(code, names)
    except BaseException:
        sys.stdout.write(buffer.getvalue())
        traceback.print_exc()
        sys.exit(1)
    seconds = time.perf_counter() - start
    figures = [plt.figure(num) for num in plt.get_fignums()]
    figures += [v for v in list(names.values())
                if isinstance(v, Figure) and id(v) not in seen and v not in figures]
    saved = []
    for fig in figures:
        seen.add(id(fig))
        fig.savefig(f"{out}/figure_{n}.png", dpi=100)
        saved.append({"file": f"figure_{n}.png", "alt": alt(fig)})
        n += 1
    plt.close("all")
    results.append({"output": buffer.getvalue(), "figures": saved, "seconds": seconds})
json.dump({"cells": results}, open(f"{out}/result.json", "w", encoding="utf-8"))
"""

_spec = importlib.util.spec_from_file_location("docs_digits", Path(__file__).with_name("digits.py"))
digits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digits)

_GALLERY_RE = re.compile(r"<!--\s*gallery:\s*([A-Za-z0-9_]+)\s*-->")
_CELL_RE = re.compile(r"^# %%(?P<heading>.*)$")
_ZIPS = {"py": "gallery_python.zip", "ipynb": "gallery_notebooks.zip"}


@dataclass
class Cell:
    """One cell of a gallery script: its heading, prose, code, and what running it gave."""

    heading: str
    prose: str
    code: str
    line: int  # the script's line of the code's first line
    output: str = ""
    figures: list[tuple[bytes, str]] = field(default_factory=list)  # (PNG, alt text)
    seconds: float = 0.0


@dataclass
class Example:
    """One gallery script and what running it gave."""

    name: str
    path: Path
    title: str
    text: str
    cells: list[Cell]
    algorithm: str | None = None  # the algorithm page it belongs to
    notebook: str = ""

    @property
    def code(self) -> str:
        """The code of every cell, without the prose."""
        return "\n\n".join(c.code for c in self.cells if c.code)

    @property
    def figures(self) -> list[tuple[bytes, str]]:
        return [f for c in self.cells for f in c.figures]

    @property
    def output(self) -> str:
        return "".join(c.output for c in self.cells)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cells)


def split_cells(lines: list[str], first_line: int) -> list[Cell]:
    """The cells of a script's body (``lines``, the first of them the script's line
    ``first_line``): split at ``# %%``, each cell's opening comment lines its prose."""
    starts = [i for i, line in enumerate(lines) if _CELL_RE.match(line)]
    segments = []  # (the line of its "# %%" or None, its first line, the line after it)
    if not starts or starts[0] > 0:
        segments.append((None, 0, starts[0] if starts else len(lines)))
    ends = [*starts[1:], len(lines)]
    segments += [(s, s + 1, e) for s, e in zip(starts, ends[:len(starts)], strict=True)]
    cells = []
    for marker, i, end in segments:
        heading = _CELL_RE.match(lines[marker])["heading"].strip() if marker is not None else ""
        prose = []
        while i < end and (lines[i] == "#" or lines[i].startswith("# ")):
            prose.append(lines[i][2:])
            i += 1
        body = lines[i:end]
        while body and not body[0].strip():
            body, i = body[1:], i + 1
        code = "\n".join(body).rstrip()
        if heading or prose or code:
            cells.append(Cell(heading, "\n".join(prose).strip(), code, first_line + i))
    return cells


def read_example(path: Path) -> Example:
    """The title, introduction and cells of a gallery script (its docstring split off)."""
    source = path.read_text(encoding="utf-8")
    module = ast.parse(source)
    doc = ast.get_docstring(module)
    if not doc or not module.body or not isinstance(module.body[0], ast.Expr):
        raise PluginError(f"gallery: {path.name}: a gallery script starts with a docstring "
                          f"whose first line is its title")
    title, _, text = doc.partition("\n")
    end = module.body[0].end_lineno
    cells = split_cells(source.splitlines()[end:], end + 1)
    return Example(path.stem, path, title.strip().rstrip("."), text.strip(), cells)


def _source_key(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes() + Path(__file__).read_bytes())
    for source in sorted((ROOT / "toolkit").rglob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _fill(example: Example, folder: Path) -> None:
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))["cells"]
    for cell, got in zip(example.cells, result, strict=True):
        cell.output, cell.seconds = got["output"], got["seconds"]
        cell.figures = [((folder / f["file"]).read_bytes(), f["alt"]) for f in got["figures"]]


def _run(example: Example) -> Example:
    """Run ``example`` (or read it from the cache) and fill in what each cell gave."""
    use_cache = not os.environ.get("CI") and os.environ.get("TOOLKIT_DOCS_NO_CACHE") != "1"
    cached = CACHE / f"{example.name}-{_source_key(example.path)}"
    if use_cache and (cached / "result.json").exists():
        _fill(example, cached)
        return example
    with tempfile.TemporaryDirectory(prefix="gallery-") as tmp:
        cells = Path(tmp) / "cells.json"
        cells.write_text(json.dumps([{"code": c.code, "line": c.line} for c in example.cells]),
                         encoding="utf-8")
        out = Path(tmp) / "out"
        out.mkdir()
        env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        try:
            proc = subprocess.run([sys.executable, "-c", _RUNNER, str(cells), str(example.path),
                                   str(out)], cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise PluginError(f"gallery: {example.path.name} ran past {TIMEOUT} s") from exc
        if proc.returncode != 0:
            raise PluginError(f"gallery: {example.path.name} failed (exit status "
                              f"{proc.returncode}):\n{proc.stdout}{proc.stderr}")
        _fill(example, out)
        if not example.figures:
            raise PluginError(f"gallery: {example.path.name} drew no figure: a gallery "
                              f"script plots with and without the block")
        if use_cache:
            shutil.rmtree(cached, ignore_errors=True)
            shutil.copytree(out, cached)
    return example


def algorithm_order(config) -> list[str]:
    """The algorithm pages' names (``softmax``, ``em``, ...) in the nav's order."""
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Algorithms" in entry:
            pages = [next(iter(p.values())) if isinstance(p, dict) else p
                     for p in entry["Algorithms"]]
            return [Path(p).stem for p in pages if Path(p).stem != "index"]
    return []


def ordered(examples: list[Example], algorithms: list[str]) -> list[Example]:
    """``examples`` in the algorithms' order (``plot_<algorithm>_*``), then the others."""
    for ex in examples:
        ex.algorithm = next((a for a in sorted(algorithms, key=len, reverse=True)
                             if ex.name.startswith(f"plot_{a}_")), None)
    rank = {a: i for i, a in enumerate(algorithms)}
    return sorted(examples, key=lambda ex: (rank.get(ex.algorithm, len(rank)), ex.name))


def run_examples(algorithms: list[str]) -> list[Example]:
    """Every script of ``examples/``, run two at a time; the first failure stops the build."""
    examples = [read_example(p) for p in sorted(EXAMPLES.glob("*.py"))]
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        examples = list(pool.map(_run, examples))
    for ex in examples:  # what a page shows follows the docs' rule for numbers
        shown = ex.title + ex.text + "".join(c.output + c.prose + c.heading for c in ex.cells)
        long = digits.long_numbers(shown)
        if long:
            raise PluginError(f"gallery: {ex.path.name} shows numbers with more than "
                              f"{digits.MAX_DIGITS} significant digits: {', '.join(long)} "
                              f"(format them with :.4g or fewer)")
        ex.notebook = notebook(ex)
    return ordered(examples, algorithms)


def notebook(example: Example) -> str:
    """The example as a Jupyter notebook (nbformat 4): Markdown cells for the title, the
    introduction and each cell's prose, code cells without outputs."""
    def markdown(text: str) -> dict:
        return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(True)}

    cells = [markdown(f"# {example.title}\n\n{example.text}")]
    for cell in example.cells:
        prose = "\n\n".join(t for t in (f"## {cell.heading}" if cell.heading else "",
                                        cell.prose) if t)
        if prose:
            cells.append(markdown(prose))
        if cell.code:
            cells.append({"cell_type": "code", "execution_count": None, "metadata": {},
                          "outputs": [], "source": cell.code.splitlines(True)})
    return json.dumps({"cells": cells, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 4},
        indent=1, ensure_ascii=False) + "\n"


def _seconds(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


def _downloads(example: Example) -> list[str]:
    name = example.name
    return [f'[Download the script: {name}.py]({name}.py){{ .md-button download="{name}.py" }}'
            f' [Download a notebook: {name}.ipynb]({name}.ipynb){{ .md-button '
            f'download="{name}.ipynb" }}', ""]


def example_page(example: Example) -> str:
    """The Markdown page of one example: introduction, then each cell's heading, prose, code,
    what it printed and its figures; its run time and the downloads."""
    name = example.name
    lines = [f"# {example.title}", "", example.text, "",
             f"*Ran in {_seconds(example.seconds)} when this site was built "
             f"(`python examples/{name}.py`). Download [the script]({name}.py)"
             f"{{ download=\"{name}.py\" }} or [a notebook]({name}.ipynb)"
             f"{{ download=\"{name}.ipynb\" }}.*", ""]
    n = 0
    for cell in example.cells:
        if cell.heading:
            lines += [f"## {cell.heading}", ""]
        if cell.prose:
            lines += [cell.prose, ""]
        if cell.code:
            lines += ["```python", cell.code, "```", ""]
        if cell.output.strip():
            lines += ['```text title="Out"', cell.output.rstrip(), "```", ""]
        for _, alt in cell.figures:
            label = alt or f"{example.title}, figure {n + 1}"
            lines += [f"![{_escape(label)}]({example.name}_{n}.png)", ""]
            n += 1
    lines += ["## Downloads { #downloads }", "",
              f"**Total running time of the script:** {_seconds(example.seconds)}.", "",
              *_downloads(example)]
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]").replace("*", r"\*").replace("_", r"\_")


def index_page(examples: list[Example]) -> str:
    """The gallery's front page: one card per example, its first figure as the thumbnail, in
    the algorithms' order, then the other examples; downloads of all of them."""
    lines = ["# Gallery", "",
             "Short scripts, each run when this site is built: they import the public API and "
             "compute the same thing with and without its block, cell by cell, the prose "
             "between the cells saying why. Every figure below was drawn by that build; a "
             "script that fails, fails the build. Each page links to its script and to a "
             "notebook made from it.", ""]
    groups = [("The algorithms", [ex for ex in examples if ex.algorithm]),
              ("The tools", [ex for ex in examples if not ex.algorithm])]
    for heading, group in groups:
        if not group:
            continue
        lines += [f"## {heading}", "", '<div class="grid cards" markdown>', ""]
        for ex in group:
            lines += [f"-   [**{ex.title}**]({ex.name}.md)", "",
                      f"    [![{_escape(ex.title)}]({ex.name}_0.png)]({ex.name}.md)", "",
                      f"    *Ran in {_seconds(ex.seconds)}.*", ""]
        lines += ["</div>", ""]
    lines += ["## Download", "",
              f"[Every script: {_ZIPS['py']}]({_ZIPS['py']}){{ .md-button "
              f"download=\"{_ZIPS['py']}\" }} "
              f"[Every notebook: {_ZIPS['ipynb']}]({_ZIPS['ipynb']}){{ .md-button "
              f"download=\"{_ZIPS['ipynb']}\" }}", ""]
    return "\n".join(lines)


def _zip(members: dict[str, bytes]) -> bytes:
    """A zip of ``members`` that is the same bytes for the same members."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


_EXAMPLES: dict[str, Example] = {}


def on_config(config, **kwargs):
    """List every example under the nav's "Gallery" entry (its index page first), in the
    gallery's order, each by the part of its title before a colon ("TD learning")."""
    examples = ordered([read_example(p) for p in sorted(EXAMPLES.glob("*.py"))],
                       algorithm_order(config))
    pages = [{ex.title.split(":")[0]: f"gallery/{ex.name}.md"} for ex in examples]
    for i, entry in enumerate(config.nav or []):
        if isinstance(entry, dict) and entry.get("Gallery") == "gallery/index.md":
            config.nav[i] = {"Gallery": ["gallery/index.md", *pages]}
    return config


def on_files(files: Files, config, **kwargs) -> Files:
    """Run the examples and add their pages, figures, scripts and notebooks to the site."""
    _EXAMPLES.clear()
    for example in run_examples(algorithm_order(config)):
        _EXAMPLES[example.name] = example
        name = example.name
        files.append(File.generated(config, f"gallery/{name}.md", content=example_page(example)))
        for i, (png, _) in enumerate(example.figures):
            files.append(File.generated(config, f"gallery/{name}_{i}.png", content=png))
        files.append(File.generated(config, f"gallery/{name}.py",
                                    content=example.path.read_bytes()))
        files.append(File.generated(config, f"gallery/{name}.ipynb", content=example.notebook))
    examples = list(_EXAMPLES.values())
    files.append(File.generated(config, f"gallery/{_ZIPS['py']}", content=_zip(
        {f"{ex.name}.py": ex.path.read_bytes() for ex in examples})))
    files.append(File.generated(config, f"gallery/{_ZIPS['ipynb']}", content=_zip(
        {f"{ex.name}.ipynb": ex.notebook.encode() for ex in examples})))
    files.append(File.generated(config, "gallery/index.md", content=index_page(examples)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace ``<!-- gallery: NAME -->`` with that example's first figure and a link."""
    depth = page.file.src_uri.count("/")
    prefix = "../" * depth + "gallery/"

    def embed(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in _EXAMPLES:
            raise PluginError(f"{page.file.src_uri}: no gallery example {name!r} "
                              f"(examples/{name}.py)")
        ex = _EXAMPLES[name]
        return (f"[![{_escape(ex.title)}]({prefix}{name}_0.png)]({prefix}{name}.md)\n\n"
                f"*From the gallery: [{ex.title}]({prefix}{name}.md), run when this page "
                f"was built in {_seconds(ex.seconds)}.*")

    return _GALLERY_RE.sub(embed, markdown)
