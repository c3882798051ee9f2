"""Edits of the user's script, in plain PyTorch, written from its own syntax tree
(:mod:`toolkit.audit.record.syntax`): each one the :class:`~toolkit.audit.edit.Edit` both audits
print, with the text it replaces as the audit read it; shown as a unified diff and written,
under ``--apply`` only, through :func:`toolkit.audit.files.write_sources` (a copy of each file
kept)."""

from __future__ import annotations

import ast
import difflib
import itertools
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
    call_at,
    expression_at,
    indent_of,
    made_trainable,
    parameters_read,
    segment,
    statement_at,
    syntax_tree,
)

__all__ = ["apply_to_text", "as_parameter", "backward_inputs", "buffer_as_parameter",
           "built_over_each", "call_under_no_grad", "cut_argument", "detach_call",
           "detach_expression", "detach_undone", "diff", "edit_at", "edited_texts", "empty_with",
           "import_edit", "insert_after", "insert_before", "listed_module", "listed_with",
           "move_before", "node_edit", "parameters_from", "remove_detach", "replace_parameters",
           "widen", "write_edits"]


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


def parameters_from(path: str, span: tuple[int, int, int, int] | None,
                    network: str) -> tuple[Edit, ...]:
    """The network the optimizer's call at ``span`` reads its tensors from
    (:func:`~toolkit.audit.record.syntax.parameters_read`), where it is one, written as
    another, ``network``, at each place it is read: the groups, filters and settings the
    script built its optimizer with are kept (``lm.named_parameters()`` ->
    ``prefix.named_parameters()`` in the line that lists the tensors each group filters).
    None where it reads several networks, or already ``network``, or the argument is that
    network's ``parameters()`` alone (:func:`replace_parameters` writes the whole argument)."""
    parsed = syntax_tree(path)
    read = parameters_read(path, span)
    if parsed is None or not read:
        return ()
    found = call_at(path, span)
    first = None if found is None or not found[0].args else found[0].args[0]
    if len(read) == 1 and isinstance(first, ast.Call) and \
            isinstance(first.func, ast.Attribute) and first.func.value is read[0]:
        return ()   # one tree per text (syntax_tree): the same node
    texts = {segment(parsed[1], node) for node in read}
    if len(texts) != 1 or texts == {network}:
        return ()
    return tuple(node_edit(path, node, network) for node in read)


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


def _listed(path: str, line: int) -> tuple[ast.expr, str] | None:
    """The first argument of the optimizer's call on ``line``, or the value last assigned to
    the name it is (``params = ...`` before ``RMSprop(params, ...)``, in its file), with the
    file's text."""
    found = statement_at(path, line)
    parsed = syntax_tree(path)
    if found is None or parsed is None:
        return None
    value = getattr(found[0], "value", None)
    if not isinstance(value, ast.Call) or not value.args:
        return None
    listed: ast.expr | None = value.args[0]
    if isinstance(listed, ast.Name):
        name = listed.id
        bound = [st.value for st in ast.walk(parsed[0]) if isinstance(st, ast.Assign)
                 and st.lineno < line and len(st.targets) == 1
                 and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name]
        listed = max(bound, key=lambda v: v.lineno) if bound else None
    return (listed, parsed[1]) if listed is not None else None


def listed_with(path: str, line: int, extra: str) -> Edit | None:
    """The list of tensors an optimizer is built over, written with ``extra`` as its last
    item: the first argument of the call on ``line`` when it is a list or tuple literal
    (``Adam([*actor.parameters(), *critic.parameters()])``), or the literal last assigned to
    the name it is (``params = [...]`` before ``RMSprop(params, ...)``, in its block). ``None``
    for anything else, and for a list of parameter groups (dicts)."""
    found = _listed(path, line)
    if found is None:
        return None
    listed, text = found
    if not isinstance(listed, ast.List | ast.Tuple) or not listed.elts or \
            any(isinstance(e, ast.Dict) for e in listed.elts):
        return None
    last = listed.elts[-1]
    return node_edit(path, last, f"{segment(text, last)}, {extra}")


def _parameters_of(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x.parameters()``, else ``None``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "parameters" and not node.args:
        return node.func.value
    return None


def listed_module(path: str, line: int, module: str) -> Edit | None:
    """The tensors an optimizer is built over (its call on ``line``, or the name's last
    assignment before it: :func:`_listed`), taken from several networks, written with the
    network ``module`` too, in the form the script lists the others: the modules a
    comprehension walks (``[p for m in (encoder, rssm, decoder) for p in m.parameters()]``,
    ``(..., reward_model)``), the unpacked ``[*a.parameters(), *b.parameters()]``, the sum
    ``list(a.parameters()) + list(b.parameters())`` or ``itertools.chain(a.parameters(),
    ...)``. Every reader of that list (a ``clip_grad_norm_`` over it) then holds it too.
    ``None`` for anything else."""
    found = _listed(path, line)
    if found is None:
        return None
    listed, text = found
    if isinstance(listed, ast.Call) and isinstance(listed.func, ast.Name) and \
            listed.func.id in ("list", "tuple") and len(listed.args) == 1 and \
            isinstance(listed.args[0], ast.ListComp | ast.GeneratorExp):
        listed = listed.args[0]
    if isinstance(listed, ast.ListComp | ast.GeneratorExp):
        walks = listed.generators
        for outer, inner in itertools.pairwise(walks):
            if isinstance(outer.target, ast.Name) and \
                    isinstance(outer.iter, ast.List | ast.Tuple) and outer.iter.elts and \
                    isinstance(of := _parameters_of(inner.iter), ast.Name) and \
                    of.id == outer.target.id:
                last = outer.iter.elts[-1]
                return node_edit(path, last, f"{segment(text, last)}, {module}")
        return None
    if isinstance(listed, ast.List | ast.Tuple) and len(listed.elts) > 1 and all(
            isinstance(e, ast.Starred) and _parameters_of(e.value) is not None
            for e in listed.elts):
        last = listed.elts[-1]
        return node_edit(path, last, f"{segment(text, last)}, *{module}.parameters()")
    if isinstance(listed, ast.BinOp) and isinstance(listed.op, ast.Add):
        terms, node = [], listed
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            terms.append(node.right)
            node = node.left
        terms.append(node)
        if all(isinstance(t, ast.Call) and isinstance(t.func, ast.Name)
               and t.func.id == "list" and len(t.args) == 1
               and _parameters_of(t.args[0]) is not None for t in terms):
            return node_edit(path, listed,
                             f"{segment(text, listed)} + list({module}.parameters())")
        return None
    if isinstance(listed, ast.Call) and segment(text, listed.func).split(".")[-1] == "chain" \
            and len(listed.args) > 1 and all(_parameters_of(a) is not None
                                             for a in listed.args):
        last = listed.args[-1]
        return node_edit(path, last, f"{segment(text, last)}, {module}.parameters()")
    return None


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


def buffer_as_parameter(path: str, call: ast.Call, parameter: str) -> Edit | None:
    """The buffer a statement of ``path`` registers, ``call``
    (``self.register_buffer("sigma_bias", torch.full((n,), s))``), made a parameter in its
    place, spelled ``parameter`` (``nn.Parameter``, as the file imports it):
    ``self.sigma_bias = nn.Parameter(torch.full((n,), s))``. ``None`` when the file cannot be
    read or the call does not name the buffer by a string before its value."""
    parsed = syntax_tree(path)
    if parsed is None or not isinstance(call.func, ast.Attribute) or len(call.args) < 2 or \
            not isinstance(call.args[0], ast.Constant) or not isinstance(call.args[0].value, str):
        return None
    text = parsed[1]
    return node_edit(path, call, f"{segment(text, call.func.value)}.{call.args[0].value} = "
                                 f"{parameter}({segment(text, call.args[1])})")


def move_before(path: str, line: int, target: int) -> list[Edit]:
    """The statement on ``line`` moved before the statement on ``target`` (same file, same
    block). A statement that is the whole body of an ``if`` with no ``else`` (``if args.clip >
    0: clip_grad_norm_(...)``, as locuslab/TCN writes its clip) moves with its ``if``."""
    a, b = statement_at(path, line), statement_at(path, target)
    if a is None or b is None:
        return []
    stmt, text = a
    other, _ = b
    parsed = syntax_tree(path)
    while parsed is not None and (guard := next(
            (n for n in ast.walk(parsed[0]) if isinstance(n, ast.If) and n.body == [stmt]
             and not n.orelse), None)) is not None:
        stmt = guard
    if not _alone(text, stmt) or (stmt.end_lineno != stmt.lineno and
                                  indent_of(text, stmt.lineno) != indent_of(text, other.lineno)):
        return []
    end = stmt.end_lineno or stmt.lineno
    moved = segment(text, stmt)
    indent = indent_of(text, other.lineno)
    return [edit_at(path, (stmt.lineno, 0), (end + 1, 0), ""),
            edit_at(path, (other.lineno, 0), (other.lineno, 0), f"{indent}{moved}\n")]


def detach_undone(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The cut ``x.detach()`` at ``span`` taken away: a statement ``x = x.detach()`` alone on
    its lines deleted whole, else the call replaced by ``x`` (:func:`remove_detach`)."""
    found = call_at(path, span)
    stmt = None if found is None else statement_at(path, found[0].lineno)
    if found is not None and stmt is not None:
        (call, text), node = found, stmt[0]
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1 \
                and isinstance(call.func, ast.Attribute) and call.func.attr == "detach" \
                and segment(text, node.targets[0]) == segment(text, call.func.value) \
                and _alone(text, node):
            end = node.end_lineno or node.lineno
            return edit_at(path, (node.lineno, 0), (end + 1, 0), "")
    return remove_detach(path, span)


def _alone(text: str, stmt: ast.stmt) -> bool:
    """Whether ``stmt`` has its lines to itself: it starts its first line, and nothing but a
    comment follows it on its last."""
    end = stmt.end_lineno or stmt.lineno
    last = split_lines(text)[end - 1].rstrip("\r\n")
    rest = last.encode("utf-8")[stmt.end_col_offset or 0:].decode("utf-8", "replace").strip()
    return stmt.col_offset == len(indent_of(text, stmt.lineno)) and rest[:1] in ("", "#")


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
