"""Edits of the user's script: a span of a file and what to write there, written from the
script's own syntax tree (nothing is evaluated), shown as a unified diff, and applied with a copy
of each file kept."""

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
from toolkit.audit.fixes.edits import apply_edits

__all__ = ["Refused", "ScriptEdit", "apply_to_text", "diff", "edit_at", "edited_texts", "write_edits"]


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


def ScriptEdit(path: str, start: tuple[int, int], end: tuple[int, int], new: str,
               what: str = "") -> Edit:
    """Transitional spelling of :func:`edit_at` (``what`` is ignored)."""
    return edit_at(path, start, end, new)


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


# --- reading the script's syntax tree --------------------------------------------------------

_trees: dict[tuple[str, str], ast.Module] = {}


def syntax_tree(path: str) -> tuple[ast.Module, str] | None:
    """The file's syntax tree as the audit read it (parsed once per text; read only)."""
    try:
        source = read_source(path)
        key = (source.path, source.digest)
        tree = _trees.get(key)
        if tree is None:
            tree = _trees[key] = ast.parse(source.text)
        return tree, source.text
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


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
    """``target = online`` in ``path`` made a copy: ``target = copy.deepcopy(online)`` (and
    ``import copy`` where the file lacks it); the assignment's line and the edits, or
    ``None`` when the file holds no such assignment."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                segment(text, node.targets[0]) == target and segment(text, node.value) == online:
            value = node.value
            new = f"copy.deepcopy({online})"
            edits = [node_edit(path, value, new)]
            imp = import_edit(path, "copy")
            return node.lineno, edits + ([imp] if imp is not None else [])
    return None


def call_at(path: str, span: tuple[int, int, int, int] | None) -> tuple[ast.Call, str] | None:
    """The call expression whose span is exactly ``span`` (what the frame was paused in)."""
    parsed = syntax_tree(path) if span else None
    if parsed is None or span is None:
        return None
    tree, text = parsed
    calls = _calls.get(id(tree))
    if calls is None or calls[0] is not tree:
        calls = _calls[id(tree)] = (tree, {
            (n.lineno, n.end_lineno, n.col_offset, n.end_col_offset): n
            for n in ast.walk(tree) if isinstance(n, ast.Call)})
    node = calls[1].get(span)
    return (node, text) if node is not None else None


_calls: dict[int, tuple[ast.Module, dict[tuple, ast.Call]]] = {}


def statement_at(path: str, line: int) -> tuple[ast.stmt, str] | None:
    """The innermost simple statement that starts on ``line``."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    best = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.stmt) and node.lineno == line
                and not isinstance(node, ast.If | ast.For | ast.While | ast.With | ast.Try
                                   | ast.FunctionDef | ast.ClassDef | ast.AsyncFor
                                   | ast.AsyncWith | ast.AsyncFunctionDef)):
            best = node
    return (best, text) if best is not None else None


def segment(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or ""


def line_named(path: str, line: int) -> str:
    """``train.py:42``: a line of the user's file as the report names it."""
    return f"{os.path.basename(path)}:{line}"


def detach_call(path: str, span: tuple[int, int, int, int] | None) -> Edit | None:
    """The call at ``span`` (a network's) cut where it is made: ``teacher(x)`` ->
    ``teacher(x).detach()``."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    old = segment(text, call)
    return node_edit(path, call, f"{old}.detach()")


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


def _indent(text: str, line: int) -> str:
    src = split_lines(text)[line - 1].rstrip("\r\n")
    return src[:len(src) - len(src.lstrip())]


def insert_before(path: str, line: int, statement: str) -> Edit | None:
    """``statement`` on its own line before the statement that starts on ``line``."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    if stmt.col_offset != len(_indent(text, stmt.lineno)):
        return None  # not the first statement of its line
    indent = _indent(text, stmt.lineno)
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
    if rest[:1] not in ("", "#") or stmt.col_offset != len(_indent(text, stmt.lineno)):
        return None
    indent = _indent(text, stmt.lineno)
    return edit_at(path, (end + 1, 0), (end + 1, 0), f"{indent}{statement}\n")


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


def _is_no_grad(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call) or call.args or call.keywords:
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "no_grad"


def _no_grad_block(tree: ast.Module, line: int) -> ast.With | None:
    """The innermost ``with torch.no_grad():`` whose body holds ``line``, or ``None``."""
    blocks = [node for node in ast.walk(tree) if isinstance(node, ast.With)
              and any(_is_no_grad(i) for i in node.items)
              and node.body[0].lineno <= line <= (node.end_lineno or node.lineno)]
    return max(blocks, key=lambda b: b.lineno) if blocks else None


def no_grad_block_names(path: str, line: int) -> set[str] | None:
    """The names the statements of the innermost ``with torch.no_grad():`` around ``line``
    assign (what the block makes for the code after it), or ``None`` outside such a block."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    block = _no_grad_block(parsed[0], line)
    if block is None:
        return None
    return {t.id for st in ast.walk(block) if isinstance(st, ast.Assign | ast.AugAssign)
            for target in (st.targets if isinstance(st, ast.Assign) else [st.target])
            for t in ast.walk(target) if isinstance(t, ast.Name)}


def argument_names(path: str, span: tuple[int, int, int, int] | None) -> set[str]:
    """The plain names the arguments of the call at ``span`` read (``head(z)`` -> ``{"z"}``)."""
    found = call_at(path, span)
    if found is None:
        return set()
    call, _ = found
    return {n.id for a in [*call.args, *(k.value for k in call.keywords)]
            for n in ast.walk(a) if isinstance(n, ast.Name)}


def statement_text(path: str, line: int) -> str:
    """The text of the statement that starts on ``line`` (its first line)."""
    found = statement_at(path, line)
    return segment(found[1], found[0]).splitlines()[0] if found else ""


def out_of_no_grad(path: str, line: int) -> tuple[int, list[Edit]] | None:
    """The statement on ``line`` taken out of the innermost ``with torch.no_grad():`` around it:
    the line of the statement of the block that holds it, and the edits. The block's last
    statement is moved after the block (dedented); a block of one statement loses its
    ``with``. ``None`` when ``line`` is in no such block, or the statement is not its last."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    best = _no_grad_block(tree, line)
    if best is None or len(best.items) != 1:
        return None
    holder = next((st for st in best.body
                   if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
    if holder is None or holder is not best.body[-1]:
        return None
    lines = split_lines(text)
    end = holder.end_lineno or holder.lineno
    if (best.end_lineno or best.lineno) != end or holder.col_offset != len(
            _indent(text, holder.lineno)):
        return None
    shift = holder.col_offset - best.col_offset
    body = lines[holder.lineno - 1:end]
    if any(x.strip() and len(x) - len(x.lstrip()) < shift for x in body):
        return None
    dedented = "".join(x[shift:] if x.strip() else x for x in body)
    if len(best.body) == 1:   # the block is this statement: the with goes
        return holder.lineno, [edit_at(path, (best.lineno, 0), (end + 1, 0), dedented)]
    return holder.lineno, [edit_at(path, (holder.lineno, 0), (end + 1, 0), dedented)]


def _freezes(node: ast.AST, text: str, name: str) -> bool:
    """``for p in name.parameters(): p.requires_grad = False`` (or ``requires_grad_(False)``),
    or ``name.requires_grad_(False)``."""
    def off(st: ast.AST, var: str) -> bool:
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            t = st.targets[0]
            return (isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    and segment(text, t.value) == var and isinstance(st.value, ast.Constant)
                    and st.value.value is False)
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            f = st.value.func
            return (isinstance(f, ast.Attribute) and f.attr == "requires_grad_"
                    and segment(text, f.value) == var and len(st.value.args) == 1
                    and isinstance(st.value.args[0], ast.Constant)
                    and st.value.args[0].value is False)
        return False

    if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
            segment(text, node.iter) == f"{name}.parameters()":
        return any(off(st, node.target.id) for st in node.body)
    return off(node, name)


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
        freeze = next((st for st in loop.body if _freezes(st, text, name)), None)
        holder = next((st for st in loop.body
                       if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
        if freeze is None or holder is None or holder.lineno > freeze.lineno or \
                holder.col_offset != len(_indent(text, holder.lineno)):
            continue
        indent = _indent(text, holder.lineno)
        statement = f"{name}.requires_grad_(True)"
        return freeze.lineno, edit_at(path, (holder.lineno, 0), (holder.lineno, 0),
                                      f"{indent}{statement}\n")
    return None


def assigned_name(path: str, line: int) -> str | None:
    """``opt`` of ``opt = torch.optim.SGD(...)`` starting on ``line``: the one name a statement
    assigns to, or ``None``."""
    found = statement_at(path, line)
    if found is None:
        return None
    stmt, text = found
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return segment(text, stmt.targets[0]) or None
    if isinstance(stmt, ast.AnnAssign):
        return segment(text, stmt.target) or None
    return None


def assigned_names(path: str, line: int) -> set[str]:
    """The plain names the statement on ``line`` assigns (``a, b = f(x)`` -> ``{"a", "b"}``;
    ``self.h = ...`` -> ``{"h"}``): what it makes for the code after it."""
    found = statement_at(path, line)
    if found is None:
        return set()
    stmt, _ = found
    targets = (stmt.targets if isinstance(stmt, ast.Assign) else
               [stmt.target] if isinstance(stmt, ast.AugAssign | ast.AnnAssign) else [])
    return {n.id if isinstance(n, ast.Name) else n.attr for t in targets for n in ast.walk(t)
            if isinstance(n, ast.Name | ast.Attribute)}


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
    if stmt.col_offset != len(_indent(text, stmt.lineno)) or rest[:1] not in ("", "#"):
        return []
    moved = segment(text, stmt)
    indent = _indent(text, other.lineno)
    return [edit_at(path, (stmt.lineno, 0), (end + 1, 0), ""),
            edit_at(path, (other.lineno, 0), (other.lineno, 0), f"{indent}{moved}\n")]


def receiver(path: str, span: tuple[int, int, int, int] | None) -> str | None:
    """The optimizer's expression in the call at ``span``: ``opt`` of ``opt.step()``, or the
    one argument of ``scaler.step(opt)``."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "step"):
        return None
    if len(call.args) == 1 and not call.keywords:
        return segment(text, call.args[0])
    return segment(text, call.func.value) if not call.args else None
