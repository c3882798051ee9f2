"""Where the step's own code starts: the first statement of the step's plain function, read
from its source, where a state kept between calls can be reset before each call."""

from __future__ import annotations

import ast
import os

from toolkit.audit.record.sites import Line
from toolkit.audit.record.source import source_of
from toolkit.audit.record.values import read_value

__all__ = ["step_start"]


def step_start(function: object, namespace: dict[str, object], owner: str,
               module: object) -> tuple[Line, str] | None:
    """``(line, indent)`` of the first statement of the step's plain ``function``
    (:func:`~toolkit.audit.fixes.built.function_of`), when ``owner`` read in ``namespace`` is
    ``module`` and the function's source is a ``def``: ``indent`` is the blank that statement
    is written after (its column), so that a statement can be inserted before it."""
    code = getattr(function, "__code__", None)
    try:
        if code is None or read_value(owner, code.co_filename, namespace) is not module:
            return None
    except (LookupError, SyntaxError):
        return None
    src = source_of(code.co_filename)
    if src is None:
        return None
    body = next((node.body for node in ast.walk(src.tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.lineno <= code.co_firstlineno <= node.body[0].lineno
                 and node.name == code.co_name), None)
    if not body:
        return None
    first = body[0]
    number, indent = first.lineno, " " * first.col_offset
    text = src.lines[number - 1].decode("utf-8").strip()
    path = code.co_filename
    return Line(os.path.basename(path), number, code.co_name, text, path), indent
