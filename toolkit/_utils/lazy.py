"""Lazy attributes for package ``__init__`` modules (PEP 562).

A package lists its public names and the modules that define them; a name is imported on first
use. ``import toolkit`` is then instant, and the command line can answer ``--help`` or list
experiments without importing torch.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from typing import Any


def imported_names(path: str, package: str) -> dict[str, str]:
    """``name -> module`` for each top-level ``from package.module import name`` in ``path``.

    The file is parsed (:mod:`ast`), not run, so that a package whose ``__init__`` imports its
    public names, as type checkers and IDEs read them, lends that one list to a lazy namespace
    that must not import them yet. This is the idea of scientific Python's SPEC 1
    (``lazy_loader.attach_stub``, which reads a ``.pyi`` stub the same way):
    https://scientific-python.org/specs/spec-0001/

    The imports of a top-level ``if TYPE_CHECKING:`` block count too: a package that must not
    import its names at all (``toolkit.runner``) writes its one list there.
    """
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read(), filename=path)
    body = [*tree.body]
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            body += node.body
    return {alias.asname or alias.name: node.module for node in body
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            and node.module.startswith(f"{package}.") for alias in node.names}


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
