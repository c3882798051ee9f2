"""The user's code read as Python reads it: a file's syntax tree, the expression running at a
recorded line's span, and which operand of it holds a value.

The recording (:mod:`.recording`) asks which operand of an operation a cut tensor was; the
fixes (:mod:`toolkit.audit.fixes.edits`) write their edits at the same expressions.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
from dataclasses import dataclass
from types import FrameType

from toolkit.audit.record.sites import Line
from toolkit.audit.record.values import plain, read_value

__all__ = ["Source", "assigned_from", "expression_at", "operand_holding", "operand_texts",
           "operands", "segment", "source_of", "spanned"]

#: names whose attributes are functions, not methods of their first operand (``torch.cat``)
_NAMESPACES = frozenset({"torch", "F", "functional", "nn", "np", "numpy", "math", "linalg",
                         "special", "fft"})


@dataclass(frozen=True)
class Source:
    lines: tuple[bytes, ...]
    tree: ast.Module
    parents: dict[int, ast.AST]
    ends: dict[tuple[int, int], list[ast.expr]]  # where an expression ends -> those that do


@functools.lru_cache(maxsize=64)
def _parsed(path: str, stamp: float) -> Source | None:
    del stamp  # part of the cache key only: an edited file is read again
    text = "".join(linecache.getlines(path))
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    ends: dict[tuple[int, int], list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.expr):
            ends.setdefault((node.end_lineno, node.end_col_offset), []).append(  # type: ignore[arg-type]
                node)
    return Source(tuple(x.encode("utf-8") for x in text.splitlines(keepends=True)), tree,
                   parents, ends)


def source_of(path: str) -> Source | None:
    try:
        stamp = os.stat(path).st_mtime
    except OSError:
        return None
    return _parsed(path, stamp)


def segment(src: Source, node: ast.AST) -> str:
    l0, c0 = node.lineno, node.col_offset  # type: ignore[attr-defined]
    l1, c1 = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
    if l0 == l1:
        return src.lines[l0 - 1][c0:c1].decode("utf-8")
    parts = [src.lines[l0 - 1][c0:], *src.lines[l0:l1 - 1], src.lines[l1 - 1][:c1]]
    return b"".join(parts).decode("utf-8")


def spanned(line: Line) -> tuple[Source, tuple[int, int, int, int]] | None:
    """The parsed file of ``line`` and its span, where both are known."""
    if line.span is None or not line.path:
        return None
    src = source_of(line.path)
    return None if src is None else (src, line.span)


def expression_at(line: Line) -> tuple[Source, ast.expr] | None:
    """The file and the expression running at ``line``'s span: the innermost expression that
    ends where the span ends and starts where it starts, or before (a method call's span
    starts at the method's name when the call spans lines)."""
    found = spanned(line)
    if found is None:
        return None
    src, (l0, l1, c0, c1) = found
    best = None
    for node in src.ends.get((l1, c1), ()):
        if (node.lineno, node.col_offset) <= (l0, c0) and (
                best is None or (node.lineno, node.col_offset) > (best.lineno, best.col_offset)):
            best = node
    return None if best is None else (src, best)


def operands(node: ast.expr) -> list[ast.expr]:
    """What an operation reads, in the order torch receives it: ``a * b`` -> ``[a, b]``,
    ``x.mul(y)`` -> ``[x, y]``, ``torch.cat([a, b])`` -> ``[a, b]``."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.Subscript):
        return [node.value]
    if isinstance(node, ast.Call):
        args = list(node.args)
        if args and isinstance(args[0], (ast.List, ast.Tuple)):  # torch.cat((a, b), 1)
            args = [*args[0].elts, *args[1:]]
        func = node.func
        if isinstance(func, ast.Attribute) and not (
                isinstance(func.value, ast.Name) and func.value.id in _NAMESPACES):
            return [func.value, *args]
        return args
    return []


def operand_texts(line: Line) -> tuple[str, ...]:
    """The operands of the operation at ``line`` as the source writes them (``logps -
    old_logps`` -> ``("logps", "old_logps")``); none where the source cannot be read."""
    found = expression_at(line)
    return () if found is None else tuple(segment(found[0], op) for op in operands(found[1]))


def assigned_from(line: Line, position: int) -> Line | None:
    """Where operand ``position`` of the operation at ``line``, a plain name, was last bound
    before that line in the function around it by a plain assignment of another name
    (``old_logps = logps``): that assignment, as a :class:`Line` whose span is its target's
    (what :func:`~toolkit.audit.fixes.edits.cut_assigned` cuts), or ``None``."""
    found = expression_at(line)
    if found is None:
        return None
    src, node = found
    ops = operands(node)
    if position >= len(ops) or not isinstance(ops[position], ast.Name):
        return None
    name = ops[position].id
    scope: ast.AST | None = node
    while scope is not None and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef
                                               | ast.Module):
        scope = src.parents.get(id(scope))
    best = None
    for st in ast.walk(scope if scope is not None else src.tree):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name \
                and isinstance(st.value, ast.Name) and st.lineno < node.lineno \
                and (best is None or st.lineno > best.lineno):
            best = st
    if best is None:
        return None
    target = best.targets[0]
    text = src.lines[best.lineno - 1].decode("utf-8", "replace").strip()
    return Line(line.file, best.lineno, line.function, text, line.path, line.inside,
                (target.lineno, target.end_lineno or target.lineno, target.col_offset,
                 target.end_col_offset or target.col_offset))


def operand_holding(line: Line, frame: FrameType, value: object) -> int | None:
    """Which operand of the operation at ``line`` (running in ``frame``) is ``value``: the
    first plain operand (a name, an attribute, an item) that reads as it there, else the
    first that reads as a tuple or list holding it (an LSTM's state ``(h, c)``:
    ``stop_gradient`` cuts every tensor of a nested structure)."""
    found = expression_at(line)
    if found is None:
        return None
    holding = None
    for i, operand in enumerate(operands(found[1])):
        if not plain(operand):
            continue
        try:
            read = read_value(operand, line.path, frame.f_locals, frame.f_globals)
        except LookupError:  # a name not bound there, an item missing: not this operand
            continue
        if read is value:
            return i
        if holding is None and isinstance(read, (tuple, list)) and any(
                x is value or (isinstance(x, (tuple, list)) and any(y is value for y in x))
                for x in read):
            holding = i
    return holding
