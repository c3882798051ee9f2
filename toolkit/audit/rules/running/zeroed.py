"""Reached, and given exact zeros: a stepped tensor that a loss's graph reaches and whose
gradient is exactly zero, because the gradients that reach it cancel (``w + (q(w) - w)``, a
straight-through line without its cut) or because an operation on the way passes zero for
any values (``torch.sign``, ``torch.round``): the step audit's principle
(:func:`~toolkit.audit.truth.truth.zero_points`, :func:`~toolkit.audit.truth.truth.vanishes`),
read on a running script.

The watch finds it in two passes. At a step, a stepped tensor this iteration's losses reached
whose ``.grad`` is exactly zero is a suspect (one sync for all of them), remembered with the
``backward()`` that reached it. Only then does the next audited forward run under
:class:`MadeAt`, which keeps the user's line that made each node; at that ``backward()`` one
more hooked backward says where the gradient became zero (:func:`explain`). A zero that holds
only for some values (a ReLU on its flat side) is gone on the second pass: no finding."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from toolkit.audit.edit import Edit
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site, site_of, user_frame
from toolkit.audit.record.source import operands
from toolkit.audit.record.tensors import nonzero
from toolkit.audit.rules.dead import ZERO_DERIVATIVE
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.audit.truth.truth import (
    ZeroPoint,
    below,
    cancelling_operand,
    hooked_grad,
    vanishes,
    zero_points,
)
from toolkit.lens.backward_graph import ShortestPaths

__all__ = ["MadeAt", "Zeroed", "explain", "zero_gradients"]


def zero_gradients(tensors: Sequence[torch.Tensor]) -> list[bool]:
    """For each tensor, whether its ``.grad`` is there and exactly zero (on the CPU, each read
    by :func:`~toolkit.audit.record.tensors.nonzero`; elsewhere one sync for all)."""
    grads = [t.grad for t in tensors]
    if all(g is None or g.device.type == "cpu" for g in grads):
        return [g is not None and bool(g.numel()) and not nonzero(g) for g in grads]
    present = [g for g in grads if g is not None and g.numel()]
    if not present:
        return [False] * len(grads)
    largest = torch.stack([n.float() for n in torch._foreach_norm(present, float("inf"))])
    zero = iter(largest.eq(0).tolist())
    return [bool(next(zero)) if g is not None and g.numel() else False for g in grads]


class MadeAt(TorchFunctionMode):
    """While entered: the user's line (the innermost user frame, with the span of the
    expression it runs) of each operation whose output has a graph, by its node; and the
    nodes of the tensors the outermost call that returned it read, in the order torch
    received them (a list argument's items in its place: ``torch.cat([a, b])``)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[Any, Site]] = {}
        self.read: dict[int, tuple[Any, ...]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        node = getattr(out, "grad_fn", None) if isinstance(out, torch.Tensor) else None
        if node is None and isinstance(out, tuple | list):
            node = next((t.grad_fn for t in out if isinstance(t, torch.Tensor)
                         and t.grad_fn is not None), None)
        if node is not None and id(node) not in self.made:
            frame = user_frame(0)
            if frame is not None:
                self.made[id(node)] = (node, site_of(frame))
        if node is not None and self.made.get(id(node), (None,))[0] is node:
            # an outer call (F.mse_loss) returns after the calls inside it: its arguments win
            flat = [x for a in args for x in (a if isinstance(a, tuple | list) else (a,))]
            self.read[id(node)] = tuple(x.grad_fn if isinstance(x, torch.Tensor) else None
                                        for x in flat)
        return out

    def site(self, node: Any) -> Site | None:
        entry = self.made.get(id(node))
        return entry[1] if entry is not None and entry[0] is node else None

    def operands(self, node: Any) -> tuple[Any, ...]:
        """The nodes of what the call that made ``node`` read (``None`` for a value with no
        graph), as :meth:`site` knows it; empty when not recorded."""
        return self.read.get(id(node), ()) if self.site(node) is not None else ()


@dataclass
class Zeroed:
    """Where the gradient of ``tensors`` (by ``id``) became exactly zero: ``kind``
    (``"cancelled"`` or ``"zero_derivative"``), the user's line ``site``, the operation's words
    ``what``, and the edit that passes the gradient straight through there."""

    kind: str
    tensors: list[int]
    site: Site | None
    what: str
    edits: tuple[Edit, ...]


def explain(fixes: FixWriter, loss: torch.Tensor, tensors: dict[int, torch.Tensor],
            made: MadeAt) -> list[Zeroed]:
    """One hooked backward of ``loss`` (its graph kept) over ``tensors``: for each, the
    :class:`~toolkit.audit.truth.truth.ZeroPoint` where its gradient became zero, when the
    gradients cancel there or an operation passes zero for any values (run again at random
    inputs); grouped by the line that made it."""
    search = ShortestPaths([loss])
    graph = StepGraph(search)
    mine = {i: t for i, t in tensors.items() if i in search.leaf_node}
    if not mine:
        return []
    leaf_of = {i: search.leaf_node[i] for i in mine}
    # first where each tensor's own gradients meet (the nodes that read it): a cancellation
    # there is the cause, whatever else passes zero above (the rounding whose gradient the
    # cut line would have passed straight through)
    points = _cancelled_at_leaves(loss, search, graph, mine, leaf_of)
    rest = {i: t for i, t in mine.items()
            if i not in points or points[i].kind != "cancelled"}
    if rest:
        every = graph.useful({leaf_of[i] for i in rest}, set(search.nodes))
        points.update(zero_points(loss, search, graph.callers, every, rest,
                                  {i: leaf_of[i] for i in rest}))
    found: dict[tuple, Zeroed] = {}
    for i in mine:
        point = points.get(i)
        if point is None:
            continue
        if point.kind == "cancelled":
            if not _nested(point):
                continue   # parallel reads that cancel: the loss does not depend on it
            site, what, edits = _cancellation(fixes, point, made)
        elif point.givers and all(type(n).__name__ in ZERO_DERIVATIVE or vanishes(n, point.node)
                                  for n in point.givers):
            site, what, edits = _vanishing(fixes, point, made)
        else:
            continue   # zero for these values only (a ReLU or a clamp on its flat side)
        key = (point.kind, site, what)
        if key not in found:
            found[key] = Zeroed(point.kind, [], site, what, edits)
        found[key].tensors.append(i)
    return list(found.values())


def _cancelled_at_leaves(loss: torch.Tensor, search: ShortestPaths, graph: StepGraph,
                         tensors: dict[int, torch.Tensor], leaf_of: dict[int, int]
                         ) -> dict[int, ZeroPoint]:
    """Each tensor whose gradient is exactly zero though a node reading it passes it a
    nonzero one (found by one hooked ``autograd.grad``, which runs no ``AccumulateGrad``: the
    nodes that read the tensors are hooked): the gradients cancel at the tensor itself."""
    passed: set[tuple[int, int]] = set()
    handles = []
    for key in {c for k in leaf_of.values() for c in graph.callers.get(k, ())}:
        node = search.nodes[key]

        def after(grad_inputs: Any, grad_outputs: Any, key: int = key, node: Any = node) -> None:
            for (child, _), grad in zip(node.next_functions, grad_inputs):
                if child is not None and grad is not None and bool(grad.ne(0).any()):
                    passed.add((key, id(child)))

        try:
            handles.append(node.register_hook(after))
        except (AttributeError, RuntimeError):
            continue
    grads = hooked_grad(loss, tensors, handles)
    if grads is None:
        return {}
    found = {}
    for i, grad in zip(tensors, grads):
        if grad is None or bool(grad.ne(0).any()):
            continue
        leaf = leaf_of[i]
        givers = [search.nodes[c] for c in graph.callers.get(leaf, ()) if (c, leaf) in passed]
        if givers:
            found[i] = ZeroPoint("cancelled", search.nodes[leaf], tuple(givers))
    return found


def _nested(point: ZeroPoint) -> bool:
    """Whether one of the givers of a cancellation reaches all the others (the ``+`` of ``a +
    (b - a)``: the value taken away inside the expression that adds it back, a
    straight-through line without its cut). Parallel reads that cancel (a bias under a
    difference of two calls of one layer) leave the loss independent of the tensor: no cut
    to write, and nothing to train."""
    if len(point.givers) < 2:
        return False
    reach = {id(n): below(n) for n in point.givers}
    return any(all(o is n or any(o is x for x in reach[id(n)]) for o in point.givers)
               for n in point.givers)


def _cancellation(fixes: FixWriter, point: ZeroPoint, made: MadeAt
                  ) -> tuple[Site | None, str, tuple[Edit, ...]]:
    """The highest node that passes the zero point a gradient (the ``+`` of ``a + (b - a)``),
    its line, and the cut of its operand through which the others pass theirs."""
    top, position = cancelling_operand(point)
    site = made.site(top)
    if site is None or position is None:
        return site, _CANCELLED, ()
    made_at = _bound_once(site.path, site.span, position)
    if made_at is not None:   # a name bound just for this read: cut where it is made
        edit = fixes.detach_expression(site.path, made_at)
        if edit is not None:
            return Site(site.path, made_at[0], made_at), _CANCELLED, (edit,)
    edit = cut_operand(fixes, site.path, site.span, position)
    return site, _CANCELLED, (edit,) if edit is not None else ()


_CANCELLED = "the gradients that reach them there cancel exactly (a + (b - a) without its cut)"


def _bound_once(path: str, span: tuple[int, int, int, int] | None, position: int
                ) -> tuple[int, int, int, int] | None:
    """Where the value of operand ``position`` of the operation at ``span`` is made, when the
    operand is a name an assignment of the same block binds before it (``target = x -
    dm_grad``) and this is that binding's one read: the span of the assigned value."""
    found = _expression_at(path, span)
    ops = operands(found[0]) if found is not None else []
    if position >= len(ops) or not isinstance(ops[position], ast.Name):
        return None
    name, read = ops[position].id, ops[position]
    parsed = S.syntax_tree(path)
    if parsed is None:
        return None
    for block in S.blocks(parsed[0]):
        at = next((i for i, st in enumerate(block) if st.lineno <= read.lineno
                   <= (st.end_lineno or st.lineno)), None)
        if at is None or not isinstance(block[at], ast.Assign | ast.AugAssign
                                        | ast.AnnAssign | ast.Expr | ast.Return):
            continue   # not the innermost block that holds the read
        binding = next((st for st in reversed(block[:at]) if isinstance(st, ast.Assign)
                        and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                        and st.targets[0].id == name), None)
        if binding is None:
            return None
        reads = [n for st in block[block.index(binding) + 1:]
                 for n in ast.walk(st) if isinstance(n, ast.Name) and n.id == name]
        if reads != [read]:
            return None
        value = binding.value
        return (value.lineno, value.end_lineno or value.lineno, value.col_offset,
                value.end_col_offset or 0)
    return None


def _vanishing(fixes: FixWriter, point: ZeroPoint, made: MadeAt
               ) -> tuple[Site | None, str, tuple[Edit, ...]]:
    """The operation that passes zero for any values, its line, and its straight-through
    form."""
    node = point.givers[0]
    site = made.site(node)
    edit = straight_through(fixes, site.path, site.span) if site is not None else None
    name = node.name().removesuffix("0").removesuffix("Backward")
    what = f"{name}'s derivative is zero for any values (run again at random inputs)"
    return site, what, (edit,) if edit is not None else ()


# --- the edits ------------------------------------------------------------------------------

def _expression_at(path: str, span: tuple[int, int, int, int] | None
                   ) -> tuple[ast.expr, str] | None:
    parsed = S.syntax_tree(path) if span else None
    if parsed is None or span is None:
        return None
    tree, text = parsed
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and (node.lineno, node.end_lineno, node.col_offset,
                                           node.end_col_offset) == span:
            return node, text
    return None


def _simple(node: ast.expr) -> bool:
    return isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call)


def cut_operand(fixes: FixWriter, path: str, span: tuple[int, int, int, int] | None,
                position: int) -> Edit | None:
    """Operand ``position`` of the operation at ``span`` cut: ``w + (q - w)`` -> ``w + (q -
    w).detach()``."""
    found = _expression_at(path, span)
    if found is None:
        return None
    node, text = found
    ops = operands(node)
    if position >= len(ops):
        return None
    arg = ops[position]
    old = S.segment(text, arg)
    # a parenthesised operand: its parentheses are kept outside the span ast gives
    lines = text.splitlines()
    line = lines[arg.lineno - 1] if arg.lineno - 1 < len(lines) else ""
    start, end = arg.col_offset, arg.end_col_offset or 0
    if arg.lineno == arg.end_lineno and start > 0 and line[start - 1:start] == "(" \
            and line[end:end + 1] == ")":
        start, end, old = start - 1, end + 1, f"({old})"
        new = f"{old}.detach()"
    else:
        new = f"{old}.detach()" if _simple(arg) else f"({old}).detach()"
    return fixes.edit_at(path, (arg.lineno, start), (arg.end_lineno or arg.lineno, end), new)


def straight_through(fixes: FixWriter, path: str,
                     span: tuple[int, int, int, int] | None) -> Edit | None:
    """The zero-derivative call at ``span`` (``torch.sign(w)``) with the identity's gradient:
    ``w + (torch.sign(w) - w).detach()``, when its one operand is a name, an attribute or an
    item (written twice, so read without running anything)."""
    found = _expression_at(path, span)
    if found is None or not isinstance(found[0], ast.Call):
        return None
    call, text = found
    ops = operands(call)
    if len(ops) != 1 or not isinstance(ops[0], ast.Name | ast.Attribute | ast.Subscript):
        return None
    x, op = S.segment(text, ops[0]), S.segment(text, call)
    new = f"{x} + ({op} - {x}).detach()"
    return fixes.edit_at(path, (call.lineno, call.col_offset),
                         (call.end_lineno or call.lineno, call.end_col_offset or 0), new)
