"""Figures drawn once: a report reuses a section's PNGs while their inputs are unchanged.

A section's figures are a function of (1) what they read of the run directories (a run's every
file but the report's own outputs; a showcase child only its own part: its config, seed,
summary, costs, metric rows and ``artifacts/<child>/``, so that a child's key is the same while
the run goes on and after, whatever the other children wrote), and (2) the
code that draws them: the toolkit's sources, the experiment module's folder, the versions of
matplotlib, numpy, Pillow and grandalf, and whether graphviz's ``dot`` is installed. The
SHA-256 of both is the section's key. ``figures/cache.json`` keeps, per section, its key and its
figures (name, caption, whether it heads the section, the layout note, the PNG's SHA-256, and
for a table of words its columns and rows, which have no PNG); a report whose key matches and
whose PNGs are intact reads them instead of drawing them.

``TOOLKIT_FIGURE_CACHE=0`` switches the reuse off (everything is drawn); deleting
``figures/cache.json`` forces one redraw. A section whose drawing reported a problem is not kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["MANIFEST", "code_key", "dumps", "enabled", "entry", "input_key", "load", "lookup",
           "section_key"]

MANIFEST = "cache.json"
_VERSION = 3
#: Files a report writes into a run directory: never inputs of its figures.
_OUTPUTS = ("figures", "report.html", "report.md")


def enabled() -> bool:
    """Whether figures may be reused (``TOOLKIT_FIGURE_CACHE`` is not ``0``)."""
    return os.environ.get("TOOLKIT_FIGURE_CACHE", "1").strip() != "0"


def _hash_files(digest: Any, root: Path, files: Iterable[Path]) -> None:
    for path in sorted(files):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)


@functools.cache
def _toolkit_sources() -> str:
    import toolkit

    root = Path(toolkit.__file__).parent
    digest = hashlib.sha256()
    _hash_files(digest, root, root.rglob("*.py"))
    return digest.hexdigest()


@functools.cache
def _folder_sources(folder: str) -> str:
    root = Path(folder)
    digest = hashlib.sha256()
    _hash_files(digest, root, root.glob("*.py"))
    return digest.hexdigest()


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # not installed: part of the key all the same
        return "-"


@functools.cache
def _environment() -> str:
    return json.dumps([sys.version_info[:2], *(_version(m) for m in
                                                ("matplotlib", "numpy", "pillow", "grandalf")),
                       shutil.which("dot") is not None])


def code_key(experiment: Any) -> str:
    """The drawing code's part of a key: the toolkit, the experiment's folder, the libraries."""
    path = getattr(experiment, "path", None)
    folder = str(Path(path).resolve().parent) if path else ""
    parts = [str(_VERSION), _toolkit_sources(), _environment(),
             _folder_sources(folder) if folder else "-"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _child_part(digest: Any, root: Path, child: str) -> bool:
    """Hash what a view of showcase child ``child`` reads (see the module's docstring);
    ``False`` when the files cannot be read as a run's (the caller hashes them whole)."""
    from toolkit.lab.runner.errors import DamagedFile
    from toolkit.lab.runner.results import RunResults

    try:
        view = RunResults(root).child(child)
        data = [view.seed, view.config, view.summary, view.costs, view.metrics]
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=True)
    except (DamagedFile, KeyError, OSError, TypeError, ValueError):
        return False
    digest.update(f"\0child\0{len(text)}\0".encode())
    digest.update(text.encode())
    folder = root / "artifacts" / child
    _hash_files(digest, root, [path for path in folder.rglob("*")
                               if path.is_file() and not path.name.endswith(".tmp")])
    return True


def input_key(run_dirs: Iterable[str | Path], child: str | None) -> str:
    """The inputs' part of a key: every file of the run directories but the report's outputs;
    for a showcase child, only its own part of them."""
    digest = hashlib.sha256()
    for run_dir in run_dirs:
        root = Path(run_dir)
        digest.update(f"\0run\0{len(str(root))}".encode())
        if child is not None and _child_part(digest, root, child):
            continue
        files = []
        for path in root.rglob("*"):
            parts = path.relative_to(root).parts
            if (parts[0] in _OUTPUTS or path.name.endswith(".tmp") or not path.is_file()
                    or (child is not None and parts[0] == "artifacts" and len(parts) > 2
                        and parts[1] != child)):
                continue
            files.append(path)
        _hash_files(digest, root, files)
    return digest.hexdigest()


def section_key(run_dirs: Iterable[str | Path], child: str | None, experiment: Any,
                what: str) -> str:
    """The key of one section's figures (``what`` tells apart views of the same files)."""
    return hashlib.sha256("\0".join([what, str(child), code_key(experiment),
                                     input_key(run_dirs, child)]).encode()).hexdigest()


def load(folder: Path) -> dict[str, Any]:
    """The sections kept in ``folder/cache.json`` (empty when absent, unreadable or off)."""
    if not enabled():
        return {}
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    sections = data.get("sections")
    return sections if isinstance(sections, dict) else {}


def lookup(folder: Path, sections: dict[str, Any], section: str, key: str
           ) -> list[tuple[dict[str, Any], bytes]] | None:
    """The kept figures of ``section`` as ``(entry, png)`` when its key matches and every PNG
    is intact; ``None`` otherwise."""
    kept = sections.get(section)
    if not isinstance(kept, dict) or kept.get("key") != key:
        return None
    out = []
    for entry in kept.get("figures", []):
        if isinstance(entry, dict) and entry.get("table"):  # words: no image
            out.append((entry, b""))
            continue
        try:
            png = (folder / f"{entry['name']}.png").read_bytes()
        except (OSError, KeyError, TypeError):
            return None
        if hashlib.sha256(png).hexdigest() != entry.get("sha256"):
            return None
        out.append((entry, png))
    return out


def entry(name: str, caption: str, headline: bool, note: str, png: bytes,
          table: tuple[list[str], list[list[str]]] | None = None) -> dict[str, Any]:
    """What the manifest keeps of one figure (of a table of words: its columns and rows)."""
    out = {"name": name, "caption": caption, "headline": headline, "note": note,
           "sha256": hashlib.sha256(png).hexdigest()}
    if table is not None:
        out["table"] = [list(table[0]), [list(row) for row in table[1]]]
    return out


def dumps(sections: dict[str, Any]) -> str:
    """The manifest's text."""
    return json.dumps({"version": _VERSION, "sections": sections}, indent=1, sort_keys=True)
