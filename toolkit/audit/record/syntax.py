"""The user's script read as its syntax tree: the call a paused frame is in, the statement on
a line, the names a statement binds, the ``with torch.no_grad():`` block around a line. Nothing
is evaluated; each file is parsed once per text, as :mod:`toolkit.audit.files` first read it."""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import os
from collections.abc import Callable, Iterator, Sequence

from toolkit.audit.files import read_source, split_lines

__all__ = [
    "argument_names",
    "arguments_made_at",
    "assigned_name",
    "assigned_names",
    "assignment_of",
    "attribute_path",
    "block_body",
    "blocks",
    "bound_whole",
    "call_at",
    "cutting_call",
    "expression_at",
    "first_statement",
    "freezes",
    "indent_of",
    "iterated_by",
    "line_named",
    "listed_groups",
    "loaded_from",
    "loop_around",
    "loop_beside",
    "no_grad_block",
    "no_grad_block_names",
    "no_grad_decorator",
    "parameters_read",
    "params_in_scope",
    "progress_conditions",
    "receiver",
    "segment",
    "statement_at",
    "statement_text",
    "step_left_out",
    "switch_of",
    "switched_branch",
    "syntax_tree",
    "unread_cut",
]


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


def expression_at(path: str, span: tuple[int, int, int, int] | None
                  ) -> tuple[ast.expr, str] | None:
    """The expression whose span is exactly ``span`` (a call, else the outermost other
    expression there: ``sum(top) / len(top)``)."""
    found = call_at(path, span)
    if found is not None:
        return found
    parsed = syntax_tree(path) if span else None
    if parsed is None or span is None:
        return None
    tree, text = parsed
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.expr) and (
        n.lineno, n.end_lineno, n.col_offset, n.end_col_offset) == span), None)
    return (node, text) if node is not None else None


def _receiver(node: ast.AST, method: str) -> ast.expr | None:
    """``x`` when ``node`` is a call ``x.method(...)``, else ``None``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == method:
        return node.func.value
    return None


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def iterated_by(path: str, name: ast.expr) -> ast.expr | None:
    """The container whose items a comprehension around ``name`` binds it to (``state`` for
    ``v`` of ``{k: v.detach() for k, v in state.items()}``; a trailing ``.items()`` or
    ``.values()`` left out), or ``None`` where ``name`` is no such variable: a value the
    comprehension takes apart is known outside it by the container."""
    parsed = syntax_tree(path)
    if parsed is None or not isinstance(name, ast.Name):
        return None
    place = (name.lineno, name.col_offset)
    for node in ast.walk(parsed[0]):
        if not isinstance(node, _COMPREHENSIONS) or not (
                (node.lineno, node.col_offset) <= place
                <= (node.end_lineno or 0, node.end_col_offset or 0)):
            continue
        for gen in node.generators:
            if any(isinstance(t, ast.Name) and t.id == name.id for t in ast.walk(gen.target)):
                found = gen.iter
                if isinstance(found, ast.Call) and not found.args and isinstance(
                        found.func, ast.Attribute) and found.func.attr in ("items", "values"):
                    found = found.func.value
                return found
    return None


def loaded_from(path: str, name: str) -> list[tuple[int, str]]:
    """The lines of the file that set the network ``name``'s weights from another's state,
    ``name.load_state_dict(other.state_dict())``, each with the text of ``other``."""
    parsed = syntax_tree(path)
    if parsed is None:
        return []
    tree, text = parsed
    found = []
    for node in ast.walk(tree):
        into = _receiver(node, "load_state_dict")
        if into is not None and node.args and segment(text, into) == name and \
                (other := _receiver(node.args[0], "state_dict")) is not None:
            found.append((node.lineno, segment(text, other)))
    return sorted(found)


def unread_cut(path: str, line: int) -> tuple[ast.stmt, str, str | None] | None:
    """The statement at ``line`` when the ``.detach()`` it makes is read by nothing: a
    statement of its own (``x.detach()``, the result dropped), or an assignment to a loop's
    own variable that no later statement of the loop's body, and nothing after the loop, reads
    (``for f in features: f = f.detach()``: the next pass rebinds it, the list is untouched).
    With it the text that makes the cut take effect where it is plain to write (``x =
    x.detach()``; ``features = [f.detach() for f in features]`` for a loop that does nothing
    else), else ``None``; ``None`` for any other statement."""
    parsed = syntax_tree(path)
    found = statement_at(path, line)
    if parsed is None or found is None:
        return None
    tree, text = parsed
    st = found[0]

    def detach_of(node: ast.AST) -> ast.expr | None:
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            return _receiver(node, "detach")
        return None

    if isinstance(st, ast.Expr) and (value := detach_of(st.value)) is not None:
        return st, text, (f"{segment(text, value)} = {segment(text, st.value)}"
                          if isinstance(value, ast.Name | ast.Attribute) else None)
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)):
        return None
    cut = detach_of(st.value)
    if cut is None:
        return None
    name = st.targets[0].id
    loop = next((n for n in ast.walk(tree) if isinstance(n, ast.For) and st in n.body
                 and isinstance(n.target, ast.Name) and n.target.id == name), None)
    if loop is None:
        return None
    after = loop.body[loop.body.index(st) + 1:]
    scope = next((n for n in ast.walk(tree)
                  if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.lineno <= loop.lineno <= (n.end_lineno or n.lineno)), tree)
    later = [n for n in ast.walk(scope) if isinstance(n, ast.stmt)
             and n.lineno > (loop.end_lineno or loop.lineno)]
    if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
           for part in [*after, *later] for n in ast.walk(part)):
        return None
    plain = (loop.body == [st] and not loop.orelse and isinstance(loop.iter, ast.Name)
             and isinstance(cut, ast.Name) and cut.id == name)
    return loop, text, (f"{segment(text, loop.iter)} = [{name}.detach() for {name} in "
                        f"{segment(text, loop.iter)}]" if plain else None)


def step_left_out(path: str, line: int, name: str) -> int | None:
    """The line after which ``name.step()`` belongs, when the ``backward()`` at ``line`` is a
    statement of a block that clears ``name`` (``name.zero_grad()``) before it and never steps
    it: the last ``X.step()`` statement of another optimizer after the backward in that block,
    else the backward's own line. ``None`` for any other block."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed

    def call_on(st: ast.stmt, method: str) -> str | None:
        on = _receiver(st.value, method) if isinstance(st, ast.Expr) else None
        return segment(text, on) if on is not None else None

    for body in blocks(tree):
        at = next((i for i, st in enumerate(body) if st.lineno <= line <=
                   (st.end_lineno or st.lineno) and call_on(st, "backward") is not None), None)
        if at is None:
            continue
        if not any(call_on(st, "zero_grad") == name for st in body[:at]) or \
                any(call_on(st, "step") == name for st in body):
            return None
        steps = [st for st in body[at + 1:] if call_on(st, "step") not in (None, name)]
        return (steps[-1].end_lineno or steps[-1].lineno) if steps else \
            (body[at].end_lineno or body[at].lineno)
    return None


def steps_after(path: str, line: int, name: str) -> int | None:
    """The line after which ``name.step()`` belongs, when the ``backward()`` at ``line`` is a
    statement whose block steps other optimizers right after it (``optimizer_f.step()``)
    and not ``name``: the line where the last of those steps starts. ``None`` for any other
    block."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed

    def stepped(st: ast.stmt) -> str | None:
        on = _receiver(st.value, "step") if isinstance(st, ast.Expr) else None
        return segment(text, on) if on is not None else None

    for body in blocks(tree):
        at = next((i for i, st in enumerate(body) if st.lineno <= line <=
                   (st.end_lineno or st.lineno) and isinstance(st, ast.Expr)
                   and _receiver(st.value, "backward") is not None), None)
        if at is None:
            continue
        steps = list(itertools.takewhile(lambda st: stepped(st) is not None, body[at + 1:]))
        if not steps or any(stepped(st) == name for st in steps):
            return None
        return steps[-1].lineno
    return None


def first_statement(path: str, line: int) -> int | None:
    """The line of the first statement of the function defined on ``line`` that is not its
    docstring, a ``global`` or a ``nonlocal``; ``None`` where no function is defined there."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    fn = next((n for n in ast.walk(parsed[0]) if isinstance(
        n, ast.FunctionDef | ast.AsyncFunctionDef) and (n.lineno == line or any(
            d.lineno == line for d in n.decorator_list))), None)
    body = [st for st in fn.body if not isinstance(st, ast.Global | ast.Nonlocal) and not (
        isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
        and isinstance(st.value.value, str))] if fn is not None else []
    return body[0].lineno if body else None


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


@functools.lru_cache(maxsize=16)
def _lines_of(text: str) -> list[str]:
    """``text``'s lines, ends kept, split as :func:`ast.get_source_segment` splits them."""
    return split_lines(text)


def segment(text: str, node: ast.AST) -> str:
    """The source of ``node`` in ``text``, as :func:`ast.get_source_segment` gives it, from
    lines split once per text: that function splits the whole text in Python on every call
    (about 1.5 ms for a 120-line script), and the watch reads several segments a step."""
    end, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    start, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
    if end is None or end_col is None or start is None or col is None:
        return ""
    lines = _lines_of(text)
    if end > len(lines):
        return ""
    if start == end:   # offsets count UTF-8 bytes, as the parser's do
        return lines[start - 1].encode()[col:end_col].decode()
    first = lines[start - 1].encode()[col:].decode()
    last = lines[end - 1].encode()[:end_col].decode()
    return "".join([first, *lines[start:end - 1], last])


def line_named(path: str, line: int) -> str:
    """``train.py:42``: a line of the user's file as the report names it."""
    return f"{os.path.basename(path)}:{line}"


def indent_of(text: str, line: int) -> str:
    """The indentation of ``line`` of ``text``."""
    src = split_lines(text)[line - 1].rstrip("\r\n")
    return src[:len(src) - len(src.lstrip())]


#: the context managers that cut what their block computes: ``torch.no_grad()`` and
#: ``torch.inference_mode()`` (with no argument: ``inference_mode(False)`` cuts nothing)
_CUTTING = frozenset({"no_grad", "inference_mode"})


def _is_no_grad(item: ast.withitem) -> bool:
    """Whether ``item`` is ``torch.no_grad()`` or ``torch.inference_mode()``."""
    call = item.context_expr
    if not isinstance(call, ast.Call) or call.args or call.keywords:
        return False
    return _cutting_name(call.func)


def _cutting_name(func: ast.expr) -> bool:
    """Whether ``func`` names ``no_grad`` or ``inference_mode`` (``torch.no_grad``)."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _CUTTING


def no_grad_decorator(tree: ast.Module, line: int) -> ast.expr | None:
    """The ``@torch.no_grad()`` (``@torch.inference_mode()``, either called or not) of the
    innermost function whose body holds ``line``, or ``None``."""
    functions = [node for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                 and node.body[0].lineno <= line <= (node.end_lineno or node.lineno)]
    if not functions:
        return None
    innermost = max(functions, key=lambda f: f.lineno)
    return next((d for d in innermost.decorator_list
                 if _cutting_name(d) or (isinstance(d, ast.Call) and not d.args
                                         and not d.keywords and _cutting_name(d.func))),
                None)


def blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of statements in ``tree`` (a body, an ``else``, a ``finally``), outermost
    first."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def loop_beside(path: str, line: int, sibling: int) -> int | None:
    """The first line of the outermost loop (``for``, ``while``) that holds ``line`` inside a
    statement of the block that holds the statement starting on ``sibling`` (a backward() in
    a loop over micro-batches, beside the step after it); ``None`` where ``line`` is in that
    block itself, or in no loop of it."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    for block in blocks(parsed[0]):
        if any(stmt.lineno == sibling for stmt in block):
            holder = next((stmt for stmt in block
                           if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)), None)
            if holder is None or holder.lineno == line:
                return None
            loops = [n for n in ast.walk(holder)
                     if isinstance(n, ast.For | ast.AsyncFor | ast.While)
                     and n.lineno < line <= (n.end_lineno or n.lineno)]
            return min((n.lineno for n in loops), default=None)
    return None


def outside_loop_of(path: str, line: int, inner: int) -> bool:
    """Whether ``line`` of ``path`` is a statement of the function (or the module) that holds
    ``inner`` outside the innermost loop (``for``, ``while``) that holds ``inner``: made before
    a training loop, or between its epochs, and read by every step of the loop (a memory bank
    made once). ``False`` where no loop holds ``inner``, or ``line`` is in another function (a
    helper the loop calls)."""
    parsed = syntax_tree(path)
    if parsed is None:
        return False

    def around(at: int, kinds: tuple[type, ...]) -> ast.AST | None:
        return _innermost(parsed[0], at,
                          lambda n: n.lineno + 1 if isinstance(n, kinds) else None)

    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    if around(line, functions) is not around(inner, functions):
        return False
    loop = loop_around(path, inner)
    return loop is not None and not loop[0] <= line <= loop[1]


def loop_around(path: str, line: int) -> tuple[int, int] | None:
    """The lines (its header's to its end) of the innermost loop (``for``, ``while``) whose
    body holds ``line`` in the file at ``path``; ``None`` where no loop does, or the source
    cannot be read."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    loop = _innermost(parsed[0], line, lambda n: n.lineno + 1
                      if isinstance(n, ast.For | ast.AsyncFor | ast.While) else None)
    return None if loop is None else (loop.lineno, loop.end_lineno or loop.lineno)


def no_grad_block(tree: ast.Module, line: int) -> ast.With | None:
    """The innermost ``with torch.no_grad():`` (or ``torch.inference_mode()``) whose body
    holds ``line``, or ``None``."""
    found = _innermost(tree, line, lambda n: n.body[0].lineno if isinstance(n, ast.With)
                       and any(_is_no_grad(i) for i in n.items) else None)
    return found if isinstance(found, ast.With) else None


def _root_name(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (``self`` for ``self.encoder.body``)."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def switched_branch(path: str, line: int) -> int | None:
    """Where ``line``, an assignment under ``with torch.no_grad():``, lies in one branch of an
    ``if`` whose other branch assigns the same names from a call of the same callable outside
    any such block, the line of that assignment: a value the script computes with or without a
    graph by a setting (fairseq's ``Wav2Vec2Model.forward``: ``if self.feature_grad_mult > 0:
    features = self.feature_extractor(source)``, ``else:`` the same line under ``no_grad``).
    ``None`` otherwise. Callables are the script's own (a network, a method), not a library's
    function or a builtin (``int``, ``F.relu``)."""
    found = syntax_tree(path)
    if found is None:
        return None
    tree, text = found
    block = no_grad_block(tree, line)
    if block is None:
        return None
    library = set(dir(builtins)) | {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                                    if isinstance(n, ast.Import | ast.ImportFrom)
                                    for a in n.names}

    def made(st: ast.stmt) -> tuple[str, set[str]] | None:
        """An assignment's targets, and the script's callables its value calls."""
        if not isinstance(st, ast.Assign):
            return None
        calls = {segment(text, c.func) for c in ast.walk(st.value) if isinstance(c, ast.Call)
                 and _root_name(c.func) not in library}
        return (" ".join(segment(text, t) for t in st.targets), calls) if calls else None

    cut = [m for st in block.body if st.lineno <= line <= (st.end_lineno or st.lineno)
           if (m := made(st)) is not None]
    if not cut:
        return None

    def span(body: list[ast.stmt]) -> tuple[int, int]:
        return body[0].lineno, body[-1].end_lineno or body[-1].lineno

    around = [(n, n.orelse if span(n.body)[0] <= block.lineno <= span(n.body)[1] else n.body)
              for n in ast.walk(tree) if isinstance(n, ast.If) and n.orelse and any(
                  span(b)[0] <= block.lineno <= span(b)[1] for b in (n.body, n.orelse))]
    if not around:
        return None
    _, other = max(around, key=lambda pair: pair[0].lineno)
    return next((st.lineno for top in other for st in ast.walk(top)
                 if isinstance(st, ast.stmt) and (m := made(st)) is not None
                 and any(m[0] == names and m[1] & calls for names, calls in cut)
                 and no_grad_block(tree, st.lineno) is None), None)


def _innermost(tree: ast.AST, line: int, start: Callable[[ast.AST], int | None]
               ) -> ast.AST | None:
    """The innermost node of ``tree`` (the last to start) whose lines from ``start(node)``
    (``None``: a node of another kind) to its end hold ``line``: the body of a block, a loop
    or a function after its header."""
    held = [n for n in ast.walk(tree) if (first := start(n)) is not None
            and first <= line <= (getattr(n, "end_lineno", None) or first)]
    return max(held, key=lambda n: getattr(n, "lineno", 0), default=None)


def params_in_scope(built: tuple[str, tuple[int, int, int, int] | None], line: int
                    ) -> str | None:
    """The tensors an optimizer was built over, as its call at ``built`` (path, span) wrote
    them (``actor.parameters()``, ``params``, ``[w, b]``), where code at ``line`` of the same
    file can name them: one function's body (or the module's) holds both lines. ``None`` for
    param groups (a list of dicts), for an optimizer made in another function, or where the
    call cannot be read."""
    path, span = built
    found = _optimizer_params(path, span)
    if found is None:
        return None
    call, text, arg, tree = found
    if arg is None or isinstance(arg, ast.Starred | ast.Dict) or (
            isinstance(arg, ast.List | ast.Tuple)
            and any(isinstance(e, ast.Dict) for e in arg.elts)):
        return None

    def scope(at: int) -> ast.AST | None:
        return _innermost(tree, at, lambda n: n.body[0].lineno if isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef) else None)

    return segment(text, arg) if scope(call.lineno) is scope(line) else None


def block_body(path: str, line: int) -> list[int]:
    """The first lines of the statements in the body of the cutting ``with`` block that starts
    on ``line`` (``with torch.no_grad():``); empty where no such block starts there."""
    parsed = syntax_tree(path)
    if parsed is None:
        return []
    block = next((node for node in ast.walk(parsed[0]) if isinstance(node, ast.With)
                  and node.lineno == line and any(_is_no_grad(i) for i in node.items)), None)
    return [st.lineno for st in block.body] if block is not None else []


def _block_around(path: str, line: int) -> tuple[ast.With, str] | None:
    """The innermost cutting ``with`` block of ``path`` around ``line``, and the file's text."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    block = no_grad_block(parsed[0], line)
    return (block, parsed[1]) if block is not None else None


def cutting_call(path: str, line: int) -> str | None:
    """``torch.no_grad()`` or ``torch.inference_mode()`` as the script spells it, of the
    innermost such ``with`` block around ``line``; ``None`` outside one."""
    found = _block_around(path, line)
    if found is None:
        return None
    block, text = found
    item = next(i for i in block.items if _is_no_grad(i))
    return segment(text, item.context_expr) or None


def no_grad_block_names(path: str, line: int) -> set[str] | None:
    """The names the statements of the innermost ``with torch.no_grad():`` around ``line``
    assign (what the block makes for the code after it), or ``None`` outside such a block."""
    found = _block_around(path, line)
    if found is None:
        return None
    return {t.id for st in ast.walk(found[0]) if isinstance(st, ast.Assign | ast.AugAssign)
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


def _optimizer_params(path: str, span: tuple[int, int, int, int] | None
                      ) -> tuple[ast.Call, str, ast.expr | None, ast.Module] | None:
    """The optimizer's call at ``span``, its file's text, the argument it takes its tensors by
    (the first, or ``params=``; ``None`` where there is none) and the file's tree."""
    found = call_at(path, span)
    parsed = syntax_tree(path)
    if found is None or parsed is None:
        return None
    call, text = found
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "params"), None)
    return call, text, arg, parsed[0]


def arguments_made_at(path: str, span: tuple[int, int, int, int] | None) -> tuple[int, ...]:
    """The lines of the statements that last assigned, before the call at ``span``, the plain
    names the call takes its tensors by: its first argument (``params = [*a.parameters()]``
    before ``SGD(params, lr=0.1)``), or the ``"params"`` of each group of a list it takes
    (``Adam([{"params": decay}, {"params": no_decay}])``, each list built by a filter over
    ``named_parameters()``), each in the call's own function (or at the module's top level),
    in the order the call names them; none where no such name or statement is there."""
    found = _optimizer_params(path, span)
    if found is None:
        return ()
    call, _, first, tree = found
    if first is None:
        return ()
    values = [first] if not isinstance(first, ast.List | ast.Tuple) else [
        value for group in first.elts if isinstance(group, ast.Dict)
        for key, value in zip(group.keys, group.values, strict=True)
        if isinstance(key, ast.Constant) and key.value == "params"]
    names = [v.id for v in values if isinstance(v, ast.Name)]
    # and the names a group's list is computed from, where a statement listing a network's
    # tensors made them (``named = [(n, p) for n, p in lm.named_parameters() ...]`` before
    # ``{"params": [p for n, p in named if "bias" not in n]}``)
    inner = [n.id for v in values if not isinstance(v, ast.Name) for n in ast.walk(v)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    made = _assigned_before(tree, call, {*names, *inner})
    lines = [made[n].lineno for n in names if n in made] + [
        made[n].lineno for n in inner if n in made and any(_parameters_calls(made[n]))]
    return tuple(dict.fromkeys(lines))


def _parameters_calls(node: ast.AST) -> Iterator[ast.Call]:
    """The ``parameters()`` and ``named_parameters()`` calls inside ``node``."""
    return (c for c in ast.walk(node) if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr in ("parameters", "named_parameters"))


def _assigned_before(tree: ast.Module, call: ast.Call, names: set[str]) -> dict[str, ast.stmt]:
    """Of ``names``, each one's last assignment before ``call``, in the call's own function
    (or at the module's top level)."""
    if not names:
        return {}
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.lineno < call.lineno <= (node.end_lineno or node.lineno) and \
                node.lineno > getattr(scope, "lineno", 0):
            scope = node
    best: dict[str, ast.stmt] = {}
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue   # a scope of its own
        if isinstance(node, ast.Assign | ast.AnnAssign) and \
                (node.end_lineno or node.lineno) < call.lineno:
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name) and t.id in names and \
                        node.lineno > getattr(best.get(t.id), "lineno", 0):
                    best[t.id] = node
        todo.extend(ast.iter_child_nodes(node))
    return best


def parameters_read(path: str, span: tuple[int, int, int, int] | None) -> list[ast.expr]:
    """The networks the optimizer's call at ``span`` reads its tensors from: the receivers of
    the ``parameters()`` and ``named_parameters()`` calls in the argument it takes them by,
    and in the statements that last assigned the names that argument reads (``named =
    [(n, p) for n, p in lm.named_parameters() if p.requires_grad]`` before
    ``AdamW([{"params": [p for n, p in named if "bias" not in n]}, ...])``)."""
    found = _optimizer_params(path, span)
    if found is None or found[2] is None:
        return []
    call, _, first, tree = found
    read = {n.id for n in ast.walk(first) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    return [c.func.value  # type: ignore[attr-defined]
            for where in [first, *_assigned_before(tree, call, read).values()]
            for c in _parameters_calls(where)]


def listed_groups(path: str, span: tuple[int, int, int, int] | None) -> set[int]:
    """The indices of the parameter groups the optimizer's call at ``span`` names tensor by
    tensor (``Adam([w, b])``, or ``{"params": [esn.reservoir.log_input_scale, ...]}``): a
    list or tuple of names and attributes, no call or unpacking among them."""
    found = _optimizer_params(path, span)
    if found is None or not isinstance(found[2], ast.List | ast.Tuple):
        return set()

    def one_by_one(node: ast.expr) -> bool:
        return isinstance(node, ast.List | ast.Tuple) and bool(node.elts) and all(
            isinstance(e, ast.Name | ast.Attribute) for e in node.elts)

    first = found[2]
    if not any(isinstance(e, ast.Dict) for e in first.elts):
        return {0} if one_by_one(first) else set()
    return {g for g, group in enumerate(first.elts) if isinstance(group, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "params" and one_by_one(v)
        for k, v in zip(group.keys, group.values, strict=True))}


#: the calls a loop walks a model's tensors or modules with: its variables are no progress of
#: the run (``for name, p in model.named_parameters():``)
_WALKS = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                    "named_children", "buffers", "named_buffers"})

#: statements that leave a block: an ``if`` ending in one guards what follows it
_LEAVES = (ast.Return, ast.Continue, ast.Break, ast.Raise)


def _chain(path: str, line: int) -> list[ast.stmt] | None:
    """The statements from the module down to the innermost one that starts on ``line``."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    chain: list[ast.stmt] = []
    node: ast.AST = parsed[0]
    while True:
        inner = next((c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)
                      and c.lineno <= line <= (c.end_lineno or c.lineno)), None)
        if inner is None:
            break
        chain.append(inner)
        node = inner
    return chain if chain and chain[-1].lineno == line else None


def _read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _walks(loop: ast.AST) -> bool:
    return isinstance(loop, ast.For | ast.AsyncFor) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _WALKS
        for n in ast.walk(loop.iter))


def _progress(loop: ast.stmt) -> set[str]:
    """The names a loop of the run binds: its variables and what its body assigns, but not the
    variables of a walk over a model's tensors inside it."""
    bound = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    walked = {n.id for w in ast.walk(loop) if w is not loop and _walks(w)
              for n in ast.walk(w.target) if isinstance(n, ast.Name)}   # type: ignore[attr-defined]
    return bound - walked


def _guarding(chain: list[ast.stmt], start: int) -> list[ast.If]:
    """The ``if`` statements of ``chain`` below ``start`` that the last statement runs under:
    those around it, and the guard clauses before it in each block on the way (``if epoch >=
    n: return``), innermost first."""
    found: list[ast.If] = []
    for i in range(max(start, 0) + 1, len(chain)):
        parent, child = chain[i - 1], chain[i]
        if i < len(chain) - 1 and isinstance(child, ast.If):
            found.append(child)
        block = next((b for b in (getattr(parent, f, None) for f in ("body", "orelse"))
                      if isinstance(b, list) and any(c is child for c in b)), [])
        for sibling in block:
            if sibling is child:
                break
            if isinstance(sibling, ast.If) and sibling.body and \
                    isinstance(sibling.body[-1], _LEAVES):
                found.append(sibling)
    return found[::-1]


def progress_conditions(stack: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The conditions on the run's progress that the statement at the top of ``stack`` (the
    user's frames, innermost first, as ``(file, line)``) runs under: ``if`` statements around it
    or guarding it (a clause that returns), innermost first, whose test reads a variable of a
    loop of the run or a name that loop assigns (``if iteration < warmup:``), or a parameter of
    a helper that its caller passes such a name (``cancel(epoch, model)``). Not a test of a
    flag set before the loop (``if args.freeze:``), nor one of a walk over a model's tensors
    (``if "prototypes" in name:``), nor an ``if`` around the whole loop."""
    found: list[tuple[str, int]] = []
    passed = False   # whether the outer frame's statement passes the progress to this frame
    for path, line in reversed(stack):
        chain = _chain(path, line)
        if chain is None:
            passed = False
            continue
        scope = max((i for i, n in enumerate(chain[:-1]) if isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef)), default=-1)
        progress: set[str] = set()
        if scope >= 0 and passed:
            args = chain[scope].args  # type: ignore[attr-defined]
            progress |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        loops = [i for i, n in enumerate(chain[:-1]) if i > scope
                 and isinstance(n, ast.For | ast.AsyncFor | ast.While) and not _walks(n)]
        for i in loops:
            progress |= _progress(chain[i])
        start = scope if scope >= 0 else (loops[0] if loops else len(chain))
        found = [(path, c.lineno) for c in _guarding(chain, start)
                 if _read(c.test) & progress] + found
        passed = bool(_read(chain[-1]) & progress)
    return found


def statement_text(path: str, line: int) -> str:
    """The text of the statement that starts on ``line`` (its first line)."""
    found = statement_at(path, line)
    return segment(found[1], found[0]).splitlines()[0] if found else ""


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


def assignment_of(path: str, value: ast.expr) -> ast.Assign | None:
    """The assignment statement to one target whose whole value is ``value`` (a node of the
    file's syntax tree), or ``None``."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    return next((st for st in ast.walk(parsed[0]) if isinstance(st, ast.Assign)
                 and st.value is value and len(st.targets) == 1), None)


def bound_whole(path: str, span: tuple[int, int, int, int] | None) -> str | None:
    """The one plain name a statement binds the expression at ``span`` to, whole
    (``guess = sharpened / sharpened.sum(1)``); ``None`` where the expression is part of a
    value (``torch.stack(v).min(0)`` of ``torch.stack(v).min(0).values``) or is bound to
    several names or none."""
    found = expression_at(path, span)
    st = assignment_of(path, found[0]) if found is not None else None
    return st.targets[0].id if st is not None and isinstance(st.targets[0], ast.Name) else None


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


def made_trainable(node: ast.expr) -> ast.expr | None:
    """The tensor ``node`` makes require grad in place, ``x`` of ``x.requires_grad_()`` or
    ``x.requires_grad_(True)``; ``None`` for any other expression."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "requires_grad_" and not node.keywords and (
                not node.args or (isinstance(node.args[0], ast.Constant)
                                  and node.args[0].value is True)):
        return node.func.value
    return None


def receiver(path: str, span: tuple[int, int, int, int] | None,
             name: str | None = None) -> str | None:
    """The optimizer's expression in the call at ``span``: ``opt`` of ``opt.step()`` (and of
    ``opt.step(closure)``, where ``name``, the optimizer's own name, says so), or the one
    argument of ``scaler.step(opt)``."""
    found = call_at(path, span)
    if found is None:
        return None
    call, text = found
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "step"):
        return None
    if name is not None and segment(text, call.func.value) == name:
        return name
    if len(call.args) == 1 and not call.keywords:
        return segment(text, call.args[0])
    return segment(text, call.func.value) if not call.args else None


def freezes(node: ast.AST, text: str, name: str) -> bool:
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


def switch_of(node: ast.AST, text: str) -> tuple[str, bool] | None:
    """``(name, on)`` for a statement that switches a network's gradients on or off:
    ``name.requires_grad_(on)`` (no argument: on), or ``for p in name.parameters():`` over
    ``p.requires_grad = on`` (``p.requires_grad_(on)``); ``None`` for any other statement."""
    def flag(st: ast.AST, var: str | None) -> tuple[str, bool] | None:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and var is not None:
            t = st.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" and \
                    segment(text, t.value) == var and isinstance(st.value, ast.Constant) and \
                    isinstance(st.value.value, bool):
                return var, st.value.value
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            call, f = st.value, st.value.func
            if not isinstance(f, ast.Attribute) or f.attr != "requires_grad_" or call.keywords:
                return None
            owner = segment(text, f.value)
            if var is not None and owner != var:
                return None
            if not call.args:
                return owner, True
            if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and \
                    isinstance(call.args[0].value, bool):
                return owner, call.args[0].value
        return None

    if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
            isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) and \
            node.iter.func.attr == "parameters" and len(node.body) == 1:
        found = flag(node.body[0], node.target.id)
        return None if found is None else (segment(text, node.iter.func.value), found[1])
    return flag(node, None)


def attribute_path(path: str) -> str:
    """A dotted module path as Python reads it after a name: ``blocks.0.gamma_1`` ->
    ``.blocks[0].gamma_1`` (a numbered child indexed), ``""`` for the module itself."""
    return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path.split(".") if p)
