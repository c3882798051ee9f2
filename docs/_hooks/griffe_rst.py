"""A griffe extension: the reST bits of the package's docstrings, read as Markdown.

The docstrings are Google style with a few reST constructs that Markdown would garble:

- roles, ``:func:`~toolkit.core.stop_gradient``` → ```stop_gradient``` (a ``~`` keeps the last
  part, as Sphinx does; otherwise the whole target);
- ``.. math::`` and its indented block → a fenced ``text`` block (the site loads no script
  from a CDN to typeset LaTeX, so the formula is shown as written);
- doctest lines (``>>>`` and ``...`` with their output, up to a blank line) → a fenced
  ``pycon`` block, where Markdown would otherwise read ``>`` as a quotation;
- reST simple tables (rows of ``====`` rules) → a fenced ``text`` block, shown as written;
- an ``Attributes:`` section → a bulleted list: its entries name several attributes at once
  (``weights_ (k,), means_ (k, d): ...``), which no Google-style parser reads as one name.
"""

from __future__ import annotations

import re
import textwrap

import griffe

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"``{target.split('.')[-1] if tilde else target}``"


def _fence(lines: list[str], lang: str) -> list[str]:
    body = textwrap.dedent("\n".join(lines)).strip("\n").splitlines()
    return [f"```{lang}", *body, "```"]


def _bullets(lines: list[str]) -> list[str]:
    """An indented list of entries (continuation lines indented further) as Markdown bullets."""
    body = textwrap.dedent("\n".join(lines)).strip("\n").splitlines()
    items: list[str] = []
    for line in body:
        if line and not line[0].isspace():
            items.append(line.strip())
        elif line.strip() and items:
            items[-1] += " " + line.strip()
    return ["**Attributes:**", "", *(f"- {item}" for item in items), ""]


def convert(doc: str) -> str:
    """``doc`` with roles, math blocks, doctests and simple tables made Markdown."""
    doc = _ROLE.sub(_role, doc)
    lines, out, i = doc.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped.startswith(".. math::"):
            block, i = [], i + 1
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
                block.append(lines[i])
                i += 1
            out += [indent + s for s in _fence(block, "text")] + [""]
            continue
        if stripped.startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += [indent + s for s in _fence(block, "pycon")]
            continue
        if stripped == "Attributes:":
            block, i = [], i + 1
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
                block.append(lines[i])
                i += 1
            out += [indent + s for s in _bullets(block)]
            continue
        if re.fullmatch(r"=+( +=+)+", stripped):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += [indent + s for s in _fence(block, "text")]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class ReSTBits(griffe.Extension):
    """Rewrite every loaded object's docstring with :func:`convert`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
