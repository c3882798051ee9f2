"""A fix as an edit of the user's code: which expression of which line becomes what.

A failure the audit prints with a line of the user's code (``at: train.py:42: output =
netD(fake)``) also carries, where the audit can say it exactly, :class:`Edit` s: the
expression of that line the fix changes, as the source spells it, and what to write instead::

    edit: train.py:42: fake -> fake.detach()

The expression is found from the span Python records for the call or operation that was
running when the audit saw the tensor (:attr:`~toolkit.audit.record.sites.Line.span`, the span a
traceback underlines) in the file's syntax tree (:mod:`ast`):

- :func:`cut_made`: the expression that made the tensor (``q_target(s2)``, ``r + g * v``);
- :func:`cut_argument`: the argument a module call was handed (``netD(fake)``);
- :func:`cut_operand`: the operand an operation read (``adv`` in ``adv * log_prob``);
- :func:`cut_assigned`: the value assigned where a state is stored (``self.M = ...``);
- :func:`cut_written`: what an in-place write adds into a buffer (``add_(m * mean)``);
- :func:`remove_detach`: ``x.detach()`` back to ``x``, with :func:`recompute` for another
  loss that read the detached value; :func:`grad_on`: a ``torch.no_grad()`` block computing
  with gradients;
- :func:`keyword_value`, :func:`extend_argument`: a library call's argument
  (``use_reentrant=False``, ``adjoint_params=``); :func:`stack_values`: ``torch.tensor([...])``
  of trained values as ``torch.stack``; :func:`reset_before`: a stale state reset as the
  step's first line;
- :func:`straight_through`: a zero-derivative operation with the identity's gradient;
  :func:`straight_through_integer`: the float value made from an integer result
  (``one_hot(soft.argmax(-1))``) with the gradient of what the integer was computed from;
  :func:`default_mode`: a call's mode keyword (``grid_sample(..., mode="nearest")``) back to
  the function's default.

A cut is written in plain PyTorch, never with an import of this package: ``x.detach()``,
``(a + b).detach()``, a tuple or list written out cut element by element (``(h.detach(),
c.detach())``); :func:`detached` writes it. Edits of the line that builds an optimizer are in
:mod:`toolkit.audit.fixes.optimizer_edits`. :func:`apply_edits` writes edits into a source text (the tests apply every edit
the audit prints over the real-code corpus and train the edited step).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from toolkit.audit.edit import Edit
from toolkit.audit.record.sites import Line
from toolkit.audit.record.source import (
    Source,
    expression_at,
    operands,
    segment,
    source_of,
    spanned,
)
from toolkit.audit.record.values import plain, read_value

__all__ = ["Edit", "apply_edits", "bind_imports", "cut_argument", "cut_assigned",
           "cut_made", "cut_operand", "cut_written", "default_mode", "detached", "extend_argument",
           "grad_on", "insert_before", "is_cut",
           "keyword_value", "recompute", "remove_detach", "reset_before",
           "stack_values", "straight_through", "straight_through_integer", "under_no_grad"]

def edit_node(line: Line, src: Source, node: ast.AST, new: str,
              imports: tuple[str, ...] = (), *, cut: bool = False) -> Edit:
    return Edit(line.file, node.lineno, node.col_offset,  # type: ignore[attr-defined]
                node.end_lineno, node.end_col_offset,  # type: ignore[attr-defined]
                segment(src, node), new, line.path, imports, cut)


def cut_value(line: Line, src: Source, node: ast.expr) -> Edit:
    """The edit that cuts the value of ``node`` (see :func:`detached`); one not written out
    as a tuple, list or dict is marked ``cut``: its form waits for the value the step held.
    An operation the source writes in parentheses of its own (``z + (z_q - z)``) is cut with
    them, ``(z_q - z).detach()``, not wrapped in a second pair."""
    cut = not isinstance(node, (ast.Tuple, ast.List, ast.Dict))
    new = detached(src, node)
    row = node.lineno - 1
    if new.startswith("(") and not isinstance(node, ast.Tuple) and \
            node.end_lineno == node.lineno and row < len(src.lines):
        text = src.lines[row]
        start, end = node.col_offset, node.end_col_offset or 0
        before = text[:max(start - 1, 0)].rstrip()
        if start > 0 and text[start - 1:start] == b"(" and text[end:end + 1] == b")" and \
                not (before[-1:].isalnum() or before[-1:] in (b"_", b")", b"]")):
            return Edit(line.file, node.lineno, start - 1, node.lineno, end + 1,
                        text[start - 1:end + 1].decode("utf-8"), new, line.path, (), cut)
    return edit_node(line, src, node, new, cut=cut)


_ATOMS = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)


def detached(src: Source, node: ast.expr) -> str:
    """The text that cuts the value of ``node`` in plain PyTorch: ``x.detach()`` (a name, an
    attribute, an item or a call as written, anything else in parentheses: ``(a +
    b).detach()``); a tuple, list or dict written out, each element or value so
    (``(h.detach(), c.detach())``), one written already cut, a constant or a starred one
    left as it is."""
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [segment(src, e) if isinstance(e, (ast.Constant, ast.Starred)) or is_cut(e)
                 else detached(src, e) for e in node.elts]
        inner = ", ".join(parts) + ("," if len(parts) == 1 and isinstance(node, ast.Tuple)
                                    else "")
        return f"({inner})" if isinstance(node, ast.Tuple) else f"[{inner}]"
    if isinstance(node, ast.Dict):
        items = [f"**{segment(src, v)}" if k is None else f"{segment(src, k)}: " + (
            segment(src, v) if isinstance(v, ast.Constant) or is_cut(v) else detached(src, v))
            for k, v in zip(node.keys, node.values)]
        return "{" + ", ".join(items) + "}"
    if isinstance(node, ast.IfExp) and any(isinstance(b, (ast.Tuple, ast.List)) or is_cut(b)
                                           for b in (node.body, node.orelse)):
        body, orelse = (segment(src, b) if is_cut(b) else detached(src, b)
                        for b in (node.body, node.orelse))
        return f"{body} if {segment(src, node.test)} else {orelse}"
    text = segment(src, node)
    return f"{text}.detach()" if isinstance(node, _ATOMS) else f"({text}).detach()"


def is_cut(value: ast.expr) -> bool:
    """Whether ``value`` is written already cut: ``x.detach()``, the toolkit's
    ``stop_gradient(x)``, ``x.item()``, ``x.tolist()``, ``x.data``."""
    if isinstance(value, ast.Attribute) and value.attr == "data":
        return True
    func = value.func if isinstance(value, ast.Call) else None
    name = getattr(func, "attr", None) or getattr(func, "id", None)
    return name in ("detach", "stop_gradient", "item", "tolist")


def _wrap(line: Line, src: Source, node: ast.AST) -> Edit | None:
    """``<node>.detach()`` (see :func:`detached`); a starred argument's value, a keyword's
    value; never an assignment target or a literal."""
    if isinstance(node, ast.Starred):
        node = node.value
    if isinstance(node, ast.keyword):
        node = node.value
    if not isinstance(node, ast.expr) or isinstance(node, ast.Constant) \
            or isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
        return None
    return cut_value(line, src, node)


#: the loop names of a cut written as comprehensions, innermost first
_LOOPS = ("t", "s", "r", "q")


def skeleton(value: object, depth: int = 0) -> Any:
    """What ``value`` is, as a cut must write it: ``"tensor"``, ``"number"``, ``"none"``,
    ``"other"``; ``(kind, inner)`` for a tuple, list or dict (``kind``: ``"tuple"``,
    ``"list"``, ``"dict"``) whose items are all ``inner`` (``None`` when it is empty), or
    ``(kind + "*", (inner, ...))`` when they differ (``(out, (h, c))``)."""
    import torch  # the audit's own; edits.py reads no tensor otherwise

    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, (bool, int, float)):
        return "number"
    if value is None:
        return "none"
    kind = ("tuple" if type(value) is tuple else "list" if type(value) is list
            else "dict" if type(value) is dict else None)
    if kind is None or depth >= len(_LOOPS):
        return "other"
    items = list(value.values() if isinstance(value, dict) else value)  # type: ignore[attr-defined]
    inner = [skeleton(x, depth + 1) for x in items]
    if len(set(map(repr, inner))) <= 1:
        return kind, inner[0] if inner else None
    return kind + "*", tuple(inner)


def _merged(seen: Iterable[Any], starred: bool = False) -> Any:
    """One skeleton for those seen on each call (an empty container takes the others'
    items; ``starred``: a value unpacked by ``*``, where a tuple and a list are one); ``None``
    when they differ."""
    out: Any = None
    for x in seen:
        if out is None or out == x:
            out = x
        elif isinstance(out, tuple) and isinstance(x, tuple) and None in (out[1], x[1]) \
                and not out[0].endswith("*") and not x[0].endswith("*") \
                and (out[0] == x[0] or (starred and "dict" not in (out[0], x[0]))):
            out = x if out[1] is None else out
        else:
            return None
    return out


def _comprehension(text: str, form: Any) -> str | None:
    """``text`` (an expression that needs no parentheses) cut in plain PyTorch for a value of
    skeleton ``form`` whose leaves are tensors: ``x.detach()``, ``tuple(t.detach() for t in
    x)``, ``[tuple(t.detach() for t in s) for s in x]``, ``{k: t.detach() for k, t in
    x.items()}``; ``None`` for any other."""
    if form == "tensor":
        return f"{text}.detach()"
    if not (isinstance(form, tuple) and form[0] in ("tuple", "list", "dict")):
        return None
    depth, inner = 0, form[1]
    while isinstance(inner, tuple):
        depth, inner = depth + 1, inner[1]
    name = _LOOPS[depth]
    cut = _comprehension(name, form[1]) if form[1] is not None else f"{name}.detach()"
    if cut is None:
        return None
    if form[0] == "dict":
        return f"{{k: {cut} for k, {name} in {text}.items()}}"
    return f"tuple({cut} for {name} in {text})" if form[0] == "tuple" else \
        f"[{cut} for {name} in {text}]"


def _place(edit: Edit) -> tuple[ast.expr, ast.AST | None] | None:
    """The expression ``edit`` replaces and the node it is part of."""
    src = source_of(edit.path) if edit.path else None
    if src is None:
        return None
    for node in ast.walk(src.tree):
        if isinstance(node, ast.expr) and (node.lineno, node.col_offset, node.end_lineno,
                                           node.end_col_offset) == (
                edit.line, edit.col, edit.end_line, edit.end_col):
            return node, src.parents.get(id(node))
    return None


def _bare(node: ast.expr, parent: ast.AST | None) -> bool:
    """Whether a conditional expression may stand where ``node`` is without parentheses: a
    call's argument or keyword, the value of an assignment or a ``return``."""
    if isinstance(parent, ast.Call):
        return node in parent.args
    return isinstance(parent, (ast.keyword, ast.Assign, ast.AnnAssign, ast.AugAssign,
                               ast.Return)) and getattr(parent, "value", None) is node


def cut_as_seen(edit: Edit, seen: Iterable[Any]) -> Edit | None:
    """``edit`` (a :attr:`Edit.cut`) written for the values its expression held on each call
    the step ran (their :func:`skeleton`): ``x.detach()`` for a tensor; a tuple, list or dict
    of tensors as a comprehension; a number on one call and a tensor on another (a running
    mean that starts as ``0``) ``torch.as_tensor(x).detach()``; ``None`` on one call (a state
    not made yet) ``None if x is None else x.detach()``, for a name, an attribute or an item;
    any other the value of an assignment statement, the statement under ``with
    torch.no_grad():``. ``edit`` as it is when no value was seen; ``None`` when no plain form
    cuts what was seen exactly."""
    forms = [ast.literal_eval(x) for x in dict.fromkeys(map(repr, seen))]
    if not forms:
        return edit
    found = _place(edit)
    if found is None:
        return None
    node, parent = found
    optional = "none" in forms
    forms = [f for f in forms if f != "none"]
    text = edit.old if isinstance(node, _ATOMS) else f"({edit.old})"
    settled = dataclasses.replace(edit, cut=False)
    imports: tuple[str, ...] = ()
    if set(forms) == {"tensor"}:
        new: str | None = edit.new if not optional else f"{text}.detach()"
    elif set(forms) == {"tensor", "number"}:
        new, imports = f"torch.as_tensor({edit.old}).detach()", ("import torch",)
    else:
        merged = _merged(forms, isinstance(parent, ast.Starred))
        new = None if merged is None else _comprehension(text, merged)
    if new is None:
        return None if optional else under_no_grad(edit)
    if optional:
        if not plain(node):
            return None  # read twice: only what reads without running anything
        new = f"None if {edit.old} is None else {new}"
        new = new if _bare(node, parent) else f"({new})"
    return dataclasses.replace(settled, new=new, imports=imports)


def under_no_grad(edit: Edit) -> Edit | None:
    """The assignment statement whose whole value is ``edit.old`` (``out, (h, c) =
    lstm(x)``) under ``with torch.no_grad():`` (its continuation lines as they are: inside
    brackets their indent is free); ``None`` when ``edit.old`` is not such a value."""
    src = source_of(edit.path) if edit.path else None
    if src is None:
        return None
    for node in ast.walk(src.tree):
        value = getattr(node, "value", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and value is not None and (
                value.lineno, value.col_offset, value.end_lineno, value.end_col_offset) == (
                edit.line, edit.col, edit.end_line, edit.end_col):
            parent = src.parents.get(id(node))
            if not any(node in getattr(parent, f, ()) for f in ("body", "orelse", "finalbody")):
                return None  # a statement of no block (one after ``;``)
            old = segment(src, node)
            after = src.lines[(node.end_lineno or node.lineno) - 1][node.end_col_offset:]
            if src.lines[node.lineno - 1][:node.col_offset].strip() \
                    or (after.strip() and not after.strip().startswith(b"#")):
                return None  # another statement on its first or last line
            indent = " " * node.col_offset
            return Edit(edit.file, node.lineno, node.col_offset, node.end_lineno or node.lineno,
                        node.end_col_offset or 0, old,
                        f"with torch.no_grad():\n{indent}    {old}", edit.path,
                        ("import torch",))
    return None


def cut_made(line: Line) -> Edit | None:
    """Cut the value the expression at ``line`` makes (the call or operation there)."""
    found = expression_at(line)
    return None if found is None else _wrap(line, *found)


def cut_argument(line: Line, position: int | str | None) -> Edit | None:
    """Cut the positional argument ``position`` of the call at ``line`` (a starred argument
    at or before it: its whole value), or its keyword argument ``position``."""
    found = expression_at(line)
    if found is None or position is None or not isinstance(found[1], ast.Call):
        return None
    src, call = found
    if isinstance(position, str):
        return next((_wrap(line, src, k.value) for k in call.keywords if k.arg == position),
                    None)
    for k, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or k == position:
            return _wrap(line, src, arg)
    return None


def cut_operand(line: Line, position: int) -> Edit | None:
    """Cut operand ``position`` of the operation at ``line``."""
    found = expression_at(line)
    if found is None:
        return None
    ops = operands(found[1])
    return _wrap(line, found[0], ops[position]) if position < len(ops) else None


def _statement(src: Source, node: ast.AST) -> ast.stmt | None:
    while node is not None and not isinstance(node, ast.stmt):
        node = src.parents.get(id(node))  # type: ignore[assignment]
    return node


def cut_assigned(line: Line) -> Edit | None:
    """Cut the value of the assignment whose target runs at ``line`` (``self.M, self.z =
    f(...)`` -> ``f(...).detach()``)."""
    found = spanned(line)
    if found is None:
        return None
    src, (l0, l1, c0, c1) = found
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if (getattr(part, "lineno", None), getattr(part, "col_offset", None),
                            getattr(part, "end_lineno", None),
                            getattr(part, "end_col_offset", None)) == (l0, c0, l1, c1):
                        return _wrap(line, src, node.value)
    return None


def cut_written(line: Line) -> tuple[Edit, ...]:
    """Cut what an in-place write at ``line`` writes: the arguments of the in-place call
    there (``x.mul_(1 - m).add_(m * mean)``: those of ``add_``, when it is the write that
    read a graph), or the value of an item or attribute assignment (``self.stored_mean[:] =
    ...``)."""
    assigned = cut_assigned(line)
    if assigned is not None:
        return (assigned,)
    found = expression_at(line)
    if found is None:
        return ()
    src, node = found
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.endswith("_") and not node.func.attr.endswith("__")):
        return ()
    edits = [_wrap(line, src, arg) for arg in [*node.args, *(k.value for k in node.keywords)]]
    return tuple(e for e in edits if e is not None)


def recompute(reader: Line, position: int, made: Line) -> Edit | None:
    """Operand ``position`` of the operation at ``reader`` written as the expression at
    ``made`` that computed it (``d_loss = 1 - real_out + fake_out`` -> ``... +
    netD(fake_img.detach()).mean()``): that reader keeps the value as it was made when the
    line that made it changes. ``None`` unless both are in one file and no name the
    expression reads is assigned between the two lines."""
    found, source = expression_at(reader), expression_at(made)
    if found is None or source is None or reader.path != made.path:
        return None
    src, node = found
    ops = operands(node)
    if position >= len(ops):
        return None
    expression = source[1]
    read = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
    first, last = expression.end_lineno or 0, ops[position].lineno
    if first >= last:
        return None
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in read \
                and first < n.lineno < last:
            return None
    text = segment(src, expression)
    if not isinstance(expression, (ast.Call, ast.Name, ast.Attribute, ast.Subscript)):
        text = f"({text})"
    return edit_node(reader, src, ops[position], text, ())


def remove_detach(line: Line) -> Edit | None:
    """``x.detach()`` (or ``x.data``) at ``line`` -> ``x``."""
    found = expression_at(line)
    if found is None:
        return None
    src, node = found
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "detach" and not node.args:
        return edit_node(line, src, node, segment(src, node.func.value), ())
    if isinstance(node, ast.Attribute) and node.attr == "data":
        return edit_node(line, src, node, segment(src, node.value), ())
    return None


def grad_on(line: Line) -> Edit | None:
    """The ``with torch.no_grad():`` statement at ``line`` computing with gradients:
    ``torch.no_grad()`` (``inference_mode()``) -> ``torch.enable_grad()``,
    ``set_grad_enabled(False)`` -> ``set_grad_enabled(True)``."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return None
    for node in ast.walk(src.tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)) or node.lineno != line.number:
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                continue
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(
                call.func, "id", "")
            if name in ("no_grad", "inference_mode"):
                return edit_node(line, src, call, "torch.enable_grad()", ("import torch",))
            if name == "set_grad_enabled":
                return edit_node(line, src, call, "torch.set_grad_enabled(True)", ("import torch",))
    return None


def _call_at(line: Line, function: str) -> tuple[Source, ast.Call] | None:
    """The file and the innermost call of ``function`` (by its name, ``f(...)`` or
    ``x.f(...)``) whose span holds ``line``."""
    src = source_of(line.path) if line.path else None
    if src is None:
        return None
    calls = [node for node in ast.walk(src.tree) if isinstance(node, ast.Call)
             and node.lineno <= line.number <= node.end_lineno  # type: ignore[operator]
             and (node.func.attr if isinstance(node.func, ast.Attribute)
                  else getattr(node.func, "id", "")) == function]
    if not calls:
        return None
    return src, max(calls, key=lambda node: (node.lineno, node.col_offset))


def keyword_value(line: Line, function: str, argument: str, value: str) -> Edit | None:
    """The call of ``function`` at ``line`` (the innermost one the line holds) with its keyword
    ``argument`` set to ``value``: the keyword's value replaced, or the keyword added last."""
    found = _call_at(line, function)
    if found is None:
        return None
    src, call = found
    given = next((k for k in call.keywords if k.arg == argument), None)
    if given is not None:
        return edit_node(line, src, given.value, value, ())
    head = segment(src, call)[:-1].rstrip()
    sep = "" if head.endswith("(") else " " if head.endswith(",") else ", "
    return edit_node(line, src, call, f"{head}{sep}{argument}={value})", ())


def extend_argument(line: Line, function: str, argument: str, extra: list[str]) -> Edit | None:
    """The call of ``function`` at ``line`` with the tensors ``extra`` (expressions) added to
    its keyword ``argument``: ``(*<value>, extra…)``, or, when it is not given, the keyword
    added as ``(*<first argument>.parameters(), extra…)`` (``odeint_adjoint``'s default)."""
    found = _call_at(line, function) if extra else None
    if found is None:
        return None
    src, call = found
    added = ", ".join(extra)
    given = next((k for k in call.keywords if k.arg == argument), None)
    if given is not None:
        return edit_node(line, src, given.value, f"(*{segment(src, given.value)}, {added})", ())
    if not call.args or isinstance(call.args[0], ast.Starred):
        return None
    return keyword_value(line, function, argument,
                         f"(*{segment(src, call.args[0])}.parameters(), {added})")


def stack_values(line: Line) -> Edit | None:
    """``torch.tensor([a, b], dtype=…)`` at ``line`` -> ``torch.stack([torch.as_tensor(a,
    dtype=…), torch.as_tensor(b, dtype=…)])``: the same values, and the graph of each element
    that is a tensor (``as_tensor`` returns a tensor of that dtype and device as it is)."""
    found = _call_at(line, "tensor")
    if found is None:
        return None
    src, node = found
    values = node.args[0] if len(node.args) == 1 else None
    if not (isinstance(node.func, ast.Attribute) and isinstance(values, (ast.List, ast.Tuple))
            and values.elts and not any(isinstance(e, (ast.List, ast.Tuple, ast.Starred))
                                        for e in values.elts)):
        return None
    kept = [k for k in node.keywords if k.arg in ("dtype", "device")]
    options = "".join(f", {k.arg}={segment(src, k.value)}" for k in kept)
    module = segment(src, node.func.value)
    items = ", ".join(f"{module}.as_tensor({segment(src, e)}{options})" for e in values.elts)
    return edit_node(line, src, node, f"{module}.stack([{items}])", ())


def reset_before(line: Line, indent: str, owner: str, name: str) -> Edit:
    """``<owner>.<name> = None`` inserted before ``line``, written after ``indent``: the first
    statement of the step's function (:func:`~toolkit.audit.record.start.step_start`), so
    that a state kept between calls is reset as the step's first line."""
    return insert_before(line, indent, f"{owner}.{name} = None")


def insert_before(line: Line, indent: str, statement: str) -> Edit:
    """``statement`` inserted before ``line``, written after ``indent``."""
    return Edit(line.file, line.number, 0, line.number, 0, "", f"{indent}{statement}\n",
                line.path, ())


def straight_through(line: Line) -> Edit | None:
    """The zero-derivative operation at ``line`` (``torch.sign(w)``, ``x.round()``) with the
    identity's gradient: ``w + (torch.sign(w) - w).detach()``, when its operand is a
    name, an attribute or an item (written twice, so read without running anything)."""
    found = expression_at(line)
    if found is None or not isinstance(found[1], ast.Call):
        return None
    src, call = found
    ops = operands(call)
    if len(ops) != 1 or not plain(ops[0]):
        return None
    x, op = segment(src, ops[0]), segment(src, call)
    return edit_node(line, src, call, f"{x} + ({op} - {x}).detach()")


def straight_through_integer(line: Line) -> Edit | None:
    """The value assigned to a name at ``line`` that converts the integer result made there
    (``hard = F.one_hot(soft.argmax(-1), n).float()``, ``mask = (s >= t).float()``) with the
    gradient of the integer operation's first operand: ``soft + (<value> -
    soft).detach()``, the same values forward and ``soft``'s gradient back (a straight-through
    estimator). Only when that operand is a name, an attribute or an item (written three
    times, so read without running anything), and the integer result reaches the value
    through calls and attributes alone; ``soft`` and the value have the same shape when the
    estimator is meant, which running the edited step proves."""
    found = expression_at(line)
    if found is None:
        return None
    src, node = found
    soft = next((o for o in operands(node) if plain(o)), None)
    value, parent = node, src.parents.get(id(node))
    while isinstance(parent, (ast.Call, ast.Attribute)):
        value, parent = parent, src.parents.get(id(parent))
    if soft is None or value is node or not (
            isinstance(parent, ast.Assign) and parent.value is value
            and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return None
    x = segment(src, soft)
    return edit_node(line, src, value, f"{x} + ({segment(src, value)} - {x}).detach()")


def default_mode(line: Line, namespace: Mapping[str, object]) -> Edit | None:
    """The call at ``line`` with its one keyword whose parameter defaults to a string (a mode:
    ``grid_sample(..., mode="nearest")``) given that default (``mode="bilinear"``), where the
    mode the step chose has a derivative that is zero for any values. The function is read
    from the line's module or ``namespace`` (nothing is run); ``None`` when it cannot be read,
    or when not exactly one such keyword is given (which mode to change is then the user's
    choice)."""
    found = expression_at(line)
    if found is None or not isinstance(found[1], ast.Call):
        return None
    src, call = found
    module = next((m for m in list(sys.modules.values())
                   if getattr(m, "__file__", None) == line.path), None)
    try:
        function = read_value(call.func, line.path, *(
            [vars(module)] if module is not None else []), namespace)
        parameters = inspect.signature(function).parameters  # type: ignore[arg-type]
    except (LookupError, SyntaxError, TypeError, ValueError):
        return None
    modes = [(k, default) for k in call.keywords if k.arg in parameters
             and isinstance(default := parameters[k.arg].default, str)
             and not (isinstance(k.value, ast.Constant) and k.value.value == default)]
    if len(modes) != 1:
        return None
    keyword, default = modes[0]
    return edit_node(line, src, keyword.value, repr(default), ())


def _offsets(lines: list[bytes], edit: Edit) -> tuple[int, int]:
    start = sum(len(x) for x in lines[:edit.line - 1]) + edit.col
    end = sum(len(x) for x in lines[:edit.end_line - 1]) + edit.end_col
    return start, end


def _imported(source: str) -> set[str]:
    """The names the module-level imports of ``source`` bind (``import types, torch`` ->
    ``{"types", "torch"}``); none when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {(a.asname or a.name).partition(".")[0] if isinstance(node, ast.Import)
            else a.asname or a.name
            for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
            for a in node.names}


def bind_imports(statements: Iterable[str]) -> dict[str, Any]:
    """The names import statements bind (``import torch`` -> ``{"torch": <module>}``, ``from
    torch import nn`` -> ``{"nn": <module>}``), imported with :mod:`importlib`, nothing executed.
    Raises ``ImportError`` (an import that fails) or ``SyntaxError`` (a statement that is not
    an import)."""
    names: dict[str, Any] = {}
    for statement in dict.fromkeys(statements):
        for node in ast.parse(statement).body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    module = importlib.import_module(a.name)
                    if a.asname:
                        names[a.asname] = module
                    else:
                        top = a.name.partition(".")[0]
                        names[top] = importlib.import_module(top)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                module = importlib.import_module(node.module)
                for a in node.names:
                    if a.name == "*":
                        raise SyntaxError(f"bind_imports: a star import ({statement!r})")
                    try:
                        names[a.asname or a.name] = getattr(module, a.name)
                    except AttributeError:
                        names[a.asname or a.name] = importlib.import_module(
                            f"{node.module}.{a.name}")
            else:
                raise SyntaxError(f"bind_imports: not an absolute import: {statement!r}")
    return names


def _wrapped_at(old: bytes, new: bytes) -> int | None:
    """Where ``new`` holds ``old`` whole when it holds it once as a token sequence (``h`` in
    ``h.detach()``, not the ``h`` of ``detach``); ``None`` when it does not, or more than
    once."""
    if not old:
        return None
    word = re.compile(rb"\w")
    found = [m.start() for m in re.finditer(re.escape(old), new)
             if not (word.match(old[:1]) and m.start() and word.match(new[m.start() - 1:m.start()]))
             and not (word.match(old[-1:]) and word.match(new[m.end():m.end() + 1]))]
    return found[0] if len(found) == 1 else None


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with ``edits`` written in; the imports they need appended as the file's last
    lines (so that every line keeps its number).

    Edits that wrap an expression (``new`` holds ``old``) may nest (``f(x,
    y.detach()).detach()``); an edit that replaces an expression may not overlap another
    except one wrapping it whole. Raises ``ValueError`` when an edit's ``old`` is not the
    text at its place, or two replacements overlap.
    """
    edits = list(dict.fromkeys(edits))
    lines = source.encode("utf-8").splitlines(keepends=True)
    text = b"".join(lines)
    ops: list[tuple[int, int, int, int, bytes]] = []  # (position, order, key, end, text)
    spans = []
    for edit in edits:
        start, end = _offsets(lines, edit)
        old, new = edit.old.encode("utf-8"), edit.new.encode("utf-8")
        if text[start:end] != old:
            raise ValueError(f"apply_edits: {edit.file}:{edit.line} does not hold "
                             f"{edit.old!r} at column {edit.col}")
        at = _wrapped_at(old, new)
        if at is not None:
            ops.append((start, 1, end, start, new[:at]))  # open: inner (smaller end) first
            ops.append((end, 2, start, end, new[at + len(old):]))  # close: outer first
        else:
            for s, e in spans:
                if s < end and start < e:
                    raise ValueError(f"apply_edits: two edits overlap at {edit.file}:"
                                     f"{edit.line}")
            spans.append((start, end))
            ops.append((start, 0, 0, end, new))
    for position, order, _, end, insert in sorted(ops, key=lambda o: (-o[0], o[1], o[2])):
        if order == 0:
            text = text[:position] + insert + text[end:]
        else:
            text = text[:position] + insert + text[position:]
    out = text.decode("utf-8")
    needed = [i for e in edits for i in e.imports]
    bound = _imported(out)
    missing = [i for i in dict.fromkeys(needed)
               if i not in out.splitlines() and not _imported(i) <= bound]
    if missing:
        out = out + ("" if out.endswith("\n") or not out else "\n") + "\n".join(missing) + "\n"
    return out
