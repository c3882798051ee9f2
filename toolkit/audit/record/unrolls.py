"""An iteration written twice: a loop, and right after it the same pass again (once more, or
as another loop with the same body), the state each pass hands on flowing from the first part
into the second.

Written so, the split means something only when the two parts differ in what they pass
backwards: the published forms cut the state the earlier part hands on (``z = f(z, x)
.detach()``, that part under ``torch.no_grad()``, or ``z = z.detach()`` between the parts) and
backpropagate through the repeated pass alone, or the last few. The repetition is the loop's
statements again, a loop of the same body, or (a body of one statement) the value it assigns,
assigned or returned (``return self.iteration(slots, k, v)``). That is the Jacobian-free
gradient of an implicit layer (Fung et al., "JFB: Jacobian-Free Backpropagation for Implicit
Networks", AAAI 2022; the phantom gradient of Geng et al., NeurIPS 2021), a deep equilibrium
model's warm-started solve, and the truncated hypergradient of an unrolled optimisation
(Shaban et al., "Truncated Back-propagation for Bilevel Optimization", AISTATS 2019,
Algorithm 1). With the two parts
written alike, nothing is cut, and the loss trains through every pass: the split was meant,
the cut was lost.

The earlier part may also be a loop that only advances the state ahead of a loop whose passes
begin with the same pass (R2D2's burn-in), guarded by an ``if`` or not, or a call of a function
of the file that loops (a solver, an unroll); the later part may hand the state on through
another statement, when the run shows one network computing both parts. A loop whose passes
make more than the state (their own loss terms) is no earlier part: there the parts differ on
purpose.

Read from the syntax alone (:func:`unrolls_in`, :func:`unroll_at`); whether the loss reaches
the earlier part's graph is the rule's question (:mod:`toolkit.audit.rules.unrolled`), which
also reads where a loop hands an estimate on to its next pass (:func:`handed_on`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from toolkit.audit.record.syntax import indent_of, made_trainable, segment, syntax_tree

__all__ = ["HandOn", "Unroll", "handed_on", "unroll_at", "unrolls_in"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True)
class Unroll:
    """A part of a block that runs a pass many times (``first`` to ``last``: a loop's body, or
    the statement that calls a function of the file that loops), and the statement right after
    it (``again`` to ``again_last``, indented by ``indent``) that runs the pass again.
    ``repeated``: the syntax shows the same pass (the loop's statements again, a loop whose
    body begins with them, the value they assign, or the same function called again); else the
    later statement only reads and assigns the same state, and the run must show that the
    same network computes both. ``state``: the name each pass assigns and reads again;
    ``at``: the line of the earlier part's statement that assigns it; ``leaf``: the state was
    made, before that part, a tensor that requires grad by itself (``torch.zeros(...,
    requires_grad=True)``: an unrolled optimisation differentiates each pass with respect to
    it), so that its cut must hand on one too; ``start``: the expression the state held before
    that part, where it is a name, an attribute or an item (read again without running
    anything), else ``None``."""

    path: str
    first: int
    last: int
    again: int
    again_last: int
    indent: str
    state: str
    at: int
    leaf: bool
    start: str | None
    repeated: bool = True

    def holds(self, line: int) -> bool:
        """Whether ``line`` runs in the earlier part."""
        return self.first <= line <= self.last

    def repeats_at(self, line: int) -> bool:
        """Whether ``line`` runs in the later part."""
        return self.again <= line <= self.again_last


def unroll_at(path: str, line: int) -> Unroll | None:
    """The iteration written twice whose earlier part holds ``line`` of the file at ``path``,
    or ``None``."""
    for unroll in unrolls_in(path):
        if unroll.holds(line):
            return unroll
    return None


_found: dict[int, tuple[ast.Module, tuple[Unroll, ...]]] = {}


def unrolls_in(path: str) -> tuple[Unroll, ...]:
    """Every split of the file at ``path`` (read once per text)."""
    parsed = syntax_tree(path)
    if parsed is None:
        return ()
    tree, text = parsed
    cached = _found.get(id(tree))
    if cached is not None and cached[0] is tree:
        return cached[1]
    looping = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               and any(isinstance(n, _LOOPS) for n in ast.walk(f))}
    found = []
    for block in _blocks(tree):
        for k in range(len(block)):
            unroll = _split(path, block, k, text, looping)
            if unroll is not None:
                found.append(unroll)
    _found[id(tree)] = (tree, tuple(found))
    return tuple(found)


def _blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the tree (a body, an ``else``, a handler's body)."""
    out = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                out.append(value)
    return out


def _same(a: list[ast.stmt], b: list[ast.stmt]) -> bool:
    return len(a) == len(b) and all(ast.dump(x) == ast.dump(y) for x, y in zip(a, b))


def _split(path: str, block: list[ast.stmt], k: int, text: str,
           looping: set[str]) -> Unroll | None:
    """The split whose earlier part is ``block[k]``: a loop (or an ``if`` that guards one
    alone, a burn-in that may be empty), or ``N = f(N, ...)`` where ``f`` is a function of the
    file that loops (``looping``: their names)."""
    part = block[k]
    if k + 1 == len(block):
        return None
    after = block[k + 1]
    if isinstance(part, ast.If) and not part.orelse and len(part.body) == 1:
        part = part.body[0]
    if isinstance(part, _LOOPS) and not part.orelse:
        body = part.body
        assigned = _assignments(body)
        read = {n.id for st in body for n in ast.walk(st)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        chained = [(name, st) for name, st in assigned if name in read
                   and _passed(st.value, name)]
        if not chained:
            return None
        state, statement = chained[-1]
        if not _advances_alone(body, state, block[k + 1:]):
            return None   # the part's passes make more than the state: their own terms
        repeated = _repeats(body, block[k + 1:], statement)
        first, last = body[0].lineno, body[-1].end_lineno or body[-1].lineno
    else:
        call = _looping_call(part, looping)
        if call is None:
            return None
        state, statement = call
        repeated = _looping_call(after, {_callee(statement)}) == (state, after) and \
            _passed(statement.value, state)
        first = last = part.lineno
    if not repeated and not _hands_on(after, state):
        return None
    start = _start(block[:k], state)
    return Unroll(path, first, last, after.lineno, after.end_lineno or after.lineno,
                  indent_of(text, after.lineno), state, statement.lineno,
                  start is not None and _made_leaf(start),
                  segment(text, start) if start is not None and _plain(start) else None,
                  repeated)


def _callee(st: ast.Assign) -> str:
    func = st.value.func  # type: ignore[attr-defined]
    return func.id if isinstance(func, ast.Name) else ""


def _looping_call(st: ast.stmt, looping: set[str]) -> tuple[str, ast.Assign] | None:
    """``(N, st)`` for ``st`` written ``N = f(...)``, ``f`` one of ``looping``: a state made
    or advanced by a procedure that loops (a solver, an unroll)."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Name) and st.value.func.id in looping):
        return None
    return st.targets[0].id, st


def _advances_alone(body: list[ast.stmt], state: str, rest: list[ast.stmt]) -> bool:
    """Whether a loop's body only advances ``state``: assignments alone (no call made for
    what it does, ``losses.append(...)``), whose other names nothing after the loop reads."""
    if not all(isinstance(st, ast.Assign) for st in body):
        return False
    others = {n.id for st in body for t in st.targets for n in ast.walk(t)  # type: ignore[attr-defined]
              if isinstance(n, ast.Name)} - {state}
    return not any(_reads(st, name) for st in rest for name in others)


def _hands_on(st: ast.stmt, state: str) -> bool:
    """Whether ``st`` (a loop, or a statement) assigns ``state`` from a value that reads it."""
    body = st.body if isinstance(st, _LOOPS) else [st]
    return any(name == state and _passed(value.value, state)
               for name, value in _assignments(body))


def _passed(value: ast.expr, name: str) -> bool:
    """Whether ``value`` hands ``name`` to a call (``layer(z, x)``, ``(1 - t) * z + t *
    layer(z, x)``): a pass applied to the state, not a sum that gathers terms into it
    (``loss = loss + F.mse_loss(...)``)."""
    return any(isinstance(c, ast.Call) and any(
        isinstance(n, ast.Name) and n.id == name
        for a in [*c.args, *(k.value for k in c.keywords)] for n in ast.walk(a))
        for c in ast.walk(value))


def _repeats(body: list[ast.stmt], rest: list[ast.stmt], statement: ast.Assign) -> bool:
    """Whether ``rest`` begins with the pass ``body`` runs: its statements again, a loop whose
    body begins with them (each pass of a loop after a burn-in), or (a body of one statement)
    the value it assigns, assigned or returned."""
    after = rest[0]
    if isinstance(after, _LOOPS) and not after.orelse and _same(body, after.body[:len(body)]):
        return True
    if _same(body, rest[:len(body)]):
        return True
    value = getattr(after, "value", None)
    return len(body) == 1 and isinstance(after, (ast.Assign, ast.Return, ast.Expr)) \
        and value is not None and ast.dump(value) == ast.dump(statement.value)


def _plain(node: ast.expr) -> bool:
    """A name, or attributes and constant items of one (``self.init``, ``slots[0]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _assignments(body: list[ast.stmt]) -> list[tuple[str, ast.Assign]]:
    """``(name, statement)`` for each statement of ``body`` (not nested) that assigns one plain
    name alone."""
    return [(st.targets[0].id, st) for st in body
            if isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)]


def _start(before: list[ast.stmt], state: str) -> ast.expr | None:
    """The value the last statement of ``before`` that assigns ``state`` gives it."""
    return next((st.value for name, st in reversed(_assignments(before)) if name == state), None)


def _made_leaf(value: ast.expr) -> bool:
    """Whether ``value`` is made to require grad by itself (``requires_grad=True``,
    ``.requires_grad_()``, ``nn.Parameter(...)``)."""
    if made_trainable(value) is not None:
        return True
    if isinstance(value, ast.Call):
        func = value.func
        called = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        return called == "Parameter" or any(
            kw.arg == "requires_grad" and isinstance(kw.value, ast.Constant)
            and kw.value.value is True for kw in value.keywords)
    return False


@dataclass(frozen=True)
class HandOn:
    """Where a loop hands the value made at a line of its body on to its next pass: the
    occurrence of a name (``line``, and its ``span`` as :mod:`ast` counts it) whose cut stops
    the next pass from reading the value's graph while the pass that made it keeps it:
    ``name``, the loop-carried name as written there."""

    line: int
    span: tuple[int, int, int, int]
    name: str


def handed_on(path: str, line: int) -> HandOn | None:
    """Where the loop whose body makes a value at ``line`` (an assignment to one name) hands
    it on to its next pass: the assignment that binds it to a name the body reads before it
    assigns it (``reference = new_reference``: the value there), or, when the value is bound
    to that name by its own statement (``flow = flow + delta``) and read under it after that
    statement too (the loss compares it: ``predictions.append(flow)``), the first read of the
    name in the body (``coords = positions + flow``: the name there); else the value of its
    own statement. ``None`` when no loop-carried name holds it."""
    parsed = syntax_tree(path)
    if parsed is None:
        return None
    tree = parsed[0]
    # the innermost loop whose body holds the line: ast.walk meets an inner loop after the
    # loops around it
    loops = [n for n in ast.walk(tree) if isinstance(n, _LOOPS) and n.body
             and n.body[0].lineno <= line <= (n.body[-1].end_lineno or 0)]
    if not loops:
        return None
    body = loops[-1].body
    made = next((st for st in body if st.lineno <= line <= (st.end_lineno or st.lineno)), None)
    if not (isinstance(made, ast.Assign) and len(made.targets) == 1
            and isinstance(made.targets[0], ast.Name)):
        return None
    carried = _carried(body)
    name = made.targets[0].id
    after = body[body.index(made) + 1:]
    for st in after:   # an alias that hands it on: ``reference = new_reference``
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], ast.Name) and st.targets[0].id in carried and \
                isinstance(st.value, ast.Name) and st.value.id == name:
            return HandOn(st.lineno, _span(st.value), name)
    if name not in carried:
        return None
    if any(_reads(st, name) for st in after):   # compared under the name it is handed on by
        first = next((n for st in body[:body.index(made) + 1] for n in ast.walk(st)
                      if isinstance(n, ast.Name) and n.id == name
                      and isinstance(n.ctx, ast.Load)), None)
        return None if first is None else HandOn(first.lineno, _span(first), name)
    return HandOn(made.lineno, _span(made.value), name)


def _span(node: ast.expr) -> tuple[int, int, int, int]:
    return (node.lineno, node.end_lineno or node.lineno, node.col_offset,
            node.end_col_offset or node.col_offset)


def _reads(st: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in ast.walk(st))


def _carried(body: list[ast.stmt]) -> set[str]:
    """The names a loop's body reads before it assigns them: what each pass hands on."""
    assigned: set[str] = set()
    carried: set[str] = set()
    for st in body:
        value = st.value if isinstance(st, (ast.Assign, ast.AugAssign)) else st
        read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)}
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            read.add(st.target.id)
        carried |= read - assigned
        targets = st.targets if isinstance(st, ast.Assign) else \
            [st.target] if isinstance(st, ast.AugAssign) else []
        assigned |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return carried & assigned
