"""Fixes at the line that builds an optimizer, as edits of the user's code
(:class:`~toolkit.audit.fixes.edits.Edit`).

- :func:`leave_out`: the optimizer built without the tensors it steps in vain (an EMA teacher,
  a tensor another optimizer steps): ``holder.parameters()`` filtered by name, a param group
  dropped or filtered;
- :func:`leave_out_of_first`: the same, at the first of several optimizers whose line can say
  so (a tensor two optimizers step);
- :func:`join`: with a learned tensor left out of it, as one more item or one more group;
- :func:`build_after`: the statement moved below the assignment that replaced a module or a
  parameter after it was built (a new head, weights tied); :func:`rebuild_fix` says that fix
  in words for the module :mod:`toolkit.audit.rules.replaced` found replaced.

Each edit keeps every line number, and is written only where the expression the optimizer was
built from reads, in the names the code sees there
(:func:`~toolkit.audit.record.unregistered.closure_names`), as what it holds.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from toolkit.audit.edit import Edit, flat
from toolkit.audit.fixes.edits import (
    Source,
    edit_node,
    segment,
    source_of,
)
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unregistered import parameters_at
from toolkit.audit.record.values import read_value, readable

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import RecordedStep

__all__ = ["build_after", "join", "leave_out", "leave_out_of_first", "rebuild_fix"]


def leave_out(line: Line, optimizer: object, namespace: dict[str, object],
              left: list[object]) -> Edit | None:
    """At the line that builds ``optimizer`` (``opt = torch.optim.Adam(model.parameters(),
    lr=...)``): its parameters without the tensors ``left``, when they are written
    ``holder.parameters()`` with a ``holder`` that, read in ``namespace``, is the module whose
    parameters the optimizer steps (``[p for n, p in model.named_parameters() if n not in
    ('fc.weight', 'fc.bias')]``), or as a list of groups each written so (``[{"params":
    trunk.parameters()}, {"params": actor.parameters(), "lr": 1e-3}]``: a group whose
    tensors are all left out is dropped, another filtered as above)."""
    groups = getattr(optimizer, "param_groups", None)
    found = parameters_at(line, optimizer)
    if found is None or not groups:
        return None
    src, params = found
    stepped = {id(p) for group in groups for p in group["params"]}
    wanted = {id(t) for t in left}
    if isinstance(params, ast.List) and params.elts and all(
            isinstance(e, ast.Dict) for e in params.elts):
        changes: list[tuple[int, int, str]] = []  # (start, end, text) in the file's bytes
        covered, held, kept = set(), set(), 0
        elements = params.elts
        for i, element in enumerate(elements):
            keys = [k.value if isinstance(k, ast.Constant) else None
                    for k in element.keys]  # type: ignore[union-attr]
            if "params" not in keys:
                return None
            value = element.values[keys.index("params")]  # type: ignore[union-attr]
            filtered = _without(line, src, value, namespace, wanted)
            if filtered is None:
                return None
            text, ids = filtered
            held |= ids
            covered |= ids & wanted
            if text is None:  # the whole group left out: its text and a comma go
                start = _offset(src, element) if i + 1 < len(elements) or i == 0 else \
                    _offset(src, elements[i - 1], end=True)
                end = _offset(src, elements[i + 1]) if i + 1 < len(elements) else \
                    _offset(src, element, end=True)
                changes.append((start, end, ""))
            else:
                kept += 1
                if text != segment(src, value):
                    changes.append((_offset(src, value), _offset(src, value, end=True), text))
        if held != stepped or covered != wanted or not kept:
            return None
        return edit_node(line, src, params, _rewritten(src, params, changes), ())
    filtered = _without(line, src, params, namespace, wanted)
    if filtered is None or filtered[1] != stepped or not wanted <= filtered[1] \
            or filtered[0] is None:
        return None
    return edit_node(line, src, params, filtered[0], ())


def leave_out_of_first(optimizers: Iterable[tuple[Line, object]],
                       namespace: dict[str, object], left: Iterable[object]
                       ) -> tuple[Edit, ...]:
    """:func:`leave_out` of the tensors ``left`` at the first of ``optimizers`` (each with
    the line that builds it, in the order tried) whose line can be written without them: one
    edit, or none."""
    left = list(left)
    edit = next((e for line, optimizer in optimizers
                 if (e := leave_out(line, optimizer, namespace, left)) is not None), None)
    return () if edit is None else (edit,)


def _offset(src: Source, node: ast.AST, end: bool = False) -> int:
    """Where ``node`` starts (or ends) in the file's bytes."""
    number, col = ((node.end_lineno, node.end_col_offset) if end  # type: ignore[attr-defined]
                   else (node.lineno, node.col_offset))  # type: ignore[attr-defined]
    return sum(len(x) for x in src.lines[:number - 1]) + col


def _rewritten(src: Source, node: ast.AST, changes: list[tuple[int, int, str]]) -> str:
    """The text of ``node`` with ``changes`` (``(start, end, text)`` in the file's bytes,
    inside it) made; every line break a change removes is kept, so that every line keeps its
    number."""
    data = b"".join(src.lines)
    start, end = _offset(src, node), _offset(src, node, end=True)
    out = data[start:end]
    for a, b, text in sorted(changes, reverse=True):
        gone = data[a:b].count(b"\n")
        out = out[:a - start] + text.encode("utf-8") + b"\n" * gone + out[b - start:]
    return out.decode("utf-8")


def _without(line: Line, src: Source, params: ast.expr, namespace: dict[str, object],
             left: set[int]) -> tuple[str | None, set[int]] | None:
    """``(the expression, the ids of the tensors it held)`` for ``holder.parameters()`` at
    ``params`` without the tensors ``left`` (``None`` for the expression when it keeps
    none of them); ``None`` when ``params`` is not written so."""
    if not (isinstance(params, ast.Call) and not params.args and not params.keywords
            and isinstance(params.func, ast.Attribute) and params.func.attr == "parameters"):
        return None
    try:
        holder = read_value(params.func.value, line.path, namespace)
    except LookupError:
        return None
    named = getattr(holder, "named_parameters", None)
    if named is None:
        return None
    relative = {id(p): n for n, p in named()}
    names = [n for i, n in relative.items() if i in left]
    if not names:
        return segment(src, params), set(relative)
    if len(names) == len(relative):
        return None, set(relative)
    held = segment(src, params.func.value)
    if not isinstance(params.func.value, (ast.Name, ast.Attribute, ast.Subscript)):
        held = f"({held})"
    kept = ", ".join(repr(n) for n in names) + ("," if len(names) == 1 else "")
    return (f"[p for n, p in {held}.named_parameters() if n not in ({kept})]",
            set(relative))


def join(line: Line, optimizer: object, namespace: dict[str, object],
         joining: dict[str, object]) -> Edit | None:
    """At the line that builds ``optimizer``: its parameters and the tensors ``joining``
    (``[*params, model.logit_scale]``), each written by its name, when that name, read in
    ``namespace``, is the tensor. Parameters given as groups (dicts: per-group weight decay)
    get one more group, with the optimizer's defaults (``[*groups, {"params":
    [model.logit_scale]}]``): an optimizer takes tensors or groups, never both."""
    found = parameters_at(line, optimizer)
    if found is None or not joining:
        return None
    src, params = found
    for name, tensor in joining.items():
        try:
            if read_value(name, line.path, namespace) is not tensor:
                return None
        except (LookupError, SyntaxError):
            return None
    held = segment(src, params)
    if not isinstance(params, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        held = f"({held})"
    added = ", ".join(joining)
    if _groups(params, line.path, namespace, optimizer):
        added = f'{{"params": [{added}]}}'
    if isinstance(params, ast.List) and params.elts:  # written out: one more item
        last = _offset(src, params.elts[-1], end=True)  # before a comma or a comment
        return edit_node(line, src, params, _rewritten(src, params, [(last, last, f", {added}")]),
                     ())
    return edit_node(line, src, params, f"[*{held}, {added}]", ())


def _groups(params: ast.expr, path: str, namespace: dict[str, object],
            optimizer: object) -> bool:
    """Whether the parameters argument ``params`` gives dicts (param groups): what its items
    (or itself) read as in ``namespace``; else a dict written in it, an optimizer of several
    groups (a flat list of tensors makes one) or one group with settings of its own."""
    several = len(getattr(optimizer, "param_groups", ())) > 1
    items = params.elts if isinstance(params, (ast.List, ast.Tuple)) else None
    if items is not None and any(isinstance(e, (ast.Dict, ast.DictComp)) for e in items):
        return True
    if items is not None and items and not any(isinstance(e, ast.Starred) for e in items):
        values = [_value(e, path, namespace) for e in items]
    else:
        value = _value(params, path, namespace)
        values = list(value) if isinstance(value, (list, tuple)) else [None]
    if all(v is not None for v in values) and values:
        return any(isinstance(v, dict) for v in values)
    # not read: a dict written anywhere in it, several groups, or one group whose settings
    # differ from the optimizer's defaults, were given as groups
    groups = getattr(optimizer, "param_groups", [])
    defaults = getattr(optimizer, "defaults", {})
    overrides = len(groups) == 1 and any(
        k != "params" and k in defaults and not _same_setting(v, defaults[k])
        for k, v in groups[0].items())
    return several or overrides or any(isinstance(n, (ast.Dict, ast.DictComp))
                                       for n in ast.walk(params))


def _same_setting(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a tensor setting: compared by identity
        return a is b


def build_after(line: Line, namespace: dict[str, object],
                replaced: Callable[[object], bool]) -> tuple[Edit, ...]:
    """The statement at ``line`` (the one that builds an optimizer) moved to just after the
    last statement below it, in the same block, that assigns a value ``replaced`` accepts (a
    module or parameter put in place of the one the optimizer was built with: ``model.fc =
    nn.Linear(512, 3)``, ``model.dec.weight = model.emb.weight``), when nothing in between
    reads what it assigns. Two edits that keep every line number: the statement's lines left
    blank, and the statement joined to the assignment's line (``model.fc = nn.Linear(512, 3);
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)``)."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return ()
    built = next((n for n in ast.walk(src.tree) if isinstance(n, ast.Assign)
                  and n.lineno <= line.number <= n.end_lineno), None)  # type: ignore[operator]
    body = getattr(src.parents.get(id(built)), "body", None) if built is not None else None
    if built is None or not isinstance(body, list) or built not in body:
        return ()
    indent = src.lines[built.lineno - 1][:built.col_offset].decode("utf-8")
    rest = src.lines[built.end_lineno - 1][built.end_col_offset:].decode(  # type: ignore[index]
        "utf-8").strip()
    if indent.strip() or (rest and not rest.startswith("#")) or any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and "\n" in n.value
            for n in ast.walk(built)):
        return ()  # not alone on its lines, or a text that one line would change
    assigned = {segment(src, t) for t in built.targets}
    needs = {n.id for n in ast.walk(built.value) if isinstance(n, ast.Name)}
    last, between = None, []
    for after in body[body.index(built) + 1:]:
        reads = {segment(src, n) for n in ast.walk(after)
                 if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript))
                 and isinstance(n.ctx, ast.Load)}
        if reads & assigned:  # read from here on: it must be built before
            break
        if isinstance(after, ast.Assign) and any(
                readable(t) and replaced(_value(segment(src, t), line.path, namespace))
                for t in after.targets):
            last = after
        between.append(after)
    if last is None:
        return ()
    stored = {n.id for s in between[:between.index(last)] for n in ast.walk(s)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if stored & needs:  # what it reads is assigned again before the move (lr = ...)
        return ()
    statement = segment(src, built)
    removed = Edit(line.file, built.lineno, 0, built.end_lineno,  # type: ignore[arg-type]
                   built.end_col_offset, indent + statement,  # type: ignore[arg-type]
                   "\n" * statement.count("\n"), line.path, ())
    return removed, edit_node(line, src, last, f"{segment(src, last)}; {flat(statement)}", ())


def rebuild_fix(step: RecordedStep, loss: str, owner: str | None
                ) -> tuple[str, tuple[Line, ...], tuple[Edit, ...]]:
    """``(the fix in words, the line that builds the loss's optimizer, the edits that move it
    below the assignment of module ``owner``)``; with no ``owner`` (a parameter replaced:
    weights tied after the optimizer was built), below the last assignment of a module or
    tensor the named modules hold. The edits are none where the assignment is not found in
    the same block."""
    optimizer = step.optimizer_of[loss]
    line = step.built_at(step.optimizer(loss))
    names = step.rec.names
    module = names.by_label.get(owner) if owner is not None else None
    held = {*names.modules, *names.tensors}
    edits = () if line is None else build_after(
        line, step.namespace, (lambda value: value is module) if owner is not None
        else (lambda value: value is not None and id(value) in held))
    where = (f"optimizer {optimizer!r} (built at {line.file}:{line.number})"
             if line is not None else f"optimizer {optimizer!r}")
    moved = f" (the assignment at {edits[1].file}:{edits[1].line})" if edits else ""
    if owner is None:
        return (f"{where} steps tensors that no module holds and no loss reaches: a module or "
                f"parameter was replaced after it was built (a new layer, weights tied); build "
                f"the optimizer after the replacement{moved}"), (
            () if line is None else (line,)), edits
    return (f"{owner} was replaced after {where} was built: the optimizer steps the tensors "
            f"of the module it replaced, which no module holds and no loss reaches, and not "
            f"the new ones; build the optimizer after the replacement{moved}, or add the new "
            f"tensors to it"), (() if line is None else (line,)), edits


def _value(expression: ast.expr | str, path: str, namespace: dict[str, object]) -> object:
    """What the readable ``expression`` (a node, or an assignment's target written out) reads
    as in ``namespace``, or ``None``."""
    try:
        return read_value(expression, path, namespace)
    except (LookupError, SyntaxError):
        return None
