"""Where the user's source makes or empties a container (a list, a dict, a deque): the
statements that drop, or fail to drop, what a loop collected for one pass.

- *makes*: ``C = []`` (``{}``, ``list()``, ``dict()``, ``deque(...)``), also as one of the
  targets of a tuple assignment (``log_probs, values = [], []``);
- *empties*: ``del C[:]`` (also one of several targets), ``C.clear()``, ``C[:] = []``;
- *drops*: ``del C``, where ``C`` is a name bound to the container (``saved = model.saved``):
  the name goes, the container lives on wherever another name holds it.

Each statement is read as the source writes its targets (``policy.rewards``, ``self.buffer``),
with the other containers the same statement makes or empties (what the loop drops together).
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass
from typing import Literal

from toolkit.audit.record.sites import Line
from toolkit.audit.record.syntax import syntax_tree

__all__ = ["Emptying", "emptyings"]

#: the calls that make an empty container
_EMPTY_CALLS = frozenset({"list", "dict", "deque", "defaultdict", "OrderedDict"})


@dataclass(frozen=True)
class Emptying:
    """One statement of the user's source that makes, empties or drops ``container``:
    ``together``, the other containers the same statement makes or empties."""

    line: Line
    container: str
    how: Literal["makes", "empties", "drops"]
    together: tuple[str, ...]


def emptyings(path: str) -> tuple[Emptying, ...]:
    """Every statement of the file at ``path`` that makes, empties or drops a container, in
    the order of the source (none when the file cannot be read)."""
    parsed = syntax_tree(path)
    return () if parsed is None else _read(*parsed, path)


@functools.lru_cache(maxsize=16)
def _read(tree: ast.Module, text: str, path: str) -> tuple[Emptying, ...]:
    """:func:`emptyings` of one parsed text (the tree held by the cache: one read per text)."""
    lines = text.splitlines()
    found: list[Emptying] = []
    for function, stmt in _statements(tree):
        each = [(name, how) for name, how in _emptied(stmt) if name]
        names = tuple(name for name, _ in each)
        for name, how in each:
            number = stmt.lineno
            found.append(Emptying(
                Line(os.path.basename(path), number, function,
                     lines[number - 1].strip() if number <= len(lines) else "", path),
                name, how, tuple(n for n in names if n != name)))
    return tuple(sorted(found, key=lambda e: e.line.number))


def _statements(tree: ast.Module):
    """Each statement with the name of the function it is in (``<module>`` at the top)."""
    stack: list[tuple[str, ast.AST]] = [("<module>", tree)]
    while stack:
        function, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                stack.append((child.name, child))
            elif isinstance(child, ast.stmt):
                yield function, child
                stack.append((function, child))


def _emptied(stmt: ast.stmt) -> list[tuple[str, Literal["makes", "empties", "drops"]]]:
    if isinstance(stmt, ast.Assign):
        out: list[tuple[str, Literal["makes", "empties", "drops"]]] = []
        for target in stmt.targets:
            if isinstance(target, ast.Tuple | ast.List) and isinstance(stmt.value, ast.Tuple
                                                                        | ast.List) \
                    and len(target.elts) == len(stmt.value.elts):
                out += [(ast.unparse(t), "makes") for t, v in zip(target.elts, stmt.value.elts)
                        if _empty(v)]
            elif (whole := _whole(target)) is not None and _empty(stmt.value):
                out.append((whole, "empties"))
            elif _empty(stmt.value) and not isinstance(target, ast.Subscript):
                out.append((ast.unparse(target), "makes"))
        return out
    if isinstance(stmt, ast.Delete):
        return [(name, "empties") if (name := _whole(t)) is not None
                else (ast.unparse(t), "drops") for t in stmt.targets
                if _whole(t) is not None or isinstance(t, ast.Name)]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "clear" \
            and not stmt.value.args:
        return [(ast.unparse(stmt.value.func.value), "empties")]
    return []


def _whole(target: ast.expr) -> str | None:
    """``C`` of ``C[:]``, the whole of a container; else ``None``."""
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice) and \
            target.slice.lower is None and target.slice.upper is None and \
            target.slice.step is None:
        return ast.unparse(target.value)
    return None


def _empty(value: ast.expr) -> bool:
    """Whether ``value`` makes an empty container (``[]``, ``{}``, ``deque(maxlen=n)``)."""
    if isinstance(value, ast.List | ast.Dict):
        return not (value.elts if isinstance(value, ast.List) else value.keys)
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        # positional arguments fill it, but a defaultdict's one is its factory
        return name in _EMPTY_CALLS and (not value.args or (
            name == "defaultdict" and len(value.args) == 1))
    return False
