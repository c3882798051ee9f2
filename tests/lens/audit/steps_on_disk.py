"""Steps written to files, so that an audit's ``at:`` and ``edit:`` lines name real lines:
a module loaded from a file, or from a text written to one first."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType


def load(path: Path, text: str | None = None, name: str | None = None) -> ModuleType:
    """The module of file ``path`` (as ``name``, default its stem), after writing ``text``
    (dedented) there when given."""
    if text is not None:
        path.write_text(textwrap.dedent(text), "utf-8")
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
