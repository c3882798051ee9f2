"""What a real backward gives: for each loss, one ``torch.autograd.grad`` of the recorded call.

The graph walk says along which path a gradient would go; what it does reach, and what it leaves
at exactly zero, is read from autograd itself: ``torch.autograd.grad(loss, every leaf reached
and every tensor stepped, allow_unused=True, retain_graph=True)``. Nothing is stepped and no
``.grad`` is written. Each tensor's gradient is kept as one of three words: ``None`` (autograd
gave none), zero (every element exactly ``0``) or nonzero; the gradients themselves are let go.

A stepped tensor whose gradient is ``None`` or zero on the second call is looked at on the first
call too (its graph is still alive): dead means dead on both calls, not a ReLU that happened to
be off for one batch. Where autograd cannot run again (a step that ran ``backward()`` itself and
freed its graph, a tensor modified in place after the loss was computed), the loss has no truth
and the rules fall back to the graph walk.

:func:`zero_points` then says where a reached tensor's gradient becomes exactly zero: one more
backward with hooks on the nodes between the loss and that tensor finds the first node whose
gradient is zero although a gradient arrived at it from a node above it: either two or more
nonzero gradients that cancel there (``a + (b - a)``: a straight-through line that lost its
``detach()``), or one node that receives a gradient and passes zero. :func:`vanishes` says whether that zero
is the operation's own (``grid_sample(mode="nearest")`` to its grid: zero for any values) or
only these values' (a ReLU off for this batch, a weight still at zero).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit.lens.backward_graph import ShortestPaths
from toolkit.lens.graph_walk import closure

__all__ = ["NONZERO", "ZERO", "Truth", "ZeroPoint", "below", "cancelling_operand", "hooked_grad",
           "real_gradients", "vanishes", "zero_points"]

ZERO, NONZERO = "zero", "nonzero"


@dataclass
class Truth:
    """Each loss's real gradients on the recorded call, as words.

    ``second``: loss -> ``{id: None | "zero" | "nonzero"}`` for every leaf reached and every
    tensor stepped; ``first``: the same on the first call, for the stepped tensors that got
    ``None`` or zero on the second; ``failed``: loss -> why autograd could not run (no truth for
    that loss: the rules read the graph walk); ``values``: the second call's gradients of the
    stepped tensors themselves (what an edit run later must leave as they are), let go when
    the audit returns; ``losses``: each loss's value on the second call.
    """

    second: dict[str, dict[int, str | None]] = field(default_factory=dict)
    first: dict[str, dict[int, str | None]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    values: dict[str, dict[int, torch.Tensor | None]] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)

    def known(self, loss: str) -> bool:
        """Whether a real backward of ``loss`` ran."""
        return loss in self.second

    def reaches(self, loss: str, key: int) -> bool:
        """Whether autograd gives tensor ``key`` a gradient from ``loss`` (``None`` is none; an
        exact zero is a gradient backward computes)."""
        return self.second.get(loss, {}).get(key) is not None

    def trains(self, losses: list[str], key: int) -> bool | None:
        """Whether any of ``losses`` gives tensor ``key`` a nonzero gradient on either call;
        ``None`` when that is not known (a loss without truth, a first call not read)."""
        if not all(self.known(loss) for loss in losses):
            return None
        if any(self.second[loss].get(key) == NONZERO for loss in losses):
            return True
        for loss in losses:
            first = self.first.get(loss)
            if first is None or key not in first:
                return None
            if first[key] == NONZERO:
                return True
        return False

    def zero_only(self, losses: list[str], key: int) -> bool:
        """Reached by one of ``losses`` with a gradient that is exactly zero on both calls (not
        ``None``: autograd computed it)."""
        return self.trains(losses, key) is False and any(
            self.second[loss].get(key) == ZERO for loss in losses)


def _word(grad: torch.Tensor | None) -> str | None:
    if grad is None:
        return None
    return NONZERO if bool(grad.count_nonzero()) else ZERO  # one pass, no mask tensor


def _gradients(loss: torch.Tensor, tensors: dict[int, torch.Tensor],
               keep: set[int] | frozenset[int] = frozenset(),
               kept: dict[int, torch.Tensor | None] | None = None) -> dict[int, str | None]:
    """Each tensor's gradient as a word; those of ``keep`` also into ``kept``."""
    inputs = {i: t for i, t in tensors.items() if t.requires_grad}
    words: dict[int, str | None] = dict.fromkeys(tensors)
    if kept is not None:
        kept.update(dict.fromkeys(keep))
    if not inputs or not loss.requires_grad:
        return words
    grads = torch.autograd.grad(loss, list(inputs.values()), allow_unused=True,
                                retain_graph=True)
    for key, grad in zip(inputs, grads):
        words[key] = _word(grad)
        if kept is not None and key in keep:
            kept[key] = grad
    return words


def real_gradients(losses: dict[str, torch.Tensor], first: dict[str, torch.Tensor] | None,
                   searches: dict[str, ShortestPaths],
                   stepped: dict[str, dict[int, torch.Tensor]]) -> Truth:
    """One ``autograd.grad`` per loss of the second call over every leaf its search reached
    and every tensor its optimizer steps; the first call's for the stepped tensors that got
    ``None`` or zero (``first``: the first call's losses by the same names)."""
    truth = Truth()
    with torch.enable_grad():
        for name, loss in losses.items():
            truth.losses[name] = float(loss.detach())
            search = searches[name]
            tensors = {i: search.nodes[key].variable for i, key in search.leaf_node.items()}
            tensors.update(stepped[name])
            try:
                truth.second[name] = _gradients(loss, tensors, set(stepped[name]),
                                                truth.values.setdefault(name, {}))
            except RuntimeError as err:  # a graph freed by the step's own backward, ...
                truth.failed[name] = str(err).splitlines()[0]
                truth.values.pop(name, None)
                continue
            idle = {i: t for i, t in stepped[name].items()
                    if truth.second[name].get(i) != NONZERO}
            if idle and first is not None and name in first:
                try:
                    truth.first[name] = _gradients(first[name], idle)
                except RuntimeError:  # the first call's graph cannot run again: unknown
                    pass
    return truth


@dataclass(frozen=True)
class ZeroPoint:
    """Where a tensor's gradient from one loss becomes exactly zero.

    ``node``: the first node (from the loss) whose incoming gradient is zero; ``kind``:
    ``"cancelled"`` (``givers``: the nodes above it that pass it a nonzero gradient, which sum
    to zero) or ``"zero_derivative"`` (``givers``: the one node above it that
    receives a nonzero gradient and passes it zero).
    """

    kind: str
    node: Any
    givers: tuple[Any, ...]


def below(node: Any) -> list[Any]:
    """Every node of the backward graph below ``node`` (``node`` included)."""
    return closure([node], lambda n: [c for c, _ in n.next_functions if c is not None])


def cancelling_operand(point: ZeroPoint) -> tuple[Any, int | None]:
    """Of gradients that cancel at ``point.node``: the highest node that passes it one (the
    ``+`` of ``a + (b - a)``: the other givers are below it), and the position of that node's
    operand through which the others pass theirs (``b - a``: cut there, ``a + (b -
    a).detach()`` keeps the values and lets ``a``'s gradient back), or ``None``."""
    reach = {id(n): below(n) for n in point.givers}
    top = next((n for n in point.givers
                if all(any(o is x for x in reach[id(n)]) for o in point.givers)),
               point.givers[0])
    others = [n for n in point.givers if n is not top]
    for i, (child, _) in enumerate(top.next_functions):
        if child is None or child is point.node:
            continue
        under = below(child)
        if any(any(o is x for x in under) for o in others) or (
                not others and any(point.node is x for x in under)):
            return top, i
    return top, None


def hooked_grad(loss: torch.Tensor, tensors: dict[int, torch.Tensor],
                handles: list[Any]) -> tuple[torch.Tensor | None, ...] | None:
    """One ``autograd.grad`` of ``loss`` over ``tensors`` (its graph kept, nothing written to
    ``.grad``) while the node hooks ``handles`` are on, each removed after it: the gradients,
    ``None`` where autograd refuses (a graph already freed)."""
    try:
        with torch.enable_grad():
            return torch.autograd.grad(loss, list(tensors.values()), allow_unused=True,
                                       retain_graph=True)
    except RuntimeError:
        return None
    finally:
        for handle in handles:
            handle.remove()


def zero_points(loss: torch.Tensor, search: ShortestPaths, callers: dict[int, list[int]],
                every: set[int], tensors: dict[int, torch.Tensor], leaf_of: dict[int, int]
                ) -> dict[int, ZeroPoint]:
    """The :class:`ZeroPoint` of each tensor's gradient from ``loss`` (``tensors``: by ``id``),
    found by one more backward with hooks on the nodes from which they are reached (``every``:
    those nodes' ids; the hooks are removed after); ``callers``: each node's callers by ``id``
    (the nodes above it); ``leaf_of``: each tensor's node id.

    A node is a zero point when zero gradient arrived at it though a caller received a nonzero
    one; a tensor's is the first such node, breadth first from the loss, among the nodes from
    which it is reached. One pass down the graph in topological order gives every tensor its
    own (linear in the graph, however many tensors it holds)."""
    arrived: dict[int, bool] = {}
    passed: dict[tuple[int, int], bool] = {}
    handles = []

    def nonzero(grads: Any) -> bool:
        return any(g is not None and bool(g.ne(0).any()) for g in grads)

    for key in every:
        node = search.nodes[key]

        def before(grad_outputs: Any, key: int = key) -> None:
            arrived[key] = arrived.get(key, False) or nonzero(grad_outputs)

        def after(grad_inputs: Any, grad_outputs: Any, key: int = key, node: Any = node) -> None:
            for (child, _), grad in zip(node.next_functions, grad_inputs):
                if child is not None and id(child) in every:
                    edge = (key, id(child))
                    passed[edge] = passed.get(edge, False) or nonzero([grad])

        try:
            handles.append(node.register_prehook(before))
            handles.append(node.register_hook(after))
        except (AttributeError, RuntimeError):  # a node that takes no hooks
            continue
    if hooked_grad(loss, tensors, handles) is None:
        return {}
    order = {key: i for i, key in enumerate(search.nodes)}  # breadth first from the loss
    last = len(order)
    above = {k: [c for c in callers.get(k, ()) if c in every] for k in every}
    below: dict[int, list[int]] = {}
    waiting = {k: len(cs) for k, cs in above.items()}
    for k, cs in above.items():
        for c in cs:
            below.setdefault(c, []).append(k)
    # each node's first zero point (by ``order``) among itself and the nodes above it
    best: dict[int, tuple[int, int] | None] = {}
    ready = [k for k, n in waiting.items() if n == 0]
    while ready:
        key = ready.pop()
        mine = None
        if not arrived.get(key, True) and any(arrived.get(c, False) for c in above[key]):
            mine = (order.get(key, last), key)
        for c in above[key]:
            theirs = best.get(c)
            if theirs is not None and (mine is None or theirs < mine):
                mine = theirs
        best[key] = mine
        for child in below.get(key, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    found = {}
    for i in tensors:
        point = best.get(leaf_of[i])
        if point is None:
            continue
        key = point[1]
        up = [c for c in above[key] if arrived.get(c, False)]
        givers = [c for c in up if passed.get((c, key), False)]
        # nonzero gradients in and zero arrived: they cancel (a + (b - a), a - a)
        found[i] = (ZeroPoint("cancelled", search.nodes[key],
                              tuple(search.nodes[c] for c in givers)) if givers else
                    ZeroPoint("zero_derivative", search.nodes[key],
                              tuple(search.nodes[c] for c in up)))
    return found


@functools.cache
def _aten_names() -> dict[str, str]:
    """Each aten operation's name as its backward node spells it (``grid_sampler_2d`` ->
    ``GridSampler2D``, the node ``GridSampler2DBackward0``)."""
    out: dict[str, str] = {}
    for full in torch._C._dispatch_get_all_op_names():
        space, _, name = full.partition("::")
        base = name.partition(".")[0]
        if space == "aten":
            out.setdefault("".join(p.title() for p in base.split("_")), base)
    return out


#: the scales of the random values an operation is probed at
_SCALES = (1.0, 1e-2, 1e2, 1e4)


def vanishes(node: Any, child: Any) -> bool:
    """Whether the derivative that backward node ``node`` passes to its input ``child`` is zero
    for any values, not only for the recorded ones: the aten operation that made ``node`` is
    run again on random inputs of the recorded shapes, at several scales, with its recorded
    non-tensor arguments (a mode, a dimension), and its gradient to that input is exactly zero
    every time. ``False`` whenever the operation cannot be run again from what its node saved
    (ReLU saves its result, not its input: never judged)."""
    match = re.fullmatch(r"(\w+?)Backward\d+", node.name())
    base = _aten_names().get(match.group(1)) if match else None
    packet = getattr(torch.ops.aten, base, None) if base else None
    positions = [i for i, (c, _) in enumerate(node.next_functions) if c is child]
    if packet is None or not positions:
        return False
    gen = torch.Generator().manual_seed(0)
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        names = [a.name for a in schema.arguments]
        tensors = [i for i, a in enumerate(schema.arguments)
                   if str(a.type) in ("Tensor", "Optional[Tensor]")]
        if len(tensors) != len(node.next_functions) or not all(
                hasattr(node, f"_saved_{n}") for n in names):
            continue
        try:
            saved = [getattr(node, f"_saved_{n}") for n in names]
        except RuntimeError:  # freed
            return False
        wrt = [tensors[i] for i in positions]
        if not all(isinstance(saved[i], torch.Tensor) and saved[i].is_floating_point()
                   for i in wrt):
            return False
        try:
            for scale in _SCALES:
                args = list(saved)
                for i in tensors:
                    if isinstance(saved[i], torch.Tensor) and saved[i].is_floating_point():
                        args[i] = (torch.randn(saved[i].shape, generator=gen) * scale).to(
                            saved[i].dtype).requires_grad_(i in wrt)
                with torch.enable_grad():
                    out = getattr(packet, overload)(*args)
                    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                            if isinstance(o, torch.Tensor) and o.requires_grad]
                    if not outs:
                        return False
                    total = sum((o * torch.randn(o.shape, generator=gen).to(o.dtype)).sum()
                                for o in outs)
                    grads = torch.autograd.grad(total, [args[i] for i in wrt],
                                                allow_unused=True)
                if any(g is not None and not bool(g.eq(0).all()) for g in grads):
                    return False
        except (RuntimeError, TypeError, ValueError):  # not runnable so: not judged
            return False
        return True
    return False
