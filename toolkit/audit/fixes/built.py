"""Where an optimizer was built: the line of the user's code that constructs it.

A fix that is not a cut goes where the optimizer is made: a learned tensor left out of it
("add it to the optimizer built at line N"), a tensor held by two optimizers. The optimizer
exists before the audit starts, so its line is found from the step: the names under which the
step reaches the optimizer object (its closure, globals, defaults, bound ``self`` and their
attributes, a few levels deep), then the line of the step's file, or of the file of the class
that holds it, that assigns that name from a call of the optimizer's class
(``self.optimizer = optim.Adam(self.parameters(), lr=lr)``).
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
import types
from collections import deque
from typing import Any

from toolkit.audit.record.sites import Line

__all__ = ["built_line"]

_MAX_VISITS = 400


def _children(obj: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` the step may reach the optimizer through."""
    if isinstance(obj, functools.partial):
        return [("", obj.func), *[("", a) for a in obj.args], *obj.keywords.items()]
    if isinstance(obj, types.MethodType):
        return [("", obj.__self__), ("", obj.__func__)]
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        found = [(n, c.cell_contents) for n, c in zip(code.co_freevars, obj.__closure__ or ())
                 if _filled(c)]
        found += [(n, obj.__globals__[n]) for n in code.co_names if n in obj.__globals__]
        return found
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in list(obj.items())[:64]]
    if isinstance(obj, (list, tuple)):
        return [("", v) for v in obj[:64]]
    if isinstance(obj, (types.ModuleType, type, str, bytes, int, float, bool, type(None))):
        return []
    module = type(obj).__module__.split(".")[0]
    if module in ("torch", "numpy", "builtins", "toolkit"):
        return []
    return list(vars(obj).items()) if hasattr(obj, "__dict__") else []


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _names(starts: list[Any], optimizer: Any) -> list[tuple[str, Any]]:
    """``(the name the optimizer is kept under, the object holding it or None)``, nearest
    first: ``("opt", None)`` for a variable, ``("optimizer", agent)`` for an attribute.
    ``starts``: the step, and whole namespaces (dicts read in full: a module's globals)."""
    queue: deque[tuple[Any, int]] = deque()
    seen: set[int] = set()
    found: list[tuple[str, Any]] = []
    for start in starts:
        if isinstance(start, dict):  # a namespace: every name, nothing skipped
            for name, value in start.items():
                if value is optimizer:
                    found.append((name, None))
                elif not name.startswith("__"):
                    queue.append((value, 1))
        else:
            queue.append((start, 0))
    while queue and len(seen) < _MAX_VISITS:
        obj, depth = queue.popleft()
        if id(obj) in seen or depth > 4:
            continue
        seen.add(id(obj))
        holder = None if isinstance(obj, (types.FunctionType, dict, list, tuple)) else obj
        for name, value in _children(obj):
            if value is optimizer and name:
                found.append((name, holder))
            elif value is not optimizer:
                queue.append((value, depth + 1))
    seen_pairs: set[tuple[str, int]] = set()
    unique = []
    for name, holder in found:  # a holder need not be hashable (a dataclass)
        if (name, id(holder)) not in seen_pairs:
            seen_pairs.add((name, id(holder)))
            unique.append((name, holder))
    return unique


def function_of(step: Any) -> Any:
    """The plain function under ``step`` (a ``functools.partial``, a bound method): the one
    whose code, globals and closure the step runs."""
    fn = step
    while isinstance(fn, functools.partial) or hasattr(fn, "__func__"):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
    return fn


def built_line(optimizer: Any, step: Any, caller: types.FrameType | None = None
               ) -> Line | None:
    """The line of the user's code that builds ``optimizer``: an assignment of a call of its
    class to a name under which ``step`` (or ``caller``, the frame that called the audit) keeps
    it; ``None`` when none is found or the match is ambiguous.

    Preferred, in order: the nearest such line before the audit's call in the caller's
    function; one in the file of a class holding the optimizer (``self.optimizer = ...`` in
    its ``__init__``); the only such line of the step's file; for a step defined inside a
    function (a closure), the only line of that function before the step that assigns a
    call of the optimizer's class.
    """
    if not hasattr(optimizer, "param_groups"):
        return None
    fn = function_of(step)
    starts: list[Any] = [step]
    if caller is not None:
        starts += [dict(caller.f_locals), caller.f_globals]
    if isinstance(getattr(fn, "__globals__", None), dict):
        starts.append(fn.__globals__)
    names = _names(starts, optimizer)
    cls = re.escape(type(optimizer).__name__)

    def matches(path: str | None, first: int = 1, last: int | None = None) -> list[int]:
        if not path or not os.path.exists(path):
            return []
        lines = linecache.getlines(path)
        found = []
        for name, _ in names:
            assign = re.compile(rf"(^|[\s.,(]){re.escape(name)}\s*(:[^=]*)?=(?!=)")
            found += [n for n, text in enumerate(lines[first - 1:last], first)
                      if assign.search(text) and re.search(rf"\b{cls}\s*\(", text)]
        return sorted(set(found))

    def line(path: str, number: int) -> Line:
        lines = linecache.getlines(path)
        return Line(os.path.basename(path), number, _function(lines, number),
                    lines[number - 1].strip(), path)

    if caller is not None:
        path = caller.f_code.co_filename
        found = matches(path, caller.f_code.co_firstlineno, caller.f_lineno)
        if found:
            return line(path, found[-1])
    for _, holder in names:
        for klass in type(holder).__mro__ if holder is not None else ():
            try:
                path = inspect.getsourcefile(klass)
            except TypeError:
                continue
            found = matches(path)
            if len(found) == 1 and path:
                return line(path, found[0])
    code = getattr(fn, "__code__", None)
    if code is not None:
        found = matches(code.co_filename)
        if len(found) == 1:
            return line(code.co_filename, found[0])
        outer = _enclosing(linecache.getlines(code.co_filename), code.co_firstlineno)
        if outer is not None:  # the step is a closure: the one optimizer its builder makes
            built = [n for n, text in enumerate(
                linecache.getlines(code.co_filename)[outer - 1:code.co_firstlineno - 1], outer)
                if re.search(rf"=\s*[\w.]*\b{cls}\s*\(", text)]
            if len(built) == 1:
                return line(code.co_filename, built[0])
    return None


def _enclosing(lines: list[str], number: int) -> int | None:
    """The first line of the function whose body holds the ``def`` at line ``number``."""
    if not 0 < number <= len(lines):
        return None
    text = lines[number - 1]
    while text.lstrip().startswith("@") and number < len(lines):  # a decorated step
        number += 1
        text = lines[number - 1]
    indent = len(text) - len(text.lstrip())
    for at in range(number - 1, 0, -1):
        match = re.match(r"(\s*)(async\s+)?def\s+\w+", lines[at - 1])
        if match and len(match[1]) < indent:
            return at
    return None


def _function(lines: list[str], number: int) -> str:
    """The name of the function whose body holds line ``number`` (``<module>`` if none)."""
    indent = len(lines[number - 1]) - len(lines[number - 1].lstrip())
    for text in reversed(lines[:number - 1]):
        match = re.match(r"(\s*)(async\s+)?def\s+(\w+)", text)
        if match and len(match[1]) < indent:
            return match[3]
    return "<module>"
