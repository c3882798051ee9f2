"""Lazy attributes for package ``__init__`` modules (PEP 562).

A package lists its public names and the modules that define them; a name is imported on first
use. ``import toolkit`` is then instant, and the command line can answer ``--help`` or list
experiments without importing torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def install_line(extra: str) -> str:
    """How the optional ``extra`` is installed, in the words the documentation uses (from the
    repository's root): ``pip install -e ".[tensorboard]"``."""
    return f'pip install -e ".[{extra}]"'


def lazy_exports(package: str, namespace: dict[str, Any], exports: dict[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public names come from ``exports``.

    ``exports`` maps a public name to the module that defines it. A loaded name is stored in
    ``namespace`` (the package's globals), so later lookups do not come back here.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
