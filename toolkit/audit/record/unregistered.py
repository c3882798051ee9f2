"""What the line that builds an optimizer steps, read from the user's code, and where a learned
tensor it misses is kept unregistered.

- :func:`parameters_at`: the parameters argument of the optimizer's call at its line;
  :func:`model_of`: the model it reads, when it steps exactly ``model.parameters()``;
- :func:`kept`: where a module of that model keeps a tensor (or a module holding it) in a plain
  ``list``, ``tuple``, ``dict`` or attribute torch does not register;
- :func:`unregistered`: for each tensor, where it is kept or made (:class:`KeptIn`,
  :class:`MadeNamed`), which :mod:`toolkit.audit.fixes.registration` writes registered;
- :func:`closure_names`: names the code at a line sees through the closures of functions
  kept by modules.
"""

from __future__ import annotations

import ast
import os
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from toolkit.audit.record.sites import Line
from toolkit.audit.record.source import Source, segment, source_of
from toolkit.audit.record.values import read_value

__all__ = ["KeptIn", "MadeNamed", "Unregistered", "closure_names", "container_kind", "kept",
           "model_of", "parameters_at", "unregistered"]


def parameters_at(line: Line, optimizer: object) -> tuple[Source, ast.expr] | None:
    """The file and the parameters argument of the call of ``optimizer``'s class at
    ``line`` (the line that builds it)."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return None
    cls = type(optimizer).__name__
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and node.lineno == line.number and (
                node.func.attr if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")) == cls:
            params = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "params"), None)
            return None if params is None else (src, params)
    return None


def closure_names(line: Line, holders: Iterable[object]) -> dict[str, object]:
    """Names the code at ``line`` sees through the closures of functions kept by ``holders``
    (modules): a function defined in the same function as ``line`` reads each of its free
    variables from that scope, so there the name is that object (``enc1`` of ``lambda nodes:
    enc1(nodes).t()``, defined where the optimizer is built)."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return {}
    scopes = [node for node in ast.walk(src.tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              and node.lineno <= line.number <= node.end_lineno]  # type: ignore[operator]
    if not scopes:
        return {}
    scope = max(scopes, key=lambda node: node.lineno)
    found: dict[str, object] = {}
    for holder in holders:
        for value in vars(holder).values():
            code = getattr(value, "__code__", None)
            if code is None or os.path.realpath(code.co_filename) != os.path.realpath(
                    line.path) or not scope.lineno < code.co_firstlineno <= scope.end_lineno:  # type: ignore[operator]
                continue
            for name, cell in zip(code.co_freevars, value.__closure__ or ()):
                try:
                    found.setdefault(name, cell.cell_contents)
                except ValueError:  # an empty cell
                    continue
    return found


@dataclass(frozen=True, eq=False)
class KeptIn:
    """A tensor kept, or held by a module kept, as ``module.<name>`` (``value``: a plain
    container or attribute) that torch registers as ``torch.nn.<kind>``; assigned in its class
    at ``line`` (``node``: the value assigned there, in ``src``); ``label``: as the code reads
    it (``model.heads``)."""

    line: Line
    src: Source
    node: ast.expr
    module: nn.Module
    name: str
    value: Any
    kind: str
    label: str


@dataclass(frozen=True, eq=False)
class MadeNamed:
    """A plain leaf ``tensor`` the step reads from its closure by ``name`` (``cell``), made by
    the assignment ``statement`` at ``line`` (in ``src``) in the function that builds the
    model ``holder`` (read as ``held``) and the optimizer."""

    line: Line
    src: Source
    statement: ast.Assign
    holder: nn.Module
    held: str
    name: str
    cell: types.CellType
    tensor: torch.Tensor


@dataclass(frozen=True, eq=False)
class Unregistered:
    """Tensors the optimizer built at ``optimizer_line`` misses, never registered on the model
    it steps (``model``: as that line reads it): where each is kept or made, each place
    once (``found``)."""

    optimizer_line: Line
    model: str
    found: tuple[KeptIn | MadeNamed, ...]

    @property
    def kept(self) -> tuple[str, ...]:
        """What is registered, as the code reads it (``model.heads``)."""
        return tuple(f.label if isinstance(f, KeptIn) else f.name for f in self.found)

    @property
    def lines(self) -> tuple[Line, ...]:
        """The lines where they are kept or made, each once."""
        return tuple(dict.fromkeys(f.line for f in self.found))


def unregistered(optimizer: Any, line: Line | None, namespace: dict[str, Any], function: Any,
                 joining: list[torch.Tensor]) -> Unregistered | None:
    """Where each tensor of ``joining`` is kept or made, to be registered on the module whose
    ``parameters()`` the optimizer built at ``line`` steps, or ``None`` unless every one is
    found. ``function``: the step's plain function (the names it reads)."""
    if line is None or not joining:
        return None
    models = _models_of(optimizer, line, namespace)
    for holder, src, params in models:
        model = segment(src, params.value)
        places: dict[tuple[object, ...], KeptIn | MadeNamed] = {}
        for tensor in joining:
            one = _kept(holder, model, tensor) or _named(
                function, holder, model, params.value, line, tensor)
            if one is None:
                break
            places.setdefault(_key(one), one)
        else:
            return Unregistered(line, model, tuple(places.values()))
    return None


def _key(place: KeptIn | MadeNamed) -> tuple[object, ...]:
    """What the edit that registers ``place`` writes: one place per edit."""
    node = place.node if isinstance(place, KeptIn) else place.statement.value
    span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
    what = (place.kind,) if isinstance(place, KeptIn) else (place.held, place.name)
    return (place.line.file, place.line.path, *span, segment(place.src, node), *what)


def model_of(optimizer: Any, line: Line | None, namespace: dict[str, Any]
             ) -> tuple[nn.Module, Source, ast.Attribute] | None:
    """``(the model, its file, model.parameters's node)`` when the optimizer built at ``line``
    steps exactly ``model.parameters()``, written so there."""
    found = _models_of(optimizer, line, namespace)
    return found[0] if len(found) == 1 else None


def _models_of(optimizer: Any, line: Line | None, namespace: dict[str, Any]
               ) -> list[tuple[nn.Module, Source, ast.Attribute]]:
    """:func:`model_of`, and each model of an optimizer built over several, written
    ``[*encoder.parameters(), *decoder.parameters()]`` (the tensors it steps exactly theirs)."""
    found = None if line is None else parameters_at(line, optimizer)
    if found is None or line is None:
        return []
    src, params = found
    calls = [params] if isinstance(params, ast.Call) else [
        e.value for e in params.elts if isinstance(e, ast.Starred)] if isinstance(
        params, ast.List | ast.Tuple) and all(isinstance(e, ast.Starred)
                                              for e in params.elts) else []
    out = []
    for call in calls:
        if not (isinstance(call, ast.Call) and not call.args and not call.keywords
                and isinstance(call.func, ast.Attribute) and call.func.attr == "parameters"):
            return []
        try:
            holder = read_value(call.func.value, line.path, namespace)
        except (LookupError, SyntaxError):
            return []
        if not isinstance(holder, nn.Module):
            return []
        out.append((holder, src, call.func))
    stepped = {id(p) for group in getattr(optimizer, "param_groups", ()) for p in group["params"]}
    if {id(p) for holder, _, _ in out for p in holder.parameters()} != stepped:
        return []
    return out


def kept(model: nn.Module, tensor: torch.Tensor) -> str | None:
    """Where a module of ``model`` keeps ``tensor`` (or a module holding it) in a plain list,
    tuple, dict or attribute, torch does not register: ``"heads"`` of the module that keeps
    it, or ``None``."""
    for module in model.modules():
        for name, value in vars(module).items():
            if not name.startswith("_") and container_kind(value, tensor) is not None:
                return name
    return None


def _kept(holder: nn.Module, model: str, tensor: torch.Tensor) -> KeptIn | None:
    """A tensor kept, or held by a module kept, in a plain container or attribute of a module
    inside ``holder`` (read as ``model``), with the assignment that keeps it."""
    for prefix, module in holder.named_modules():
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            kind = container_kind(value, tensor)
            if kind is None:
                continue
            place = _assignment(type(module), name)
            if place is None:
                return None
            src, node, line = place
            return KeptIn(line, src, node, module, name, value, kind,
                          ".".join(filter(None, (model, prefix, name))))
    return None


def container_kind(value: Any, tensor: torch.Tensor) -> str | None:
    """The torch container that registers ``value`` when it holds ``tensor``."""
    if value is tensor:
        return "Parameter" if not isinstance(value, nn.Parameter) else None
    items = list(value.values()) if isinstance(value, dict) else \
        list(value) if isinstance(value, (list, tuple)) else None
    if not items:
        return None
    suffix = "Dict" if isinstance(value, dict) else "List"
    if all(isinstance(v, nn.Module) for v in items) and any(
            p is tensor for v in items for p in v.parameters()):
        return f"Module{suffix}"
    if all(isinstance(v, torch.Tensor) for v in items) and any(v is tensor for v in items):
        return f"Parameter{suffix}"
    return None


def _assignment(cls: type, name: str) -> tuple[Source, ast.expr, Line] | None:
    """The value of the one ``self.<name> = value`` in the methods of ``cls`` (or of the
    first class of its ``__mro__`` that has one)."""
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in ("torch", "builtins"):
            return None
        # the class's file and place, by the code of a method it defines
        code = next((f.__code__ for f in vars(klass).values()
                     if isinstance(f, types.FunctionType)), None)
        path = None if code is None else code.co_filename
        src = source_of(path) if path else None
        node = None if src is None or code is None else next(
            (n for n in ast.walk(src.tree) if isinstance(n, ast.ClassDef)
             and n.name == klass.__name__
             and n.lineno < code.co_firstlineno <= (n.end_lineno or 0)), None)
        if src is None or node is None or path is None:
            continue
        found = []
        for method in node.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    or not method.args.args:
                continue
            me = method.args.args[0].arg
            found += [(method, statement) for statement in ast.walk(method)
                      if isinstance(statement, ast.Assign) and len(statement.targets) == 1
                      and isinstance(target := statement.targets[0], ast.Attribute)
                      and target.attr == name and isinstance(target.value, ast.Name)
                      and target.value.id == me]
        if len(found) > 1:
            return None
        if found:
            method, statement = found[0]
            return src, statement.value, _line(path, src, statement, method.name)
    return None


def _line(path: str, src: Source, statement: ast.stmt, function: str) -> Line:
    text = src.lines[statement.lineno - 1].decode("utf-8").strip()
    return Line(os.path.basename(path), statement.lineno, function, text, path)


def _named(function: Any, holder: nn.Module, held: str, node: ast.expr, line: Line,
           tensor: torch.Tensor) -> MadeNamed | None:
    """A plain leaf tensor the step reads from its closure, made in the function that holds
    the step and builds the optimizer from ``held`` (a name: the model), with the assignment
    that makes it, under the name the step reads it by."""
    code = getattr(function, "__code__", None)
    if code is None or not isinstance(node, ast.Name) or isinstance(tensor, nn.Parameter) \
            or not tensor.is_leaf:
        return None
    cells = dict(zip(code.co_freevars, function.__closure__ or ()))
    names = [n for n, cell in cells.items() if _content(cell) is tensor]
    if len(names) != 1 or not names[0].isidentifier() or hasattr(holder, names[0]):
        return None
    name, cell = names[0], cells[names[0]]
    src = source_of(line.path)
    if src is None or code.co_filename != line.path:
        return None
    scope = min((n for n in ast.walk(src.tree) if isinstance(n, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef))
                 and n.lineno < code.co_firstlineno <= (n.end_lineno or 0)
                 and n.lineno <= line.number <= (n.end_lineno or 0)),
                key=lambda n: (n.end_lineno or 0) - n.lineno, default=None)
    if scope is None:
        return None
    own = [n for n in _own(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
           and isinstance(n.targets[0], ast.Name)]
    made = [n for n in own if n.targets[0].id == name]  # type: ignore[attr-defined]
    model = [n for n in own if n.targets[0].id == held]  # type: ignore[attr-defined]
    if len(made) != 1 or not model or not made[0].lineno < line.number \
            or not any(m.end_lineno < made[0].lineno for m in model) \
            or any(made[0].lineno < m.lineno < line.number for m in model):  # type: ignore[operator]
        return None
    statement = made[0]
    return MadeNamed(_line(line.path, src, statement, scope.name), src, statement, holder, held,
                     name, cell, tensor)


def _own(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of the functions and classes inside it."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                  ast.Lambda)):
            yield from _own(child)


def _content(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None
