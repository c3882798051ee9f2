"""An iteration written twice: a loop, and right after it the same pass again (once more, or
as another loop with the same body), the state each pass hands on flowing from the first part
into the second.

Written so, the split means something only when the two parts differ in what they pass
backwards: the published forms cut the state the earlier part hands on (``z = f(z, x)
.detach()``, or that part under ``torch.no_grad()``) and backpropagate through the repeated
pass alone, or the last few. That is the Jacobian-free gradient of an implicit layer (Fung et
al., "JFB: Jacobian-Free Backpropagation for Implicit Networks", AAAI 2022; the phantom
gradient of Geng et al., NeurIPS 2021), a deep equilibrium model's warm-started solve, and the
truncated hypergradient of an unrolled optimisation (Shaban et al., "Truncated
Back-propagation for Bilevel Optimization", AISTATS 2019, Algorithm 1). With the two parts
written alike, nothing is cut, and the loss trains through every pass: the split was meant,
the cut was lost.

Read from the syntax alone (:func:`unroll_at`); whether the loss reaches the earlier part's
graph is the rule's question (:mod:`toolkit.audit.rules.unrolled`). A loop followed by
anything other than its own body again (a pass with a loss term more, a pass of another
network) is no split: there the parts differ on purpose.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from toolkit.audit.record.syntax import made_trainable, syntax_tree

__all__ = ["Unroll", "unroll_at"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True)
class Unroll:
    """A loop (``first`` to ``last``: the lines of its body) whose body the statements from
    ``again`` on repeat. ``state``: the name each pass assigns and reads again; ``at``: the
    line of the earlier part's statement that assigns it, and ``value``: the span of the value
    it assigns there (``(line, end line, column, end column)``, as :mod:`ast` counts them);
    ``leaf``: the state was made, before the loop, a tensor that requires grad by itself
    (``torch.zeros(..., requires_grad=True)``: an unrolled optimisation differentiates each
    pass with respect to it), so that its cut must hand on one too."""

    path: str
    first: int
    last: int
    again: int
    state: str
    at: int
    value: tuple[int, int, int, int]
    leaf: bool

    def holds(self, line: int) -> bool:
        """Whether ``line`` runs in the earlier part (the loop's body)."""
        return self.first <= line <= self.last


def unroll_at(path: str, line: int) -> Unroll | None:
    """The iteration written twice whose earlier part holds ``line`` of the file at ``path``,
    or ``None``."""
    for unroll in _unrolls(path):
        if unroll.holds(line):
            return unroll
    return None


_found: dict[int, tuple[ast.Module, tuple[Unroll, ...]]] = {}


def _unrolls(path: str) -> tuple[Unroll, ...]:
    parsed = syntax_tree(path)
    if parsed is None:
        return ()
    tree = parsed[0]
    cached = _found.get(id(tree))
    if cached is not None and cached[0] is tree:
        return cached[1]
    found = []
    for block in _blocks(tree):
        for k, stmt in enumerate(block):
            unroll = _split(path, block, k) if isinstance(stmt, _LOOPS) else None
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


def _split(path: str, block: list[ast.stmt], k: int) -> Unroll | None:
    loop = block[k]
    assert isinstance(loop, _LOOPS)
    body = loop.body
    if loop.orelse or k + 1 == len(block):
        return None
    after = block[k + 1]
    repeated = (isinstance(after, _LOOPS) and not after.orelse and _same(body, after.body)) \
        or _same(body, block[k + 1:k + 1 + len(body)])
    if not repeated:
        return None
    assigned = _assignments(body)
    read = {n.id for st in body for n in ast.walk(st)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    chained = [(name, st) for name, st in assigned if name in read
               and any(isinstance(n, ast.Call) for n in ast.walk(st.value))]
    if not chained:
        return None
    state, statement = chained[-1]
    value = statement.value
    return Unroll(path, body[0].lineno, body[-1].end_lineno or body[-1].lineno, after.lineno,
                  state, statement.lineno,
                  (value.lineno, value.end_lineno or value.lineno, value.col_offset,
                   value.end_col_offset or value.col_offset),
                  _made_leaf(block[:k], state))


def _assignments(body: list[ast.stmt]) -> list[tuple[str, ast.Assign]]:
    """``(name, statement)`` for each statement of ``body`` (not nested) that assigns one plain
    name alone."""
    return [(st.targets[0].id, st) for st in body
            if isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)]


def _made_leaf(before: list[ast.stmt], state: str) -> bool:
    """Whether the last statement of ``before`` that assigns ``state`` makes it require grad
    by itself (``requires_grad=True``, ``.requires_grad_()``, ``nn.Parameter(...)``)."""
    for name, st in reversed(_assignments(before)):
        if name != state:
            continue
        value = st.value
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
    return False
