"""The executed gallery: every ``examples/*.py`` runs when the site is built.

A gallery script is a plain Python file (``python examples/plot_td_baird.py`` runs it too): its
module docstring's first line is the title and the rest is the text above the figure. What it prints and says follows the docs' rule for
numbers (``digits.py``: at most 4 significant digits). Each
script runs in its own process (matplotlib's Agg backend, a fresh working directory, at most
``TIMEOUT`` seconds, one torch thread); every figure it leaves open in pyplot, then every
``matplotlib.figure.Figure`` it holds in a global variable, is saved as a PNG and rendered on its page,
below the text and above the code and what it printed. A script that fails fails the build,
with its output.

The results are cached under ``.cache/docs-gallery/``, keyed by the script and every source
file of the package (so ``mkdocs serve`` does not rerun unchanged scripts); ``CI`` set, or
``TOOLKIT_DOCS_NO_CACHE=1``, runs every script. ``<!-- gallery: NAME -->`` in any page embeds
that example's first figure with a link to its page.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CACHE = ROOT / ".cache" / "docs-gallery"
TIMEOUT = 240
WORKERS = 2

# Runs one script in a fresh process and saves its open figures (argv: script, output folder).
_RUNNER = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.show = lambda *args, **kwargs: None
script, out = sys.argv[1], sys.argv[2]
sys.argv = [script]
from matplotlib.figure import Figure
names = runpy.run_path(script, run_name="__main__")
figures = [plt.figure(num) for num in plt.get_fignums()]
figures += [v for v in names.values() if isinstance(v, Figure) and v not in figures]
for i, fig in enumerate(figures):
    fig.savefig(f"{out}/figure_{i}.png", dpi=100)
"""

_spec = importlib.util.spec_from_file_location("docs_digits", Path(__file__).with_name("digits.py"))
digits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digits)

_GALLERY_RE = re.compile(r"<!--\s*gallery:\s*([A-Za-z0-9_]+)\s*-->")


@dataclass
class Example:
    """One gallery script and what running it gave."""

    name: str
    path: Path
    title: str
    text: str
    code: str
    figures: list[bytes] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0


def read_example(path: Path) -> Example:
    """The title, text and code of a gallery script (its docstring split off the code)."""
    source = path.read_text(encoding="utf-8")
    module = ast.parse(source)
    doc = ast.get_docstring(module)
    if not doc or not module.body or not isinstance(module.body[0], ast.Expr):
        raise PluginError(f"gallery: {path.name}: a gallery script starts with a docstring "
                          f"whose first line is its title")
    title, _, text = doc.partition("\n")
    code = "\n".join(source.splitlines()[module.body[0].end_lineno:]).strip("\n")
    return Example(path.stem, path, title.strip().rstrip("."), text.strip(), code)


def _source_key(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes())
    for source in sorted((ROOT / "toolkit").rglob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _run(example: Example) -> Example:
    """Run ``example`` (or read it from the cache) and fill in its figures and output."""
    use_cache = not os.environ.get("CI") and os.environ.get("TOOLKIT_DOCS_NO_CACHE") != "1"
    cached = CACHE / f"{example.name}-{_source_key(example.path)}"
    if use_cache and (cached / "result.json").exists():
        meta = json.loads((cached / "result.json").read_text())
        example.output, example.seconds = meta["output"], meta["seconds"]
        example.figures = [(cached / f).read_bytes() for f in meta["figures"]]
        return example
    with tempfile.TemporaryDirectory(prefix="gallery-") as tmp:
        env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", _RUNNER, str(example.path), tmp],
                                  cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise PluginError(f"gallery: {example.path.name} ran past {TIMEOUT} s") from exc
        example.seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise PluginError(f"gallery: {example.path.name} failed (exit status "
                              f"{proc.returncode}):\n{proc.stdout}{proc.stderr}")
        names = sorted(Path(tmp).glob("figure_*.png"), key=lambda p: int(p.stem.split("_")[1]))
        if not names:
            raise PluginError(f"gallery: {example.path.name} drew no figure: a gallery "
                              f"script plots with and without the block")
        example.figures = [p.read_bytes() for p in names]
        example.output = proc.stdout
        if use_cache:
            shutil.rmtree(cached, ignore_errors=True)
            cached.mkdir(parents=True)
            for p in names:
                shutil.copy(p, cached / p.name)
            (cached / "result.json").write_text(json.dumps(
                {"output": example.output, "seconds": example.seconds,
                 "figures": [p.name for p in names]}))
    return example


def run_examples() -> list[Example]:
    """Every script of ``examples/``, run two at a time; the first failure stops the build."""
    examples = [read_example(p) for p in sorted(EXAMPLES.glob("*.py"))]
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        examples = list(pool.map(_run, examples))
    for ex in examples:  # what a page shows follows the docs' rule for numbers
        long = digits.long_numbers(ex.output + ex.title + ex.text)
        if long:
            raise PluginError(f"gallery: {ex.path.name} shows numbers with more than "
                              f"{digits.MAX_DIGITS} significant digits: {', '.join(long)} "
                              f"(format them with :.4g or fewer)")
    return examples


def example_page(example: Example) -> str:
    """The Markdown page of one example: text, figures, output, code."""
    lines = [f"# {example.title}", "", example.text, ""]
    for i in range(len(example.figures)):
        lines += [f"![{example.title}, figure {i + 1}]({example.name}_{i}.png)", ""]
    if example.output.strip():
        lines += ["What it prints:", "", "```text", example.output.rstrip(), "```", ""]
    lines += [f"The script, `examples/{example.path.name}` (run it with "
              f"`python examples/{example.path.name}`; here it ran in "
              f"{example.seconds:.3g} s):", "", "```python", example.code, "```", ""]
    return "\n".join(lines)


def index_page(examples: list[Example]) -> str:
    """The gallery's front page: one card per example, its first figure as the thumbnail."""
    lines = ["# Gallery", "",
             "Short scripts, each run when this site is built: they import the public API and "
             "plot the same computation with and without its block. Every figure below was "
             "drawn by that build; a script that fails, fails the build.", "",
             '<div class="grid cards" markdown>', ""]
    for ex in examples:
        lines += [f"-   [**{ex.title}**]({ex.name}.md)", "",
                  f"    [![{ex.title}]({ex.name}_0.png)]({ex.name}.md)", ""]
    lines += ["</div>", ""]
    return "\n".join(lines)


_EXAMPLES: dict[str, Example] = {}


def on_config(config, **kwargs):
    """List every example under the nav's "Gallery" entry (its index page first), each by the
    part of its title before a colon ("TD learning", "The lens")."""
    pages = [{read_example(p).title.split(":")[0]: f"gallery/{p.stem}.md"}
             for p in sorted(EXAMPLES.glob("*.py"))]
    for i, entry in enumerate(config.nav or []):
        if isinstance(entry, dict) and entry.get("Gallery") == "gallery/index.md":
            config.nav[i] = {"Gallery": ["gallery/index.md", *pages]}
    return config


def on_files(files: Files, config, **kwargs) -> Files:
    """Run the examples and add their pages and figures to the site."""
    _EXAMPLES.clear()
    for example in run_examples():
        _EXAMPLES[example.name] = example
        files.append(File.generated(config, f"gallery/{example.name}.md",
                                    content=example_page(example)))
        for i, png in enumerate(example.figures):
            files.append(File.generated(config, f"gallery/{example.name}_{i}.png", content=png))
    files.append(File.generated(config, "gallery/index.md",
                                content=index_page(list(_EXAMPLES.values()))))
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
        return (f"[![{ex.title}]({prefix}{name}_0.png)]({prefix}{name}.md)\n\n"
                f"*From the gallery: [{ex.title}]({prefix}{name}.md), run when this page "
                f"was built.*")

    return _GALLERY_RE.sub(embed, markdown)
