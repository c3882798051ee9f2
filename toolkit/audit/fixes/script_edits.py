"""Edits of the user's script, in plain PyTorch, written from its own syntax tree
(:mod:`toolkit.audit.record.syntax`): each one the :class:`~toolkit.audit.edit.Edit` both audits
print, with the text it replaces as the audit read it; shown as a unified diff and written,
under ``--apply`` only, through :func:`toolkit.audit.files.write_sources` (a copy of each file
kept)."""

from __future__ import annotations

import ast
import difflib
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

from toolkit.audit.edit import Edit
from toolkit.audit.files import (
    Refused,
    Source,
    escaped,
    inside,
    read_source,
    split_lines,
    write_sources,
)
from toolkit.audit.fixes.edits import apply_edits, under_no_grad
from toolkit.audit.record.syntax import (
    blocks,
    call_at,
    expression_at,
    freezes,
    indent_of,
    made_trainable,
    no_grad_block,
    no_grad_decorator,
    segment,
    statement_at,
    switch_of,
    syntax_tree,
)

__all__ = ["apply_to_text", "as_parameter", "built_over_each", "call_under_no_grad",
           "copy_at_alias",
           "copy_snapshot", "cut_argument", "deep_copy_call", "detach_call", "detach_expression",
           "diff", "edit_at",
           "edited_texts", "empty_with", "import_edit", "insert_after", "insert_before",
           "move_before", "node_edit", "off_decorator", "out_of_no_grad", "remove_detach",
           "replace_parameters",
           "switch_on_after_its_step", "switch_on_after_its_use", "switch_on_before_loop",
           "switch_on_with_the_rest",
           "unfreeze_before", "widen",
           "write_edits"]


def edit_at(path: str, start: tuple[int, int], end: tuple[int, int], new: str) -> Edit:
    """The :class:`~toolkit.audit.edit.Edit` that replaces the text of ``path`` from ``start``
    to ``end`` (1-based lines, 0-based columns in UTF-8 bytes, as :mod:`ast` counts them) by
    ``new``; ``old`` is that text as the audit read it (``""`` for an insertion)."""
    text = read_source(path).text
    lines = split_lines(text)
    old = text[_offset(lines, start):_offset(lines, end)]
    return Edit(os.path.basename(path), start[0], start[1], end[0], end[1], old, new,
                path=os.path.abspath(path))


def node_edit(path: str, node: ast.expr, new: str) -> Edit:
    """The edit that replaces the expression ``node`` of ``path`` by ``new``."""
    return edit_at(path, (node.lineno, node.col_offset),
                   (node.end_lineno or node.lineno, node.end_col_offset or 0), new)


def import_edit(path: str, module: str) -> Edit | None:
    """``import module`` added after the file's docstring and ``__future__`` imports, unless
    the file imports it at its top level already."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, _ = parsed
    if any(isinstance(node, ast.Import) and any(a.name == module and a.asname is None
                                                for a in node.names) for node in tree.body):
        return None
    at = 1
    for node in tree.body:
        doc = node is tree.body[0] and isinstance(node, ast.Expr) and isinstance(
            node.value, ast.Constant) and isinstance(node.value.value, str)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (doc or future):
            break
        at = (node.end_lineno or node.lineno) + 1
    return edit_at(path, (at, 0), (at, 0), f"import {module}\n")


def copy_at_alias(path: str, target: str, online: str) -> tuple[int, list[Edit]] | None:
    """``target = online`` (or a shallow ``target = copy.copy(online)``) in ``path`` made a
    copy: ``target = copy.deepcopy(online)`` (and ``import copy`` where the file lacks it); the
    assignment's line and the edits, or ``None`` when the file holds no such assignment. A
    target that is an attribute of ``self`` is also found assigned from the same object's
    attribute as the method spells it (``self.target_policy = self.policy`` in the class of
    ``agent``, for ``online`` named ``agent.policy`` where the script holds it), and two
    attributes of one object the script holds as its constructor binds them
    (``self.target_head = self.head`` for ``model.target_head`` and ``model.head``); an item
    of a tuple assignment (``qf1_target, qf2_target = qf1, qf2``) is edited alone."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    spellings = {online}
    targets = {target}
    if target.startswith("self.") and "." in online:
        spellings.add(f"self.{online.rpartition('.')[2]}")
    holder, _, attribute = target.rpartition(".")
    if holder and holder != "self" and online.rpartition(".")[0] == holder:
        targets.add(f"self.{attribute}")
        spellings.add(f"self.{online.rpartition('.')[2]}")
    if "[" in target:
        # an item of a container of targets (``q_target_nets[i]``) whose container is a
        # shallow copy of the online networks' (``q_target_nets = list(q_nets)``): a copy of
        # the container, each network copied with it
        found = _container_copy(path, tree, text, target.split("[")[0])
        if found is not None:
            return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple) \
                and len(node.targets[0].elts) == len(node.value.elts):
            # ``qf1_target, qf2_target = qf1, qf2``: the one item
            for bound, value in zip(node.targets[0].elts, node.value.elts, strict=True):
                read = {segment(text, value), _shallow_copied(text, value)} & spellings
                if segment(text, bound) in targets and read:
                    return node.lineno, _deep_copy(path, value, read.pop())
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and segment(text, node.targets[0]) in targets):
            continue
        read = {segment(text, node.value), _shallow_copied(text, node.value)} & spellings
        if read:
            return node.lineno, _deep_copy(path, node.value, read.pop())
    return _put_in_container(path, tree, text, targets, spellings)


def _put_in_container(path: str, tree: ast.Module, text: str, targets: set[str],
                      spellings: set[str]) -> tuple[int, list[Edit]] | None:
    """A loop's variable ``target`` over a container (``for net in target_nets``, in a
    statement or a comprehension) that the one call ``target_nets.append(online)`` (or
    ``.insert(i, online)``) filled with the online network: that argument made a copy
    (Averaged-DQN's snapshots, ``target_nets.append(copy.deepcopy(q_net))``)."""
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For | ast.comprehension)]
    containers = {segment(text, n.iter) for n in loops
                  if isinstance(n.target, ast.Name) and n.target.id in targets
                  and isinstance(n.iter, ast.Name | ast.Attribute)}
    found = [(node.lineno, arg) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in ("append", "insert") and not node.keywords
             and segment(text, node.func.value) in containers and node.args
             for arg in node.args[-1:] if segment(text, arg) in spellings]
    if len(found) != 1:
        return None
    line, arg = found[0]
    return line, _deep_copy(path, arg, segment(text, arg))


def deep_copy_call(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The call at ``span``, ``copy.copy(x)`` (the module ``copy`` by any name the file binds
    it to), made deep: ``copy.deepcopy(x)``; ``None`` for another call or another spelling
    (``copy(x)`` of ``from copy import copy``)."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "copy"
            and isinstance(func.value, ast.Name) and len(call.args) == 1 and not call.keywords):
        return None
    module = func.value.id
    parsed = syntax_tree(path)
    binds = parsed is not None and any(
        isinstance(node, ast.Import) and any(a.name == "copy" and (a.asname or a.name) == module
                                             for a in node.names) for node in ast.walk(parsed[0]))
    if not binds:
        return None
    return node_edit(path, call, f"{module}.deepcopy({segment(text, call.args[0])})")


def made_per_item(path: str, name: str) -> tuple[int, list[Edit]] | None:
    """``name = [make()] * n`` (or ``n * [make()]``) in ``path``, a list of one object ``n``
    times, made a list of ``n`` objects: ``[make() for _ in range(n)]``, each made anew. The
    assignment's line and the edit, or ``None`` when ``path`` holds no one such assignment."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and segment(text, node.targets[0]) == name and isinstance(node.value, ast.BinOp)
                and isinstance(node.value.op, ast.Mult)):
            continue
        left, right = node.value.left, node.value.right
        listed, times = (left, right) if isinstance(left, ast.List) else (right, left)
        if isinstance(listed, ast.List) and len(listed.elts) == 1 and \
                isinstance(listed.elts[0], ast.Call):
            made = segment(text, listed.elts[0])
            found.append((node.lineno, node_edit(
                path, node.value, f"[{made} for _ in range({segment(text, times)})]")))
    if len(found) != 1:
        return None
    line, edit = found[0]
    return line, [edit]


def _container_copy(path: str, tree: ast.Module, text: str, name: str
                    ) -> tuple[int, list[Edit]] | None:
    """The one assignment ``name = list(x)`` (``x[:]``, ``x.copy()``, ``copy.copy(x)``, or
    ``x`` itself, a name) of ``path``, made ``name = copy.deepcopy(x)``: its line and edits."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and segment(text, node.targets[0]) == name):
            continue
        value = node.value
        source = _shallow_copied(text, value)
        if isinstance(value, ast.Name):
            source = value.id
        elif isinstance(value, ast.Call) and not value.keywords and len(value.args) == 1 and \
                segment(text, value.func) == "list":
            source = segment(text, value.args[0])
        elif isinstance(value, ast.Call) and not value.args and not value.keywords and \
                isinstance(value.func, ast.Attribute) and value.func.attr == "copy":
            source = segment(text, value.func.value)
        elif isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and \
                value.slice.lower is value.slice.upper is value.slice.step is None:
            source = segment(text, value.value)
        if source is not None:
            found.append((node, source))
    if len(found) != 1:
        return None
    node, source = found[0]
    return node.lineno, _deep_copy(path, node.value, source)


def _deep_copy(path: str, value: ast.expr, source: str) -> list[Edit]:
    """``value`` made ``copy.deepcopy(source)``, and ``import copy`` where the file lacks it."""
    imp = import_edit(path, "copy")
    return [node_edit(path, value, f"copy.deepcopy({source})"), *([imp] if imp else [])]


def _shallow_copied(text: str, value: ast.expr) -> str | None:
    """What ``copy.copy(x)`` (or ``copy(x)``, imported from ``copy``) copies, as the source
    spells it, else ``None``."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords and \
            segment(text, value.func) in ("copy.copy", "copy"):
        return segment(text, value.args[0])
    return None


def copy_snapshot(path: str, name: str) -> tuple[int, list[Edit]] | None:
    """The one assignment to ``name`` (``name = ...``, or to an item of it, ``name[k] = ...``)
    of ``path`` whose value takes views of tensors (``.detach()``, ``.data``,
    ``.state_dict()``) that it does not copy, made to take copies: ``p.detach()`` ->
    ``p.detach().clone()``, ``p.data`` -> ``p.data.clone()``, ``model.state_dict()`` ->
    ``copy.deepcopy(model.state_dict())`` (and ``import copy`` where the file lacks it). The
    assignment's line and the edits, or ``None`` when there is no one such assignment (a
    snapshot first taken with ``.clone()``, then kept up to date in the loop as a view:
    synaptic intelligence's ``p_old[n] = p.detach()``, is the loop's)."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if segment(text, target) != name and not (
                isinstance(target, ast.Subscript) and segment(text, target.value) == name):
            continue
        copied = _copied_views(text, node.value)
        if copied is not None:
            found.append((node, copied))
    if len(found) != 1:
        return None
    node, (state, views) = found[0]
    if state:
        return node.lineno, _deep_copy(path, node.value, segment(text, node.value))
    return node.lineno, [node_edit(path, v, f"{segment(text, v)}.clone()") for v in views]


def copy_registered(path: str, buffer: str) -> tuple[int, list[Edit]] | None:
    """The one ``register_buffer("<buffer>", value)`` call of ``path`` whose value takes views
    of tensors it does not copy (``self.weight.detach()``), made to take copies, as
    :func:`copy_snapshot` does for an assignment: the call's line and the edits, or ``None``."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "register_buffer" and len(node.args) >= 2 and \
                isinstance(node.args[0], ast.Constant) and node.args[0].value == buffer:
            copied = _copied_views(text, node.args[1])
            if copied is not None and not copied[0]:
                found.append((node, copied[1]))
    if len(found) != 1:
        return None
    node, views = found[0]
    return node.lineno, [node_edit(path, v, f"{segment(text, v)}.clone()") for v in views]


def _copied_views(text: str, value: ast.expr) -> tuple[bool, list[ast.expr]] | None:
    """What of ``value`` an edit copies: all of it (it takes a ``state_dict()`` outside any
    ``deepcopy``), or its views of tensors no ``.clone()`` copies; ``None`` when nothing."""
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and not n.args and not n.keywords]
    cloned = {id(n.func.value) for n in calls  # type: ignore[attr-defined]
              if n.func.attr == "clone"}  # type: ignore[attr-defined]
    deep = [n for n in ast.walk(value) if isinstance(n, ast.Call)
            and segment(text, n.func) in ("copy.deepcopy", "deepcopy")]
    inside = {id(m) for d in deep for m in ast.walk(d)}
    if any(n.func.attr == "state_dict" and id(n) not in inside  # type: ignore[attr-defined]
           for n in calls):
        return True, []
    views: list[ast.expr] = [n for n in calls
                             if n.func.attr == "detach"]  # type: ignore[attr-defined]
    views += [n for n in ast.walk(value) if isinstance(n, ast.Attribute) and n.attr == "data"
              and isinstance(n.ctx, ast.Load)]
    views = [v for v in views if id(v) not in cloned and id(v) not in inside]
    return (False, views) if views else None


def detach_call(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The call at ``span`` (a network's) cut where it is made: ``teacher(x)`` ->
    ``teacher(x).detach()``."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    old = segment(text, call)
    return node_edit(path, call, f"{old}.detach()")


def call_under_no_grad(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The statement whose whole value is the call at ``span`` under ``with torch.no_grad():``
    (``targets_x, targets_u = co_guess(...)``, as DivideMix computes its co-guessed targets):
    a cut of every value it unpacks; ``None`` where the call is not such a value."""
    edit = detach_call(path, span)
    return None if edit is None else under_no_grad(edit)


def detach_expression(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The expression at ``span`` cut where it is made: a call as :func:`detach_call` cuts
    it, any other in parentheses (``sum(top) / len(top)`` -> ``(sum(top) /
    len(top)).detach()``)."""
    found = expression_at(path, span)
    if found is None:
        return None
    node, text = found
    old = segment(text, node)
    simple = isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call)
    return node_edit(path, node, f"{old}.detach()" if simple else f"({old}).detach()")


def remove_detach(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """``x.detach()`` at ``span`` -> ``x``."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "detach"
            and not call.args and not call.keywords):
        return None
    inner = segment(text, call.func.value)
    return node_edit(path, call, inner)


def cut_argument(path: str, span: tuple[int, int, int, int] | None, index: int,
                 tensor: bool) -> list[Edit]:
    """The ``index``-th argument of the call at ``span`` cut, in plain PyTorch: ``.detach()``
    for a tensor, ``tuple(t.detach() for t in ...)`` for a tuple of them."""
    found = call_at(path, span)
    if found is None:
        return []
    call, text = found
    if index >= len(call.args) or isinstance(call.args[index], ast.Starred):
        return []
    arg = call.args[index]
    old = segment(text, arg)
    simple = isinstance(arg, ast.Name | ast.Attribute | ast.Subscript | ast.Call)
    new = (f"{old}.detach()" if simple else f"({old}).detach()") if tensor else \
        f"tuple(t.detach() for t in {old if simple else f'({old})'})"
    return [node_edit(path, arg, new)]


def backward_inputs(path: str, line: int, inputs: str) -> Edit | None:
    """The one ``.backward()`` call of the statement on ``line``, with no ``inputs``, given
    ``inputs=[INPUTS]``: the backward then writes only those tensors' ``.grad``
    (``energy.sum().backward()`` -> ``energy.sum().backward(inputs=[x_k])``)."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"]
    if len(calls) != 1 or any(k.arg == "inputs" for k in calls[0].keywords) or \
            any(isinstance(a, ast.Starred) for a in calls[0].args) or \
            any(k.arg is None for k in calls[0].keywords):
        return None
    call = calls[0]
    given = [segment(text, a) for a in call.args] + [
        f"{k.arg}={segment(text, k.value)}" for k in call.keywords]
    return node_edit(path, call, f"{segment(text, call.func)}"
                                 f"({', '.join([*given, f'inputs=[{inputs}]'])})")


def insert_before(path: str, line: int, statement: str) -> Edit | None:
    """``statement`` on its own line before the statement that starts on ``line``."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    if stmt.col_offset != len(indent_of(text, stmt.lineno)):
        return None  # not the first statement of its line
    indent = indent_of(text, stmt.lineno)
    return edit_at(path, (stmt.lineno, 0), (stmt.lineno, 0), f"{indent}{statement}\n")


def insert_after(path: str, line: int, statement: str) -> Edit | None:
    """``statement`` on its own line after the whole statement that starts on ``line`` (at its
    indentation); ``None`` when another statement follows it on its last line."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    end = stmt.end_lineno or stmt.lineno
    rest = split_lines(text)[end - 1].rstrip("\r\n").encode("utf-8")[
        stmt.end_col_offset or 0:].decode("utf-8", "replace").strip()
    if rest[:1] not in ("", "#") or stmt.col_offset != len(indent_of(text, stmt.lineno)):
        return None
    indent = indent_of(text, stmt.lineno)
    return edit_at(path, (end + 1, 0), (end + 1, 0), f"{indent}{statement}\n")


def empty_with(path: str, line: int, container: str) -> Edit | None:
    """The statement on ``line`` made to empty ``container`` too
    (:class:`~toolkit.audit.truth.proof.EmptiedAt`): ``del saved`` -> ``del saved[:]`` where
    it drops that name; ``del rewards[:]`` -> ``del rewards[:], container[:]``; else
    ``container.clear()`` on its own line after it (:func:`insert_after`)."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    if isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            if isinstance(target, ast.Name) and target.id == container:
                return node_edit(path, target, f"{container}[:]")
        if any(isinstance(t, ast.Subscript) for t in stmt.targets):
            last = stmt.targets[-1]
            return node_edit(path, last, f"{segment(text, last)}, {container}[:]")
    return insert_after(path, line, f"{container}.clear()")


def replace_parameters(path: str, line: int, params: str) -> Edit | None:
    """The parameters an optimizer is built over, replaced: the first argument of the call
    ``opt = torch.optim.Adam(encoder.parameters(), lr=...)`` on ``line`` -> ``params``."""
    found = statement_at(path, line)
    if found is None:
        return None
    value = getattr(found[0], "value", None)
    if not isinstance(value, ast.Call) or not value.args:
        return None
    return node_edit(path, value.args[0], params)


def built_over_each(path: str, line: int, container: str) -> Edit | None:
    """The sequence a comprehension of optimizers walks, replaced: ``opts = [Adam(q.parameters(),
    ...) for q in qf1]`` on ``line`` -> ``for q in container``, where each optimizer is built
    over the element it is on (``q.parameters()``) and the comprehension walks another
    sequence by name. ``None`` for anything else."""
    found = statement_at(path, line)
    if found is None:
        return None
    value = getattr(found[0], "value", None)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("list", "tuple") and len(value.args) == 1:
        value = value.args[0]
    if not isinstance(value, ast.ListComp | ast.GeneratorExp) or len(value.generators) != 1:
        return None
    walk = value.generators[0]
    call = value.elt
    if not isinstance(walk.target, ast.Name) or not isinstance(
            walk.iter, ast.Name | ast.Attribute) or not isinstance(call, ast.Call) or not call.args:
        return None
    arg = call.args[0]
    element = arg.func.value if isinstance(arg, ast.Call) and isinstance(
        arg.func, ast.Attribute) and arg.func.attr == "parameters" else arg
    if not isinstance(element, ast.Name) or element.id != walk.target.id or \
            segment(found[1], walk.iter) == container:
        return None
    return node_edit(path, walk.iter, container)


def listed_with(path: str, line: int, extra: str) -> Edit | None:
    """The list of tensors an optimizer is built over, written with ``extra`` as its last
    item: the first argument of the call on ``line`` when it is a list or tuple literal
    (``Adam([*actor.parameters(), *critic.parameters()])``), or the literal last assigned to
    the name it is (``params = [...]`` before ``RMSprop(params, ...)``, in its block). ``None``
    for anything else, and for a list of parameter groups (dicts)."""
    found = statement_at(path, line)
    parsed = syntax_tree(path)
    if found is None or parsed is None:
        return None
    value = getattr(found[0], "value", None)
    if not isinstance(value, ast.Call) or not value.args:
        return None
    listed = value.args[0]
    if isinstance(listed, ast.Name):
        bound = [st.value for st in ast.walk(parsed[0]) if isinstance(st, ast.Assign)
                 and st.lineno < line and len(st.targets) == 1
                 and isinstance(st.targets[0], ast.Name) and st.targets[0].id == listed.id]
        listed = max(bound, key=lambda v: v.lineno) if bound else None
    if not isinstance(listed, ast.List | ast.Tuple) or not listed.elts or \
            any(isinstance(e, ast.Dict) for e in listed.elts):
        return None
    last = listed.elts[-1]
    return node_edit(path, last, f"{segment(parsed[1], last)}, {extra}")


def widen(path: str, line: int, part: str, whole: str) -> Edit | None:
    """In the statement on ``line``, the one expression written ``part`` (``student.backbone``,
    an attribute of ``whole``) replaced by ``whole`` (``student``): an optimizer built over a
    part of a module, built over all of it. ``None`` unless ``part`` is written there exactly
    once."""
    found = statement_at(path, line)
    if found is None:
        return None
    statement, text = found
    written = [n for n in ast.walk(statement) if isinstance(n, ast.Attribute | ast.Subscript)
               and segment(text, n) == part]
    if len(written) != 1:
        return None
    return node_edit(path, written[0], whole)


def as_parameter(path: str, value: ast.expr, parameter: str) -> Edit | None:
    """A tensor made to require grad, the expression ``value`` of ``path``, made a parameter
    instead, spelled ``parameter`` (``nn.Parameter``, as the file imports it), which requires
    grad itself: ``torch.empty(n, requires_grad=True)`` -> ``nn.Parameter(torch.empty(n))``,
    ``(torch.ones([]) * s).requires_grad_()`` -> ``nn.Parameter(torch.ones([]) * s)``.
    ``None`` when the file cannot be read."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    text = parsed[1]
    inner = segment(text, value)
    trained = made_trainable(value)
    if trained is not None:
        inner = segment(text, trained)
    elif isinstance(value, ast.Call) and any(
            k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
            and k.value.value is True for k in value.keywords):
        rest = [segment(text, a) for a in value.args] + [
            f"{k.arg}={segment(text, k.value)}" if k.arg else f"**{segment(text, k.value)}"
            for k in value.keywords if k.arg != "requires_grad"]
        inner = f"{segment(text, value.func)}({', '.join(rest)})"
    return node_edit(path, value, f"{parameter}({inner})")


def out_of_no_grad(path: str, line: int) -> tuple[int, list[Edit]] | None:
    """The statement on ``line`` taken out of the innermost ``with torch.no_grad():`` around it:
    the line of the statement of the block that holds it, and the edits. The block's last
    statement is moved after the block, its first before the ``with`` (dedented: either runs
    where it ran, only with gradients on); a block of one statement loses its ``with``.
    ``None`` when ``line`` is in no such block, or the statement is neither its first nor its
    last."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    best = no_grad_block(tree, line)
    if best is None or len(best.items) != 1:
        return None
    holder = next((st for st in best.body
                   if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
    if holder is None or holder not in (best.body[0], best.body[-1]):
        return None
    lines = split_lines(text)
    end = holder.end_lineno or holder.lineno
    last = holder is best.body[-1]
    if last and (best.end_lineno or best.lineno) != end:
        return None   # a comment or a continuation after it, inside the block
    if holder.col_offset != len(indent_of(text, holder.lineno)):
        return None
    shift = holder.col_offset - best.col_offset
    body = lines[holder.lineno - 1:end]
    if any(x.strip() and len(x) - len(x.lstrip()) < shift for x in body):
        return None
    dedented = "".join(x[shift:] if x.strip() else x for x in body)
    if len(best.body) == 1:   # the block is this statement: the with goes
        return holder.lineno, [edit_at(path, (best.lineno, 0), (end + 1, 0), dedented)]
    if last:
        return holder.lineno, [edit_at(path, (holder.lineno, 0), (end + 1, 0), dedented)]
    return holder.lineno, [edit_at(path, (best.lineno, 0), (best.lineno, 0), dedented),
                           edit_at(path, (holder.lineno, 0), (end + 1, 0), "")]


def off_decorator(path: str, line: int) -> tuple[int, list[Edit]] | None:
    """The ``@torch.no_grad()`` of the function that runs ``line``, taken off: the
    decorator's line, and the edit that deletes it (the function then runs with gradients
    on wherever it is called). ``None`` when no such decorator stands alone on its line."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    decorator = no_grad_decorator(tree, line)
    if decorator is None or decorator.lineno != (decorator.end_lineno or decorator.lineno):
        return None
    row = split_lines(text)[decorator.lineno - 1]
    if row.strip() != "@" + (segment(text, decorator) or ""):
        return None   # another decorator or a comment shares its line
    return decorator.lineno, [edit_at(path, (decorator.lineno, 0), (decorator.lineno + 1, 0),
                                      "")]


def unfreeze_before(path: str, name: str, line: int) -> tuple[int, Edit] | None:
    """For a network ``name`` that the file freezes (``requires_grad = False`` over its
    parameters) inside a loop that also runs ``line`` (its optimizer's step): the freezing
    statement's line, and ``name.requires_grad_(True)`` inserted at the top of that loop's
    statement holding ``line``, so that every pass switches it back on before it trains."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For | ast.While):
            continue
        freeze = next((st for st in loop.body if freezes(st, text, name)), None)
        holder = next((st for st in loop.body
                       if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
        if freeze is None or holder is None or holder.lineno > freeze.lineno or \
                holder.col_offset != len(indent_of(text, holder.lineno)):
            continue
        indent = indent_of(text, holder.lineno)
        statement = f"{name}.requires_grad_(True)"
        return freeze.lineno, edit_at(path, (holder.lineno, 0), (holder.lineno, 0),
                                      f"{indent}{statement}\n")
    return None


def switch_on_before_loop(path: str, name: str, line: int) -> Edit | None:
    """``name.requires_grad_(True)`` inserted before the outermost loop that runs ``line`` (a
    phase's step): the phase begins with them switched on; ``None`` outside a loop."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For | ast.While)
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not loops:
        return None
    loop = min(loops, key=lambda n: n.lineno)
    if loop.col_offset != len(indent_of(text, loop.lineno)):
        return None
    return edit_at(path, (loop.lineno, 0), (loop.lineno, 0),
                   f"{indent_of(text, loop.lineno)}{name}.requires_grad_(True)\n")


def _freeze_at(path: str, line: int
               ) -> tuple[str, list[ast.stmt], int, str] | None:
    """The freeze on ``line`` (``name.requires_grad_(False)``, or a loop over
    ``name.parameters()`` switching each off), as the innermost block holding it: the file's
    text, the block, the freeze's index in it and ``name``; ``None`` where no freeze is there."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    for block in blocks(tree):
        at = next((i for i, st in enumerate(block) if isinstance(st, ast.stmt) and
                   st.lineno <= line <= (st.end_lineno or st.lineno)), None)
        off = None if at is None else switch_of(block[at], text)
        if off is not None and not off[1]:
            return text, block, at, off[0]   # type: ignore[return-value]
    return None


def _after(path: str, text: str, stmt: ast.stmt, statement: str) -> Edit | None:
    """``statement`` on its own line after ``stmt`` (the first statement of its line), at its
    indentation; ``None`` where another statement starts its line."""
    indent = indent_of(text, stmt.lineno)
    if stmt.col_offset != len(indent):
        return None
    end = (stmt.end_lineno or stmt.lineno) + 1
    return edit_at(path, (end, 0), (end, 0), f"{indent}{statement}\n")


def switch_on_with_the_rest(path: str, line: int) -> Edit | None:
    """For the freeze on ``line`` (:func:`_freeze_at`): ``name.requires_grad_(True)`` after
    the first later statement of its block that switches another network back on. The script
    undoes its block's freezes there and left this one out (a test that freezes two networks
    and switches one back on). ``None`` where the block switches no other one back on, or this
    one."""
    found = _freeze_at(path, line)
    if found is None:
        return None
    text, block, at, name = found
    for later in block[at + 1:]:
        on = switch_of(later, text)
        if on is not None and on[1]:
            return None if on[0] == name else \
                _after(path, text, later, f"{name}.requires_grad_(True)")
    return None


def switch_on_after_its_step(path: str, line: int) -> Edit | None:
    """For the call on ``line`` that froze tensors (``model.track_q_grad(False)``,
    ``net.requires_grad_(False)``: one argument, the constant ``False``): the same call with
    ``True``, after the first later statement of its block that steps an optimizer
    (``pi_optim.step()``): the freeze was for the loss of that step, and ends with it.
    ``None`` where the block has no such step, or switches it back on itself."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    for node in ast.walk(tree):
        block = getattr(node, "body", None)
        if not isinstance(block, list):
            continue
        at = next((i for i, st in enumerate(block) if isinstance(st, ast.Expr)
                   and st.lineno == line and isinstance(st.value, ast.Call)), None)
        if at is None:
            continue
        call = block[at].value
        values = [*call.args, *(k.value for k in call.keywords)]
        if len(values) != 1 or not isinstance(values[0], ast.Constant) or \
                values[0].value is not False or not values[0].lineno == call.lineno == \
                call.end_lineno:
            return None
        source, flag = segment(text, call), values[0]
        switched = (source[:flag.col_offset - call.col_offset] + "True"
                    + source[flag.end_col_offset - call.col_offset:])
        for later in block[at + 1:]:
            value = later.value if isinstance(later, ast.Expr) else None
            if not isinstance(value, ast.Call):
                continue
            if segment(text, value) == switched:
                return None
            if isinstance(value.func, ast.Attribute) and value.func.attr == "step":
                return _after(path, text, later, switched)
        return None
    return None


def switch_on_after_its_use(path: str, line: int) -> Edit | None:
    """For the freeze on ``line`` (:func:`_freeze_at`, not a loop): ``name.requires_grad_(True)``
    after the first later statement of its block that reads ``name`` (the call the freeze was
    made for: an evaluation handed the synthetic images, frozen, as dataset condensation's
    is); ``None`` where no later statement of the block reads it, or one switches it on."""
    found = _freeze_at(path, line)
    if found is None or isinstance(found[1][found[2]], ast.For):
        return None
    text, block, at, name = found
    for later in block[at + 1:]:
        if switch_of(later, text) is not None:
            return None
        if any(isinstance(n, ast.Name | ast.Attribute) and segment(text, n) == name
               for n in ast.walk(later)):
            return _after(path, text, later, f"{name}.requires_grad_(True)")
    return None


def move_before(path: str, line: int, target: int) -> list[Edit]:
    """The statement on ``line`` moved before the statement on ``target`` (same file, same
    block)."""
    a, b = statement_at(path, line), statement_at(path, target)
    if a is None or b is None:
        return []
    stmt, text = a
    other, _ = b
    lines = [x.rstrip("\r\n") for x in split_lines(text)]
    end = stmt.end_lineno or stmt.lineno
    rest = lines[end - 1].encode("utf-8")[stmt.end_col_offset or 0:].decode().strip()
    if stmt.col_offset != len(indent_of(text, stmt.lineno)) or rest[:1] not in ("", "#"):
        return []
    moved = segment(text, stmt)
    indent = indent_of(text, other.lineno)
    return [edit_at(path, (stmt.lineno, 0), (end + 1, 0), ""),
            edit_at(path, (other.lineno, 0), (other.lineno, 0), f"{indent}{moved}\n")]


def _offset(lines: Sequence[str], pos: tuple[int, int]) -> int:
    line, col = pos
    if line - 1 >= len(lines):
        return sum(len(x) for x in lines)
    before = sum(len(x) for x in lines[:line - 1])
    return before + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))


def apply_to_text(text: str, edits: Iterable[Edit], newline: str = "\n") -> str:
    """``text`` with ``edits`` made (:func:`~toolkit.audit.fixes.edits.apply_edits`, which
    checks that each edit's ``old`` is the text at its place); a line an edit adds ends in
    ``newline``, the file's own."""
    if newline != "\n":
        edits = [replace(e, new=e.new.replace("\r\n", "\n").replace("\n", newline))
                 for e in edits]
    return apply_edits(text, edits)


def _edited(edits: Iterable[Edit]) -> dict[str, list[Edit]]:
    by_file: dict[str, list[Edit]] = {}
    for e in edits:
        if e not in by_file.setdefault(e.path, []):
            by_file[e.path].append(e)
    return by_file


def edited_texts(edits: Iterable[Edit]) -> dict[Source, str]:
    """Each file's source as the audit read it, and its text with the edits made."""
    out = {}
    for path, mine in _edited(edits).items():
        source = read_source(path)
        out[source] = apply_to_text(source.text, mine, source.newline)
    return out


def diff(edits: Iterable[Edit], root: str) -> str:
    """The edits as one unified diff, paths relative to ``root`` (``a/``, ``b/``), a file
    outside it by its absolute path; paths escaped."""
    out = []
    for source, new in edited_texts(edits).items():
        rel = os.path.relpath(source.path, root)
        old_name, new_name = ((source.path, source.path) if rel.startswith(os.pardir)
                              else (f"a/{rel}", f"b/{rel}"))
        out += difflib.unified_diff(source.lines(), split_lines(new), escaped(old_name),
                                    escaped(new_name))
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n" for line in out)


def write_edits(edits: Iterable[Edit], root: str) -> list[tuple[str, str]]:
    """Write the edits into their files, each of which must lie inside ``root``, be reached
    through no link, be writable and unchanged since the audit read it; a copy of each file
    changed is kept next to it (``train.py.orig``, or ``.orig1``… when that name is taken).
    Returns ``(file, copy)`` pairs; raises :class:`Refused` with nothing written (see
    :mod:`~toolkit.audit.files`)."""
    edits = list(edits)
    for path in _edited(edits):
        why = inside(path, root)
        if why is not None:
            raise Refused(path, f"{why}; nothing was written")
    try:
        texts = edited_texts(edits)
    except (OSError, SyntaxError, UnicodeDecodeError) as err:
        raise Refused(getattr(err, "filename", None) or root,
                      f"cannot be read ({err}); nothing was written") from None
    except ValueError as err:  # an edit's text is not at its place, or two edits overlap
        raise Refused(root, f"{err}; nothing was written") from None
    return write_sources(texts, root)
