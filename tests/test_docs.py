"""The documentation cannot rot: its code runs, its numbers are short, its links point somewhere.

Every fenced block of the README, CONTRIBUTING.md and the pages under ``docs/`` is marked with
its language, and the language decides what happens to it:

- ``python``: run, the blocks of one page in order in one namespace (in a fresh working
  directory), as a reader would paste them;
- ``text title="Output"``: what the ``python`` block just above it prints, compared line by line
  (``...`` in a line matches any text, as doctest's ELLIPSIS: for what another package's
  release decides, such as a line number inside it);
- ``toml``: parsed;
- ``bash``: not run (shell), but every ``configs/``, ``examples/``, ``scripts/`` and
  ``benchmarks/`` file it names must exist;
- ``text``: not run (a formula, a listing, output shown without a check).

A block with no language, or another one, fails: skipping is a decision, never a default.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import re
import sys
import types
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]
KINDS = {"python": "run", "output": "compared", "toml": "parsed", "bash": "shell, not run",
         "text": "text, not run"}
ALGORITHM_PAGES = ["softmax", "em", "rbm", "adversarial", "td", "simsiam", "vq_vae", "dice"]

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


digits = _load("digits")


def blocks(path: Path) -> list[tuple[str, int, str]]:
    """The fenced blocks of a Markdown file: ``(kind, line, code)``, in order."""
    found, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = len(match["indent"]), match["fence"], match["info"].strip()
        start, body, i = i + 1, [], i + 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:])
            i += 1
        i += 1
        lang = info.split()[0] if info else ""
        kind = "output" if lang == "text" and 'title="Output"' in info else lang
        found.append((kind, start, "\n".join(body)))
    return found


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", PAGES, ids=_id)
def test_every_block_says_what_it_is(path):
    for kind, line, _ in blocks(path):
        assert kind in KINDS, (f"{_id(path)}:{line}: a fenced block must name its language, one "
                               f"of {sorted(KINDS)} (and 'text title=\"Output\"' for checked "
                               f"output), got {kind or 'none'!r}")


def _extras() -> dict[str, str]:
    """``import name -> extra`` for every package an optional extra of pyproject.toml brings."""
    import tomllib

    table = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found = {}
    for extra, requirements in table["project"]["optional-dependencies"].items():
        for requirement in requirements:
            name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
            found.setdefault(name.lower().replace("-", "_"), extra)
    return found


EXTRAS = _extras()


def missing_extras(code: str) -> list[str]:
    """The optional extras (``lightning``, ``transformers`` …) whose packages ``code`` imports
    and that are not installed; a missing package of no extra is not excused."""
    needed = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            needed |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            needed.add(node.module.split(".")[0])
    return sorted({EXTRAS[name] for name in needed
                   if name in EXTRAS and importlib.util.find_spec(name) is None})


def _defines(code: str) -> set[str]:
    """The names a block binds at its top level (assignments, imports, defs, classes)."""
    found = set()
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            found |= {n.id for n in ast.walk(node)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return found


def _uses(code: str) -> set[str]:
    """The names a block reads."""
    return {n.id for n in ast.walk(ast.parse(code))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def test_a_block_importing_a_missing_extra_names_it():
    assert EXTRAS["lightning"] == "lightning" and EXTRAS["dask"] == "distributed"
    assert missing_extras("import toolkit\nfrom torch import nn") == []
    gone = "surely_not_installed_pkg"
    EXTRAS[gone] = "imaginary"
    try:
        assert missing_extras(f"import {gone}.sub as s") == ["imaginary"]
    finally:
        del EXTRAS[gone]
    # a later block reading what a skipped block defined is skipped with it
    assert _defines("import torch as t\nx, (y, z) = 1, (2, 3)\ndef f(): pass") == {
        "t", "x", "y", "z", "f"}
    assert _uses("print(audit.audits[0])") == {"print", "audit"}


@pytest.mark.parametrize("path", [p for p in PAGES if any(k == "python" for k, _, _ in blocks(p))],
                         ids=_id)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    """Every python block runs; one that imports an optional extra that is not installed is
    skipped (the others still run) and the test reports it skipped, naming the extra."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    page = types.ModuleType("docs_page")  # a module of its own: classes defined there resolve
    monkeypatch.setitem(sys.modules, page.__name__, page)
    namespace = page.__dict__
    printed, skipped, unbound = None, {}, set()
    for kind, line, code in blocks(path):
        needs = missing_extras(code) if kind == "python" else []
        if kind == "python" and (needs or (_uses(code) - _defines(code)) & unbound):
            # it imports a missing extra, or reads what such a block defined
            skipped[line] = needs or sorted({e for names in skipped.values() for e in names})
            unbound |= _defines(code)
            printed = "skipped"
        elif kind == "output" and printed == "skipped":
            printed = None
        elif kind == "python":
            out = io.StringIO()
            # one BLAS thread, as torch has in the tests: two busy cores oversubscribed by
            # numpy's threads make scikit-learn's fits many times slower
            with contextlib.redirect_stdout(out), threadpool_limits(1):
                # compiled at its own lines of the page: a traceback, or the audit's
                # "at integrations.md:146", names the line a reader finds in the file
                exec(compile("\n" * line + code, str(path), "exec"), namespace)
            printed = out.getvalue()
        elif kind == "output":
            assert printed is not None, f"{_id(path)}:{line}: an Output block follows no python block"
            got = [s.rstrip() for s in printed.rstrip().splitlines()]
            want = [s.rstrip() for s in code.rstrip().splitlines()]
            assert _same_lines(got, want), f"{_id(path)}:{line}: the block above prints\n{printed}"
            printed = None
    if skipped:
        extras = sorted({e for names in skipped.values() for e in names})
        pytest.skip(f"{_id(path)}: the blocks at lines {sorted(skipped)} need the extras "
                    f"{extras} (pip install -e \".[{','.join(extras)}]\"); the others ran")


def _same_lines(got: list[str], want: list[str]) -> bool:
    """``got == want``, where ``...`` in a wanted line stands for any text (doctest's ELLIPSIS)."""
    return len(got) == len(want) and all(
        re.fullmatch(".*".join(map(re.escape, w.split("..."))), g) for g, w in zip(got, want))


def test_output_ellipsis_matches_any_text_and_nothing_else():
    assert _same_lines(["called at bert.py:680 (forward)"], ["called at bert.py:... (forward)"])
    assert _same_lines(["stop_gradient(x, name=...)"], ["stop_gradient(x, name=...)"])
    assert not _same_lines(["called at bert.py:680 (backward)"], ["called at bert.py:... (forward)"])
    assert not _same_lines(["a", "b"], ["a"])
    assert not _same_lines(["a.b"], ["a?b"])


def test_toml_blocks_parse():
    tomllib = pytest.importorskip("tomllib")
    for path in PAGES:
        for kind, line, code in blocks(path):
            if kind == "toml":
                try:
                    tomllib.loads(code)
                except tomllib.TOMLDecodeError as error:
                    pytest.fail(f"{_id(path)}:{line}: {error}")


def test_shell_blocks_name_files_that_exist():
    named = re.compile(r"(?<![\w/])((?:configs|examples|scripts|benchmarks)/[\w./-]+\.(?:toml|py))")
    for path in PAGES:
        for kind, line, code in blocks(path):
            if kind == "bash":
                for file in named.findall(code):
                    assert (ROOT / file).exists(), f"{_id(path)}:{line}: {file} does not exist"


def _showcase_texts():
    for path in sorted((DOCS / "showcase").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for finding in record["findings"]:
            yield path.name, f"{finding['text']} {finding.get('basis') or ''}"
        for figure in record["figures"]:
            yield path.name, figure["caption"]


def test_numbers_have_at_most_four_significant_digits():
    texts = [(_id(p), p.read_text(encoding="utf-8")) for p in PAGES]
    texts += [(f"docs/showcase/{name}", text) for name, text in _showcase_texts()]
    long = [(where, n) for where, text in texts for n in digits.long_numbers(text)]
    assert not long, f"numbers with more than 4 significant digits: {long}"


def test_digit_rule():
    assert digits.long_numbers("1.0900 and 12.345 and 3.7835e-44 but 1000.0") == [
        "1.0900", "12.345", "3.7835e-44"]
    assert digits.long_numbers("0.9092 [0.9084, 0.9102], torch 2.13.0, float32, 1797, 1e-14") == []
    assert digits.long_numbers("<https://arxiv.org/abs/1706.06083>, doi:10.1145/1390156.1390290") == []


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "CONTRIBUTING.md"], ids=_id)
def test_relative_links_lead_somewhere(path):
    # the site's build checks its own links; these two files are also read on their own
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # no link is read inside code
    for target in re.findall(r"\]\((?!https?://|#)([^)#\s]+)", text):
        assert (path.parent / target).exists(), f"{_id(path)}: the link {target} leads nowhere"


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


@pytest.mark.parametrize("name", ALGORITHM_PAGES)
def test_algorithm_page_shows_the_showcase_and_the_gallery(name):
    text = (DOCS / "algorithms" / f"{name}.md").read_text(encoding="utf-8")
    showcase = re.findall(r"<!--\s*showcase:\s*(\w+)\s*-->", text)
    gallery = re.findall(r"<!--\s*gallery:\s*(\w+)\s*-->", text)
    assert showcase and gallery, f"{name}.md shows no showcase findings or no gallery figure"
    for experiment in showcase:
        record = json.loads((DOCS / "showcase" / f"{experiment}.json").read_text())
        assert record["findings"] and record["figures"]
        for figure in record["figures"]:
            assert (DOCS / "showcase" / "figures" / figure["file"]).exists()
    for example in gallery:
        assert (ROOT / "examples" / f"{example}.py").exists()


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_the_gallery_has_an_example_per_algorithm():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_short_public_and_compares(path):
    source = path.read_text(encoding="utf-8")
    module = ast.parse(source)
    assert ast.get_docstring(module), f"{path.name}: a docstring whose first line is the title"
    code = [line for line in source.splitlines() if line.strip() and not line.startswith("#")]
    assert len(code) <= 50, f"{path.name}: more than 50 lines of code"
    assert "disable_blocks" in source, f"{path.name}: plots with and without the block"
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            assert not any(p.startswith("_") for p in parts), (
                f"{path.name}: imports the private {node.module}; use the public API")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_cells_with_prose_between(path):
    """scikit-learn's gallery form: ``# %%`` cells, most of them opened by prose."""
    pytest.importorskip("mkdocs")
    cells = _load("gallery").read_example(path).cells
    assert len(cells) >= 3, f"{path.name}: split the script into cells with `# %%`"
    explained = [c for c in cells[1:] if c.prose]
    assert len(explained) >= len(cells[1:]) - 1, (
        f"{path.name}: open each cell after the imports with comment lines saying what it does")


def test_the_gallery_follows_the_algorithms_order():
    pytest.importorskip("mkdocs")
    gallery = _load("gallery")
    algorithms = ALGORITHM_PAGES
    ordered = gallery.ordered([gallery.read_example(p) for p in EXAMPLES], algorithms)
    ranks = [algorithms.index(ex.algorithm) for ex in ordered if ex.algorithm]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(algorithms)
    assert all(ex.algorithm is None for ex in ordered[len(ranks):])


def test_griffe_extension_makes_rest_markdown():
    pytest.importorskip("griffe")
    convert = _load("griffe_rst").convert
    doc = ("See :func:`~toolkit.core.stop_gradient` and :class:`toolkit.GMM`.\n\n"
           ".. math::\n\n    a = b\n\n>>> 1 + 1\n2\n")
    assert convert(doc).splitlines() == [
        "See ``stop_gradient`` and ``toolkit.GMM``.", "", "```text", "a = b", "```", "",
        "```pycon", ">>> 1 + 1", "2", "```"]


def test_gallery_reads_title_text_and_cells(tmp_path):
    pytest.importorskip("mkdocs")
    gallery = _load("gallery")
    script = tmp_path / "plot_x.py"
    script.write_text('"""A title.\n\nSome text.\n"""\n\nimport math\n\n# %% Heading\n'
                      '# Prose,\n#\n# two paragraphs.\n\nprint(math.pi)\n\n# %%\n# Only prose.\n')
    example = gallery.read_example(script)
    assert (example.title, example.text) == ("A title", "Some text.")
    assert [(c.heading, c.prose, c.code, c.line) for c in example.cells] == [
        ("", "", "import math", 6), ("Heading", "Prose,\n\ntwo paragraphs.", "print(math.pi)", 13),
        ("", "Only prose.", "", 17)]
    assert example.code == "import math\n\nprint(math.pi)"
    notebook = json.loads(gallery.notebook(example))
    assert [c["cell_type"] for c in notebook["cells"]] == [
        "markdown", "code", "markdown", "code", "markdown"]
    assert notebook["nbformat"] == 4 and notebook["cells"][3]["source"] == ["print(math.pi)"]
    script.write_text("import math\n")
    with pytest.raises(gallery.PluginError, match="starts with a docstring"):
        gallery.read_example(script)


def test_the_site_is_searched_and_viewed_offline():
    """Material's offline plugin inlines the search index; its search worker's shim is ours,
    so that nothing is fetched to view or search the site opened from disk."""
    yaml = pytest.importorskip("yaml")
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]
    assert "offline" in plugins and "search" in plugins
    polyfills = config["extra"]["polyfills"]
    assert any("iframe-worker" in p for p in polyfills)  # else the plugin adds a CDN's
    for script in polyfills:
        assert not script.startswith(("http:", "https:", "//")) and (DOCS / script).exists()


@pytest.mark.parametrize("name", ALGORITHM_PAGES)
def test_algorithm_page_links_its_source_files(name):
    """docs/_hooks/sources.py shows each algorithm's files as pages of the site itself (no
    repository to link to, and the site works opened from disk)."""
    pytest.importorskip("mkdocs")
    sources = _load("sources")
    files = sources.module_files(name)
    assert files, f"algorithms/{name}.md: no toolkit/algorithms/{name}.py or package"
    page = sources.source_page(files[0])
    assert "search:\n  exclude: true" in page and files[0].read_text(encoding="utf-8").strip() in page


def test_the_showcase_snapshot_names_its_commit_and_machine():
    """``python scripts/docs_showcase.py`` runs the showcase from a copy of ``HEAD`` and records
    the commit and the machine; the algorithm pages say both."""
    pytest.importorskip("mkdocs")
    showcase = _load("showcase")
    for path in sorted((DOCS / "showcase").glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))["run"]
        assert re.fullmatch(r"[0-9a-f]{12}", run["commit"] or ""), (path.name, run["commit"])
        assert run["machine"]["cpu"] and run["machine"]["cores"] >= 1, path.name
        text = showcase.render(json.loads(path.read_text(encoding="utf-8")), "../")
        assert f"on {run['machine']['cpu']}" in text.replace("\\", "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-n", "0"]))


@pytest.mark.parametrize("path", [p for p in PAGES if any(k == "python" for k, _, _ in blocks(p))],
                         ids=_id)
def test_every_python_block_imports_what_it_uses(path):
    """A reader pastes one block alone: every module a block uses (``torch.randn``, ``nn``) is
    imported in that block, not only in an earlier one (a block may still use the variables
    an earlier block made)."""
    modules = {"torch", "nn", "np", "numpy", "F", "plt", "pd", "copy", "math", "json"}
    for kind, line, code in blocks(path):
        if kind != "python":
            continue
        missing = sorted((_uses(code) & modules) - _defines(code))
        assert not missing, f"{_id(path)}:{line}: the block uses {missing} without importing them"
