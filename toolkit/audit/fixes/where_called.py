"""Where a fix belongs when the line a rule names is inside a function of the script.

The rules name the line where a value with a graph is read or stored. When that line is inside
a function the script defines (a helper loss, a module's ``update``), the value came from the
script's own call of it: :func:`placed` names that call too, and moves the finding's cuts to
where the value crosses into the function:

- every cut cuts one parameter of the function, which the function never assigns, and the
  script calls it at one place: that call's argument is cut (``bank.update(v.detach(), i)``
  for ``v.detach()`` inside ``update``), the cause, in the caller's own code;
- otherwise, for a graph held or carried in state, when the function returns nothing (its only
  effect is what it writes) and holds every cut: ``@torch.no_grad()`` on it, one edit for all
  of them, as the published code of a running statistic or a memory writes it.

A call is the function's when its name is the function's and, where the names the script's
frames hold resolve it, the object called runs the function's own code (``self.f(...)``
inside the function's class is). A function called at no place, or at several, keeps its cuts.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes.edits import detached
from toolkit.audit.fixes.script_edits import edit_at, import_edit, node_edit
from toolkit.audit.kinds import Kind
from toolkit.audit.record.source import source_of
from toolkit.audit.record.syntax import indent_of, syntax_tree

__all__ = ["placed"]

_Function = ast.FunctionDef | ast.AsyncFunctionDef
#: functions the script never calls by name (a module's forward runs through ``module(x)``)
_NOT_CALLED = frozenset({"forward", "__call__", "__init__"})
#: kinds whose cut may become ``@torch.no_grad()`` on the function: state, never a result
_STATE = (Kind.CARRIED, Kind.HELD)


def placed(finding: ScriptFinding, scope: Mapping[str, Any],
           paths: Mapping[str, str]) -> ScriptFinding:
    """``finding`` with the script's calls of the functions its lines are in named (after its
    own lines) and its cuts placed where the value enters (see the module's docstring).
    ``scope``: the names the script's frames held at the audited backward; ``paths``: the
    user's files by base name."""
    at = list(finding.at)
    called: dict[int, list[ast.Call]] = {}
    for entry in finding.at:
        place = _place(entry, paths)
        found = None if place is None else _function_at(*place)
        if found is None:
            continue
        fn, classes, text = found
        for call in _calls(place[0], fn, classes, scope, called):
            shown = f"{os.path.basename(place[0])}:{call.lineno}: {_line(text, call.lineno)}"
            if shown not in at:
                at.append(shown)
    edits, decorated = _placed_edits(finding, scope, paths, called)
    if decorated is not None:   # the function's own line, where @torch.no_grad() goes
        path, line, text = decorated
        shown = f"{os.path.basename(path)}:{line}: {_line(text, line)}"
        if shown not in at:
            at.append(shown)
    if tuple(at) == finding.at and edits == finding.edits:
        return finding
    names = finding.names
    if finding.kind is Kind.TARGET and len(names) == len(finding.tensors):
        # a target with no name of its own is named as the call passes it (``teacher_logits``)
        names = (*dict.fromkeys(e.old for e in edits if e not in finding.edits
                                and e.old.isidentifier() and e.old not in names), *names)
    return dataclasses.replace(finding, at=tuple(at), edits=edits, names=names)


def _placed_edits(finding: ScriptFinding, scope: Mapping[str, Any], paths: Mapping[str, str],
                  called: dict[int, list[ast.Call]]
                  ) -> tuple[tuple[Edit, ...], tuple[str, int, str] | None]:
    """The finding's edits placed (see the module's docstring), and where a decorator was
    put on a function: its file, the line it went before, and the file's text."""
    cuts = finding.edits
    if cuts and not all(_is_cut(e) and e.path for e in cuts):
        return cuts, None
    places = {(e.path, e.line) for e in cuts}
    if not cuts and finding.kind in _STATE and finding.at:
        # no edit: the function that writes the state, at the finding's first line
        places = {place for place in [_place(finding.at[0], paths)] if place is not None}
    functions = {_function_at(path, line) for path, line in places}
    found = functions.pop() if len(functions) == 1 else None
    if found is None:
        return cuts, None
    fn, classes, text = found
    path = next(iter(places))[0]
    source = _source_parameter(fn, {e.old for e in cuts}) if cuts else None
    if source is not None:
        calls = _calls(path, fn, classes, scope, called)
        arg = _argument(calls[0], fn, source, scope) if len(calls) == 1 else None
        parsed = source_of(path) if arg is not None else None
        if arg is not None and parsed is not None:
            return (dataclasses.replace(node_edit(path, arg, detached(parsed, arg)),
                                        cut=True),), None
    if finding.kind not in _STATE or not _returns_nothing(fn) or _no_grad_already(fn):
        return cuts, None
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    decorator = edit_at(path, (first, 0), (first, 0),
                        f"{indent_of(text, fn.lineno)}@torch.no_grad()\n")
    needed = import_edit(path, "torch")
    return ((decorator,) if needed is None else (needed, decorator)), (path, first, text)


def _place(entry: str, paths: Mapping[str, str]) -> tuple[str, int] | None:
    """The file and line of an ``at`` entry (``train.py:42: text``), for a user's file."""
    file, _, rest = entry.partition(":")
    number = rest.partition(":")[0]
    path = paths.get(file)
    return None if path is None or not number.isdigit() else (path, int(number))


def _source_parameter(fn: _Function, cut: set[str]) -> str | None:
    """The parameter of ``fn`` whose value the one name or expression ``cut`` cuts is: the
    parameter itself, a name ``fn`` assigns once from it (``q = F.softmax(teacher / T,
    dim=1)``) or an expression that reads it (``F.softmax(teacher / T, dim=1)``), with every
    other name that expression reads a parameter too (which of them carries a
    graph is told at the call: :func:`_argument`); ``None`` otherwise."""
    if len(cut) != 1:
        return None
    (name,) = cut
    params = _parameters(fn)
    if name in params:
        return None if _assigns(fn, name) else name
    if name.isidentifier():
        stores = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        if len(stores) != 1 or len(stores[0].targets) != 1 or \
                sum(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                    for n in ast.walk(fn)) != 1:
            return None
        value: ast.expr = stores[0].value
    else:   # an expression cut where it is made (``F.softmax(teacher / T, dim=1)``)
        try:
            value = ast.parse(name, mode="eval").body
        except SyntaxError:
            return None
    inside = [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
    read = set(inside)
    mine = read & set(params)
    if not mine or any(_assigns(fn, p) for p in mine):
        return None
    assigned = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    if read & assigned:
        return None  # read from another of the function's own names
    if not name.isidentifier():
        # the cut at the call cuts every read of the parameter: one the function reads outside
        # the expression (marked ``!``) may not be the one cut there
        loads = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in mine
                 and isinstance(n.ctx, ast.Load)]
        return ",".join(p if loads.count(p) == inside.count(p) else f"!{p}"
                        for p in sorted(mine))
    return ",".join(sorted(mine))


def _is_cut(edit: Edit) -> bool:
    return edit.cut or edit.new in (f"{edit.old}.detach()", f"({edit.old}).detach()")


def _function_at(path: str, line: int) -> tuple[_Function, tuple[str, ...], str] | None:
    """The innermost function of ``path`` whose body holds ``line`` (not a lambda), the
    classes around it, and the file's text; ``None`` for the module's own code."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    best: tuple[_Function, tuple[str, ...]] | None = None

    def walk(node: ast.AST, classes: tuple[str, ...]) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            inner = (*classes, child.name) if isinstance(child, ast.ClassDef) else classes
            if isinstance(child, _Function) and child.body and \
                    child.body[0].lineno <= line <= (child.end_lineno or child.lineno):
                best = (child, classes)
            walk(child, inner)

    walk(tree, ())
    if best is None or best[0].name in _NOT_CALLED:
        return None
    return best[0], best[1], text


def _calls(path: str, fn: _Function, classes: tuple[str, ...], scope: Mapping[str, Any],
           known: dict[int, list[ast.Call]]) -> list[ast.Call]:
    """The calls of ``fn`` in its file (outside ``fn``) by its name, less those whose callee
    the script's names resolve to another function; found once per function (``known``)."""
    if id(fn) in known:
        return known[id(fn)]
    parsed = syntax_tree(path)
    if parsed is None:
        return []
    tree, _ = parsed
    out: list[ast.Call] = []

    def walk(node: ast.AST, cls: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if child is fn:
                continue
            inner = (*cls, child.name) if isinstance(child, ast.ClassDef) else cls
            if isinstance(child, ast.Call) and _calls_it(child.func, fn, path, classes, cls,
                                                         scope):
                out.append(child)
            walk(child, inner)

    walk(tree, ())
    known[id(fn)] = out
    return out


def _calls_it(func: ast.expr, fn: _Function, path: str, classes: tuple[str, ...],
              here: tuple[str, ...], scope: Mapping[str, Any]) -> bool:
    if isinstance(func, ast.Name) and func.id == fn.name and not classes:
        return _runs(scope.get(func.id), fn, path)
    if not (isinstance(func, ast.Attribute) and func.attr == fn.name and classes):
        return False
    base = func.value
    if isinstance(base, ast.Name) and base.id == "self":
        return here[:len(classes)] == classes
    if isinstance(base, ast.Name) and base.id in scope:
        return _runs(inspect.getattr_static(type(scope[base.id]), fn.name, None), fn, path)
    return True


def _runs(value: object, fn: _Function, path: str) -> bool:
    """Whether ``value`` runs ``fn``'s code (``True`` when the names hold no such value)."""
    if value is None:
        return True
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    if code is None:
        return False
    lines = {fn.lineno, *(d.lineno for d in fn.decorator_list)}
    return code.co_name == fn.name and code.co_firstlineno in lines and \
        os.path.abspath(code.co_filename) == os.path.abspath(path)


def _parameters(fn: _Function) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _assigns(fn: _Function, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del)
               for n in ast.walk(fn))


def _argument(call: ast.Call, fn: _Function, names: str,
              scope: Mapping[str, Any]) -> ast.expr | None:
    """The expression ``call`` passes for the one parameter of ``names`` (comma-separated)
    that may carry a graph: the others must be passed values the script's names show are no
    tensor (``args.temperature``, ``2.0``); one marked ``!`` may not be it."""
    split = names.split(",")
    passed = [_passed(call, fn, name.lstrip("!")) for name in split]
    if any(arg is None for arg in passed):
        return None
    graphs = [(name, arg) for name, arg in zip(split, passed) if not _no_tensor(arg, scope)]
    return graphs[0][1] if len(graphs) == 1 and not graphs[0][0].startswith("!") else None


def _passed(call: ast.Call, fn: _Function, name: str) -> ast.expr | None:
    """The expression ``call`` passes for parameter ``name`` of ``fn``."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    if isinstance(call.func, ast.Attribute) and positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]
    if name not in positional:
        return None
    index = positional.index(name)
    if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]) or \
            index >= len(call.args):
        return None
    return call.args[index]


def _no_tensor(arg: ast.expr, scope: Mapping[str, Any]) -> bool:
    """Whether ``arg`` (a constant, a name or an attribute of one) is, by the script's names,
    a value that is no tensor (a number, a string, ``None``)."""
    if isinstance(arg, ast.Constant):
        return True
    parts: list[str] = []
    while isinstance(arg, ast.Attribute):
        parts.append(arg.attr)
        arg = arg.value
    if not isinstance(arg, ast.Name) or arg.id not in scope:
        return False
    value = scope[arg.id]
    for part in reversed(parts):
        # the script's own objects: read without running a property or __getattr__ of theirs
        value = None if isinstance(value, torch.Tensor) else _static(value, part)
    return isinstance(value, int | float | complex | str | bool) or (value is None and not parts)


def _returns_nothing(fn: _Function) -> bool:
    def own(node: ast.AST) -> Iterable[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _Function | ast.Lambda | ast.ClassDef):
                yield child
                yield from own(child)

    return not any((isinstance(n, ast.Return) and n.value is not None) or
                   isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for n in own(fn))


def _no_grad_already(fn: _Function) -> bool:
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute | ast.Name) and
               getattr(d.func, "attr", getattr(d.func, "id", "")) in ("no_grad", "inference_mode")
               for d in fn.decorator_list)


def _static(value: object, name: str) -> object:
    """``value``'s attribute ``name`` as its ``__dict__`` or class holds it (``None`` if not)."""
    found = inspect.getattr_static(value, name, None)
    return None if isinstance(found, property | staticmethod | classmethod) else found


def _line(text: str, number: int) -> str:
    lines = text.splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""
