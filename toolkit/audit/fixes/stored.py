"""The cut of graph the step keeps outside modules, written where the step stores it.

:func:`stored_at` writes, at each line where the step stores the state through which a
call reads an old graph (a list, a dict, a global, a closure cell; the kept rule finds
them), the edits that cut what is stored there (:func:`cut_stored`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import detached, edit_node, is_cut
from toolkit.audit.record.sites import Line
from toolkit.audit.record.source import source_of
from toolkit.audit.record.stores import STORES, container_of

__all__ = ["cut_stored", "stored_at"]


def stored_at(stores: Iterable[tuple[Line, str, Any]]
              ) -> tuple[tuple[Line, ...], tuple[Edit, ...]] | None:
    """The lines of ``stores`` (``(line, container, key)``, as
    :func:`~toolkit.audit.rules.kept.stores_reaching` finds them: where the step stores,
    outside modules, the state through which a call reads an old graph) that store a value
    not cut yet, and the edits that cut every value stored there (a line that stores it cut
    already is left out); ``None`` when none is found."""
    edits: dict[Line, dict[Edit, None]] = {}
    for line, container, key in stores:
        found = cut_stored(line, container, key)
        if found:  # else: stored cut already
            edits.setdefault(line, {}).update(dict.fromkeys(found))
    if not edits:
        return None
    return tuple(edits), tuple(dict.fromkeys(e for found in edits.values() for e in found))


def cut_stored(line: Line, name: str, key: Any = None) -> tuple[Edit, ...]:
    """Edits that cut every value the statements at ``line`` store into the container
    ``name`` (as the source writes it: ``memory``, ``self.bank``), at its item ``key`` when
    it is known (``state["h"]``; ``None``: any): each argument of ``name.append(...)`` and the
    other storing methods (an index or a key left as it is), the keyword ``key`` of
    ``name.update(...)``, the value of ``name[key] = ...``, ``name.attr = ...`` or ``name +=
    ...``: ``value.detach()``, a tuple or list written out cut element by element (none
    for a value written already cut, nor for a value assigned to other names as well: ``a[k]
    = h = v`` or ``out, a[k] = v``, where a cut of ``v`` would cut them too)."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return ()
    values: list[ast.expr] = []
    for node in ast.walk(src.tree):
        if getattr(node, "lineno", None) != line.number:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in STORES and container_of(node.func.value) == name:
            if node.func.attr == "update" and key is not None:
                values += [k.value for k in node.keywords if k.arg == key]
                continue
            keyed = node.func.attr in ("insert", "setdefault")
            values += [*node.args[keyed:], *(k.value for k in node.keywords)]
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and container_of(targets[0]) == name and (
                    key is None or not isinstance(targets[0], ast.Subscript)
                    or not isinstance(targets[0].slice, ast.Constant)
                    or targets[0].slice.value == key):
                values.append(node.value)
    return tuple(edit_node(line, src, v, detached(src, v)) for v in values
                 if not isinstance(v, (ast.Constant, ast.Starred)) and not is_cut(v))
