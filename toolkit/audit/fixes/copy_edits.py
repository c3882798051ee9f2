"""Edits that give a copy its own tensors, in the user's plain PyTorch: an assignment or a
shallow ``copy.copy`` that made a target network, a snapshot, a registered buffer or a list's
members share the online tensors becomes ``copy.deepcopy`` (or a new object per item), with
``import copy`` where the file lacks it."""

from __future__ import annotations

import ast

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.script_edits import edit_at, import_edit, node_edit
from toolkit.audit.record.syntax import (
    call_at,
    segment,
    statement_at,
    syntax_tree,
)

__all__ = ["copy_anchor", "copy_at_alias", "copy_registered", "copy_snapshot", "copy_where_shared",
           "data_copied", "deep_copy_call", "made_per_item"]


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


def copy_where_shared(path: str, line: int) -> list[Edit] | None:
    """The assignment at ``line`` of ``path`` that gives a module a parameter or a submodule
    another module holds (``q.weight = linear.weight``, ``student.blocks[i] =
    teacher.blocks[2 * i]``), made to give it a copy: ``copy.deepcopy(...)`` of the value (and
    ``import copy`` where the file lacks it); ``None`` where the line holds no such assignment
    of a plain reference (a name, an attribute, an item)."""
    found = statement_at(path, line)
    if found is None:
        return None
    node, text = found
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute | ast.Subscript)
            and isinstance(node.value, ast.Name | ast.Attribute | ast.Subscript)):
        return None
    return _deep_copy(path, node.value, segment(text, node.value))


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


def _assigned(tree: ast.Module, text: str, name: str) -> list[tuple[ast.Assign, bool]]:
    """The assignments of ``tree`` to ``name`` (``name = ...``) or to an item of it
    (``name[k] = ...``, marked ``True``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if segment(text, target) == name:
                found.append((node, False))
            elif isinstance(target, ast.Subscript) and segment(text, target.value) == name:
                found.append((node, True))
    return found


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
    found = [(node, copied) for node, _ in _assigned(tree, text, name)
             if (copied := _copied_views(text, node.value)) is not None]
    if len(found) != 1:
        return None
    node, (state, views) = found[0]
    if state:
        return node.lineno, _deep_copy(path, node.value, segment(text, node.value))
    return node.lineno, [node_edit(path, v, f"{segment(text, v)}.clone()") for v in views]


def copy_anchor(path: str, name: str) -> tuple[int, list[Edit]] | None:
    """The one assignment to ``name`` (``name = ...``, or to an item of it, ``name[k] = p``) of
    ``path`` whose value holds tensors themselves where copies were meant (a reference point
    of a network's weights: L2-SP's start, EWC's means), made to hold copies cut from the
    graph: ``list(m.parameters())`` -> ``[p.detach().clone() for p in m.parameters()]``,
    ``dict(m.named_parameters())`` -> ``{n: p.detach().clone() for n, p in ...}``, the item
    of a comprehension (``{n: p for n, p in ...}``) or the value of an item's assignment
    (``prev[n] = p``) -> ``p.detach().clone()``. The assignment's line and the edit, or
    ``None`` where there is no one such assignment."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    found = []
    for node, item in _assigned(tree, text, name):
        if not item:
            new = _anchor_copied(text, node.value)
            if new is not None:
                found.append((node, *new))
        elif isinstance(node.value, ast.Name | ast.Attribute | ast.Subscript):
            found.append((node, node.value, f"{segment(text, node.value)}.detach().clone()"))
    if len(found) != 1:
        return None
    node, value, new = found[0]
    return node.lineno, [node_edit(path, value, new)]


def _anchor_copied(text: str, value: ast.expr) -> tuple[ast.expr, str] | None:
    """The part of ``value`` that holds tensors themselves and what holds copies of them
    instead (see :func:`copy_anchor`), or ``None`` for a value of another form."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("list", "tuple", "dict") and len(value.args) == 1 and \
            not value.keywords and not isinstance(value.args[0], ast.GeneratorExp):
        items = segment(text, value.args[0])
        return value, {"list": f"[p.detach().clone() for p in {items}]",
                       "tuple": f"tuple(p.detach().clone() for p in {items})",
                       "dict": f"{{n: p.detach().clone() for n, p in {items}}}"}[value.func.id]
    comp: ast.expr = value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("list", "tuple") and len(value.args) == 1:
        comp = value.args[0]   # list(p for p in ...): the generator's item
    if isinstance(comp, ast.ListComp | ast.GeneratorExp | ast.SetComp):
        item = comp.elt
    elif isinstance(comp, ast.DictComp):
        item = comp.value
    else:
        return None
    bound = {n.id for gen in comp.generators for n in ast.walk(gen.target)
             if isinstance(n, ast.Name)}
    if not (isinstance(item, ast.Name) and item.id in bound):
        return None   # an item computed from the loop's variable is no alias of it
    return item, f"{item.id}.detach().clone()"


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


def data_copied(path: str) -> tuple[int, list[Edit]] | None:
    """Each statement ``a.data = b.data`` of ``path`` (two tensors' ``.data``, of two names),
    which rebinds ``a`` to ``b``'s storage where its values were to be copied: ``a.data.copy_(
    b.data)`` (a target network synced by hand, ``for tp, p in zip(...)``). The first
    statement's line and the edits, or ``None`` where the file holds none."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    found = sorted((node.lineno, node) for node in ast.walk(tree)
                   if isinstance(node, ast.Assign) and len(node.targets) == 1
                   and isinstance(node.targets[0], ast.Attribute)
                   and node.targets[0].attr == "data" and isinstance(node.value, ast.Attribute)
                   and node.value.attr == "data"
                   and segment(text, node.targets[0].value) != segment(text, node.value.value))
    if not found:
        return None
    edits = [edit_at(path, (node.lineno, node.col_offset),
                     (node.end_lineno or node.lineno, node.end_col_offset or 0),
                     f"{segment(text, node.targets[0])}.copy_({segment(text, node.value)})")
             for _, node in found]
    return found[0][0], edits
