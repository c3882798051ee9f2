"""A learned tensor the optimizer misses because it was never registered on the model the
optimizer is built from (``Adam(model.parameters())``): the fix is where it is kept, not the
optimizer's line.

- Modules or tensors kept by a module in a plain ``list``, ``tuple`` or ``dict`` (embedding
  tables in a list): the assignment in the class (``self.embeddings = [...]``) wrapped in
  ``torch.nn.ModuleList`` / ``ModuleDict`` / ``ParameterList`` / ``ParameterDict``; a tensor
  kept as a plain attribute (``self.scale = torch.ones(1, requires_grad=True)``) wrapped in
  ``torch.nn.Parameter``.
- A plain tensor the step reads by a name of the function that built the model and the
  optimizer (a PDE's coefficients): registered on that model where it is made (``lambda_1 =
  dnn.lambda_1 = torch.nn.Parameter(torch.tensor([0.0]))``), before the optimizer is built.

Either way ``model.parameters()``, read again where the optimizer is built, holds it, and every
tensor the optimizer steps stays in it. :func:`registered` also gives what the edit does to the
live objects; :func:`running` does it, builds the optimizer again by its line and undoes both
afterwards, so that the edit is run before it is printed.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import os
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import (
    Source,
    apply_edits,
    bind_imports,
    edit_node,
    segment,
    source_of,
)
from toolkit.audit.fixes.optimizer_edits import parameters_at
from toolkit.audit.record.sites import Line
from toolkit.audit.record.values import read_value

__all__ = ["NotRun", "Registration", "kept", "model_of", "registered", "remember", "running",
           "runs_live"]

_IMPORT = ("import torch",)


@dataclass(frozen=True)
class Registration:
    """The edits that register tensors on the model an optimizer is built from, the lines
    they are at, and what they do to the live objects (``apply()`` returns its undo)."""

    edits: tuple[Edit, ...]
    lines: tuple[Line, ...]
    apply: Callable[[], Callable[[], None]]
    optimizer_line: Line
    model: str  # the model as the optimizer's line reads it
    kept: tuple[str, ...]  # what is registered, as the code reads it (``model.heads``)


def registered(optimizer: Any, line: Line | None, namespace: dict[str, Any], function: Any,
               joining: list[torch.Tensor]) -> Registration | None:
    """The registration of each tensor of ``joining`` on the module whose ``parameters()``
    the optimizer built at ``line`` steps (see the module's docstring), or ``None`` unless
    every one is found. ``function``: the step's plain function (the names it reads)."""
    found = model_of(optimizer, line, namespace)
    if found is None or line is None or not joining:
        return None
    holder, src, params = found
    model = segment(src, params.value)
    edits: dict[Edit, Line] = {}
    actions: list[Callable[[], Callable[[], None]]] = []
    what: list[str] = []
    for tensor in joining:
        found_one = _kept(holder, model, tensor) or _named(
            function, holder, model, params.value, line, tensor)
        if found_one is None:
            return None
        edit, at, action, name = found_one
        if edit not in edits:
            edits[edit] = at
            actions.append(action)
            what.append(name)

    def apply() -> Callable[[], None]:
        undo = [action() for action in actions]

        def undo_all() -> None:
            for one in reversed(undo):
                one()
        return undo_all

    return Registration(tuple(edits), tuple(dict.fromkeys(edits.values())), apply, line, model,
                        tuple(what))


def model_of(optimizer: Any, line: Line | None, namespace: dict[str, Any]
             ) -> tuple[nn.Module, Source, ast.Attribute] | None:
    """``(the model, its file, model.parameters's node)`` when the optimizer built at ``line``
    steps exactly ``model.parameters()``, written so there."""
    found = None if line is None else parameters_at(line, optimizer)
    if found is None or line is None:
        return None
    src, params = found
    if not (isinstance(params, ast.Call) and not params.args and not params.keywords
            and isinstance(params.func, ast.Attribute) and params.func.attr == "parameters"):
        return None
    try:
        holder = read_value(params.func.value, line.path, namespace)
    except (LookupError, SyntaxError):
        return None
    stepped = {id(p) for group in getattr(optimizer, "param_groups", ()) for p in group["params"]}
    if not isinstance(holder, nn.Module) or {id(p) for p in holder.parameters()} != stepped:
        return None
    return holder, src, params.func


def kept(model: nn.Module, tensor: torch.Tensor) -> str | None:
    """Where a module of ``model`` keeps ``tensor`` (or a module holding it) in a plain list,
    tuple, dict or attribute, torch does not register: ``"heads"`` of the module that keeps
    it, or ``None``."""
    for module in model.modules():
        for name, value in vars(module).items():
            if not name.startswith("_") and _container(value, tensor) is not None:
                return name
    return None


_Found = tuple[Edit, Line, Callable[[], Callable[[], None]], str]


def _kept(holder: nn.Module, model: str, tensor: torch.Tensor) -> _Found | None:
    """A tensor kept, or held by a module kept, in a plain container or attribute of a module
    inside ``holder`` (read as ``model``): its assignment wrapped in the container torch
    registers."""
    for prefix, module in holder.named_modules():
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            kind = _container(value, tensor)
            if kind is None:
                continue
            place = _assignment(type(module), name)
            if place is None:
                return None
            src, node, line = place
            wrapped = f"torch.nn.{kind}({segment(src, node)})"
            return (edit_node(line, src, node, wrapped, _IMPORT), line,
                    _swap(module, name, value, kind), ".".join(filter(None, (model, prefix, name))))
    return None


def _container(value: Any, tensor: torch.Tensor) -> str | None:
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


def _swap(module: nn.Module, name: str, value: Any, kind: str
          ) -> Callable[[], Callable[[], None]]:
    """What the wrapped assignment does to the live ``module``: the same modules or tensors
    (a tensor as a parameter sharing its storage), registered under ``name``."""
    def apply() -> Callable[[], None]:
        setattr(module, name, getattr(nn, kind)(value))

        def undo() -> None:
            for table in (module._parameters, module._modules):
                table.pop(name, None)
            module.__dict__[name] = value
        return undo
    return apply


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
           tensor: torch.Tensor) -> _Found | None:
    """A plain leaf tensor the step reads from its closure, made in the function that holds
    the step and builds the optimizer from ``held`` (a name: the model): registered on the
    model where it is made, under the name the step reads it by."""
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
    at = _line(line.path, src, statement, scope.name)
    new = f"{held}.{name} = torch.nn.Parameter({segment(src, statement.value)})"

    def apply() -> Callable[[], None]:
        parameter = nn.Parameter(tensor)
        holder.register_parameter(name, parameter)
        cell.cell_contents = parameter

        def undo() -> None:
            holder._parameters.pop(name, None)
            cell.cell_contents = tensor
        return undo

    return edit_node(at, src, statement.value, new, _IMPORT), at, apply, name


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


#: each registration or optimizer edit the rules made -> what it does to the live objects
#: (``apply()`` returning its undo) and the optimizer whose line is read again, with where and
#: in which names; kept as long as the edit is (an audit's findings hold it)
_LIVE: weakref.WeakKeyDictionary[Edit, tuple[Callable[[], Callable[[], None]], Line, Any,
                                             dict[str, Any]]] = weakref.WeakKeyDictionary()


def remember(edits: Iterable[Edit], optimizer: Any, line: Line, namespace: dict[str, Any],
             apply: Callable[[], Callable[[], None]] | None = None) -> None:
    """Keep how ``edits`` (registrations, or the optimizer's line itself) run on the live
    objects, for :func:`running`."""
    entry = (apply or _nothing, line, optimizer, namespace)
    for edit in edits:
        _LIVE[edit] = entry


def _nothing() -> Callable[[], None]:
    return lambda: None


class NotRun(RuntimeError):
    """Edits that cannot be run on the live objects: not verified."""


def runs_live(edits: Iterable[Edit]) -> bool:
    """Whether :func:`running` does any of ``edits``, and can: each optimizer's line, with
    the edits applied, runs in the names the step sees (a line that reads a name its builder
    function held, gone since, cannot be run: proved on the recorded graph only)."""
    edits = list(edits)
    entries = {id(entry[2]): entry for e in edits if (entry := _LIVE.get(e)) is not None}
    return bool(entries) and all(_rebuild(line, optimizer, namespace, edits) is not None
                                 for _, line, optimizer, namespace in entries.values())


@contextlib.contextmanager
def running(edits: Iterable[Edit]) -> Iterator[bool]:
    """The edits of ``edits`` that :func:`remember` kept, done on the live objects for the time
    of the ``with``: each registration made, and each optimizer built again by its line with
    every edit applied, read in the names the step sees; everything put back after. Yields
    whether any was done (none when a line cannot run here: see :func:`runs_live`); raises :class:`NotRun` when the line cannot be run there or the
    optimizer it builds leaves out a tensor it held (an edit never takes one out)."""
    edits = list(edits)
    entries = list({id(entry): entry for e in edits if (entry := _LIVE.get(e)) is not None}
                   .values())
    if not entries or not runs_live(edits):  # none kept, or a line that cannot run here
        yield False
        return
    undo: list[Callable[[], None]] = []
    saved: list[tuple[Any, dict[str, Any]]] = []
    try:
        for apply in dict.fromkeys(entry[0] for entry in entries):
            undo.append(apply())
        for _, line, optimizer, namespace in {id(e[2]): e for e in entries}.values():
            rebuilt = _rebuild(line, optimizer, namespace, edits)
            before = {id(p) for group in optimizer.param_groups for p in group["params"]}
            if rebuilt is None or not before < {id(p) for group in rebuilt.param_groups
                                                for p in group["params"]}:
                raise NotRun(f"the optimizer's line at {line.file}:{line.number}")
            saved.append((optimizer, dict(vars(optimizer))))
            vars(optimizer).update(vars(rebuilt))
        yield True
    finally:
        for optimizer, state in reversed(saved):
            vars(optimizer).clear()
            vars(optimizer).update(state)
        for one in reversed(undo):
            one()


def _rebuild(line: Line, optimizer: Any, namespace: dict[str, Any], edits: list[Edit]) -> Any:
    """The optimizer the call at ``line`` builds once ``edits`` are applied to its file,
    evaluated in ``namespace``, or ``None``."""
    text = "".join(linecache.getlines(line.path))
    try:
        tree = ast.parse(apply_edits(text, [e for e in edits if e.path == line.path]))
    except (SyntaxError, ValueError):
        return None
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and n.lineno == line.number and (
                     n.func.attr if isinstance(n.func, ast.Attribute)
                     else getattr(n.func, "id", "")) == type(optimizer).__name__), None)
    if call is None:
        return None
    # the edited call, compiled as the body of a function of the file (as an edited function
    # is, see verify/in_process.py) and called in the names the step sees
    build = ast.FunctionDef("__toolkit_audit_build__",
                            ast.arguments([], [], None, [], [], None, []),
                            [ast.Return(call)], [], None)
    module = ast.fix_missing_locations(ast.Module([ast.copy_location(build, call)], []))
    try:
        names = {**namespace, **bind_imports(i for e in edits for i in e.imports)}
        code = next(c for c in compile(module, line.path, "exec").co_consts
                    if isinstance(c, types.CodeType))
        built = types.FunctionType(code, names)()
    except Exception:  # the line does not run here: not verified
        return None
    return built if type(built) is type(optimizer) else None
