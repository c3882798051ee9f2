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

Where each is kept or made is read in :mod:`toolkit.audit.record.unregistered`. Either way
``model.parameters()``, read again where the optimizer is built, holds it, and every tensor the
optimizer steps stays in it. :func:`registered` also gives what the edit does to the live
objects; :func:`running` does it, builds the optimizer again by its line and undoes both
afterwards, so that the edit is run before it is printed.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import apply_edits, bind_imports, edit_node, segment
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unregistered import KeptIn, MadeNamed, Unregistered

__all__ = ["NotRun", "Registration", "registered", "remember", "running", "runs_live"]

_IMPORT = ("import torch",)


@dataclass(frozen=True)
class Registration:
    """The edits that register tensors on the model an optimizer is built from, and what they
    do to the live objects (``apply()`` returns its undo)."""

    edits: tuple[Edit, ...]
    apply: Callable[[], Callable[[], None]]


def registered(found: Unregistered) -> Registration:
    """The registration of each tensor :func:`~toolkit.audit.record.unregistered.unregistered`
    found kept or made (see the module's docstring): one edit per place."""
    edits: list[Edit] = []
    actions: list[Callable[[], Callable[[], None]]] = []
    for place in found.found:
        if isinstance(place, KeptIn):
            wrapped = f"torch.nn.{place.kind}({segment(place.src, place.node)})"
            edit = edit_node(place.line, place.src, place.node, wrapped, _IMPORT)
            action = _swap(place.module, place.name, place.value, place.kind)
        else:
            edit, action = _made(place)
        if edit not in edits:
            edits.append(edit)
            actions.append(action)

    def apply() -> Callable[[], None]:
        undo = [action() for action in actions]

        def undo_all() -> None:
            for one in reversed(undo):
                one()
        return undo_all

    return Registration(tuple(edits), apply)


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


def _made(place: MadeNamed) -> tuple[Edit, Callable[[], Callable[[], None]]]:
    """A plain leaf tensor the step reads from its closure, registered on the model where it
    is made, under the name the step reads it by: the edit, and what it does to the live
    objects."""
    statement, holder, name, cell, tensor = (place.statement, place.holder, place.name,
                                             place.cell, place.tensor)
    new = f"{place.held}.{name} = torch.nn.Parameter({segment(place.src, statement.value)})"

    def apply() -> Callable[[], None]:
        parameter = nn.Parameter(tensor)
        holder.register_parameter(name, parameter)
        cell.cell_contents = parameter

        def undo() -> None:
            holder._parameters.pop(name, None)
            cell.cell_contents = tensor
        return undo

    return edit_node(place.line, place.src, statement.value, new, _IMPORT), apply


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
