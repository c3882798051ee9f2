"""Edits that switch gradients back on where a script switched them off for too long, in the
user's plain PyTorch: a statement taken out of ``with torch.no_grad():``, an ``@torch.no_grad()``
taken off, ``requires_grad_(True)`` where a frozen network trains again (at the top of the loop
that freezes it, before a phase, with the rest of its block, after the step or the call the freeze
was for)."""

from __future__ import annotations

import ast

from toolkit.audit.edit import Edit
from toolkit.audit.files import split_lines
from toolkit.audit.fixes.script_edits import edit_at
from toolkit.audit.record.syntax import (
    blocks,
    freezes,
    indent_of,
    no_grad_block,
    no_grad_decorator,
    segment,
    switch_of,
    syntax_tree,
)

__all__ = ["freeze_removed", "off_decorator", "out_of_no_grad", "switch_on_after_its_step",
           "switch_on_after_its_use", "switch_on_before_loop", "switch_on_with_the_rest",
           "unfreeze_before"]


def out_of_no_grad(path: str, line: int) -> tuple[int, list[Edit]] | None:
    """The statement on ``line`` taken out of the innermost ``with torch.no_grad():`` around it:
    the line of the statement of the block that holds it, and the edits. The block's last
    statement is moved after the block, its first before the ``with`` (dedented: either runs
    where it ran, only with gradients on); a block of one statement loses its ``with``.
    ``None`` when ``line`` is in no such block, or the statement is neither its first nor its
    last. Where a statement after it in the block makes, from what it assigns, a value the
    code after the block reads (GRU-D's decay, then the imputation made from it), that would
    cut it again: the block loses its ``with`` whole, and the line is the ``with``'s."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree, text = parsed
    best = no_grad_block(tree, line)
    if best is None or len(best.items) != 1:
        return None
    holder = next((st for st in best.body
                   if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
    if holder is None:
        return None
    lines = split_lines(text)
    if _read_after(tree, best, holder):
        return _unwrapped(path, text, lines, best)
    if holder not in (best.body[0], best.body[-1]):
        return None
    end = holder.end_lineno or holder.lineno
    last = holder is best.body[-1]
    if last and (best.end_lineno or best.lineno) != end:
        return None   # a comment or a continuation after it, inside the block
    dedented = _dedented(text, lines, holder, end, best)
    if dedented is None:
        return None
    if len(best.body) == 1:   # the block is this statement: the with goes
        return holder.lineno, [edit_at(path, (best.lineno, 0), (end + 1, 0), dedented)]
    if last:
        return holder.lineno, [edit_at(path, (holder.lineno, 0), (end + 1, 0), dedented)]
    return holder.lineno, [edit_at(path, (best.lineno, 0), (best.lineno, 0), dedented),
                           edit_at(path, (holder.lineno, 0), (end + 1, 0), "")]


def _read_after(tree: ast.Module, block: ast.With, holder: ast.stmt) -> bool:
    """Whether a statement of ``block`` after ``holder`` makes a new value (a plain name
    assigned) from a name ``holder`` assigns, which the code after the block reads: the
    forward goes on from it (GRU-D's imputation, made from the decay). A statistic written in
    place from it (``second_moment += features.t() @ features``) is what the block is for."""
    def names(st: ast.stmt) -> set[str]:
        targets = st.targets if isinstance(st, ast.Assign) else []
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}

    made = names(holder) if isinstance(holder, ast.Assign) else set()
    end = block.end_lineno or block.lineno
    # in the function that holds the block (or the module)
    scope = max((f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                 and f.lineno < block.lineno <= (f.end_lineno or f.lineno)),
                key=lambda f: f.lineno, default=tree)
    later = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load) and n.lineno > end}
    return any(isinstance(st, ast.Assign) and names(st) & later and any(
        isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in made
        for n in ast.walk(st.value)) for st in block.body[block.body.index(holder) + 1:])


def _unwrapped(path: str, text: str, lines: list[str], block: ast.With
               ) -> tuple[int, list[Edit]] | None:
    """The ``with`` of ``block`` taken away, its body dedented in place."""
    first, end = block.body[0], block.body[-1].end_lineno or block.body[-1].lineno
    if (block.end_lineno or block.lineno) != end or first.lineno == block.lineno:
        return None   # a comment or a continuation after it, or a body on the with's line
    dedented = _dedented(text, lines, first, end, block)
    if dedented is None:
        return None
    return block.lineno, [edit_at(path, (block.lineno, 0), (end + 1, 0), dedented)]


def _dedented(text: str, lines: list[str], first: ast.stmt, end: int, block: ast.With
              ) -> str | None:
    """The lines from ``first``'s to ``end`` at ``block``'s indentation; ``None`` where
    ``first`` does not start its line, or a line is indented less than the shift."""
    if first.col_offset != len(indent_of(text, first.lineno)):
        return None
    shift = first.col_offset - block.col_offset
    body = lines[first.lineno - 1:end]
    if any(x.strip() and len(x) - len(x.lstrip()) < shift for x in body):
        return None
    return "".join(x[shift:] if x.strip() else x for x in body)


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
    statement holding ``line``, so that every pass switches it back on before it trains. Where
    that statement is the step itself (SAGAN's ``d_optimizer.step()`` in the loop's body,
    after the backward() that should have trained them), at the top of the loop's body: the
    network's forward for its own loss comes earlier in the pass."""
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
        if holder.lineno == line:
            holder = loop.body[0]
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


def freeze_removed(path: str, line: int) -> Edit | None:
    """For the freeze on ``line`` (:func:`_freeze_at`) that runs once (in no loop) and that no
    later statement of its block undoes: the freeze taken away (``pass`` where it is its
    block's only statement). A phase that freezes a network its optimizer still holds, and
    never switches it back on (Deep Sets' feature extractor, frozen before the phase that
    trains the whole model), was meant to train it. ``None`` where another statement shares
    its lines."""
    found = _freeze_at(path, line)
    if found is None:
        return None
    text, block, at, name = found
    stmt = block[at]
    tree = syntax_tree(path)
    loops = [] if tree is None else [n for n in ast.walk(tree[0])
                                     if isinstance(n, ast.For | ast.AsyncFor | ast.While)]
    if any(loop.lineno <= stmt.lineno <= (loop.end_lineno or loop.lineno)
           and loop is not stmt for loop in loops):
        return None   # frozen at each pass: for another network's loss, undone elsewhere
    if any((on := switch_of(later, text)) is not None and on[1] and on[0] == name
           for later in block[at + 1:]):
        return None
    indent = indent_of(text, stmt.lineno)
    end = stmt.end_lineno or stmt.lineno
    rest = split_lines(text)[end - 1].encode()[stmt.end_col_offset or 0:].decode().strip()
    if stmt.col_offset != len(indent) or (rest and not rest.startswith("#")):
        return None   # another statement on its lines
    return edit_at(path, (stmt.lineno, 0), (end + 1, 0),
                   f"{indent}pass\n" if len(block) == 1 else "")
