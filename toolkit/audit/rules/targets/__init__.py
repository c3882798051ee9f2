"""Targets computed from the parameters being trained: the TD target, pseudo-label or baseline
that the optimizer's own parameters reach without a cut.

A regression or TD loss compares a prediction with a target; semi-gradient methods treat the
target as a constant (Sutton & Barto 2018, §9.3; Mnih et al. 2015). When both sides of the
comparison reach a tensor the loss's optimizer steps, and the target side passes no cut,
gradient also flows through the target: a double DQN whose target network *is* the policy
network, a target computed from the online network without ``no_grad`` (datawhalechina/easy-rl#117).
The same holds for a soft target or pseudo-label made by the model being trained, and for the
weight of a log-probability (``log π · (R − V)``) when ``V`` is trained by the same optimizer
(astariul/encode-attend-navigate-pytorch#2).

Comparisons are found by structure (issue 62), in the *head* of the loss (reached from the
loss through sums, means, ``+``/``−``, products with constants, negation, square roots and
views only): :mod:`.comparisons` lists the forms. Which factor of a product with a
log-probability is its weight, or the distribution itself (an entropy, no target), is
:mod:`.distributions`'s; two sides that are one network on two inputs, each trained toward the
other on purpose, are :mod:`.mirrors`'.

Of a comparison's two sides, the target is the one that reaches none of the stepped tensors
when the other does, whatever the argument order (``nn.MSELoss()(target, prediction)``); when
both do, the side that adds a reward or a return to a network's output (``r + γ max Q(s')``,
in either order, ``F.mse_loss(td_target, q)`` too), else for ``a - b`` the side computed by
arithmetic, else the loss's own convention. A loss that also pushes pairs of the same tensors
apart (a contrastive loss's ``relu(m - d) ** 2``, Hadsell et al. 2006) trains both sides by
design: none of its comparisons is a target. Nor is a comparison of two mirrored sides, one
network's same operations on two views (VICReg's invariance term, Bardes et al. 2022; the
Pi-model's two stochastic passes, Laine and Aila 2017; W-MSE's whitened embeddings, Ermolov
et al. 2021), where something keeps the pair from collapsing: another term of the loss trains
the same tensors, or a side passes its batch's statistics (a batch normalization, a
whitening). Two outputs of one network only pulled together collapse: that comparison keeps
its target.

Two more forms (issue 53):

- **A target bootstrapped from other rows of the same forward.** When both sides of a
  comparison come from one forward pass, the side computed by arithmetic on *other rows* of
  it (a selection on the way: ``values[1:]``, a bootstrap value ``values[-1]``) is a target:
  V-trace's ``v_s`` built with importance weights from ``values`` (Espeholt et al. 2018, whose
  reference code computes it under ``no_grad``), GAE's returns ``A + V`` from a critic's
  values, a TD target from the next states of one batch. The critic is then trained through
  its own target. A side that is no arithmetic, or reaches the shared forward only without a
  selection, is a centring or a statistic (``(y - y.mean(0)) ** 2``, a total-variation
  ``img[1:] - img[:-1]``), never a target.
- **A symmetric self-distillation loss with no stop-gradient.** A cosine similarity
  (``F.cosine_similarity``, ``nn.CosineSimilarity``, or a product of two ``F.normalize``) in
  the head of the loss, both sides reaching the same stepped tensors: SimSiam's and BYOL's
  ``D(p, z)`` without ``z.detach()`` or a target network, which collapses (Chen & He 2021,
  §4.1). The target is the side the other is computed from (``p = h(z)``), else the second
  argument; each term's cut joins the one fix.

Not recognised: a comparison deeper in the graph than the loss's head (a hand-written
variance), margins and contrastive losses (a similarity matrix through ``matmul``). Residual-
gradient methods want the gradient through the target: ``audit_step(...,
allow_trained_target=True)`` accepts it.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, NamedTuple

from toolkit.audit.findings import TrainedTarget
from toolkit.audit.idiom import toolkit_only
from toolkit.audit.rules.targets.comparisons import (
    COMPARE,
    COSINE,
    EVEN,
    find_forms,
    repelling,
    stepped_below,
)
from toolkit.audit.rules.targets.distributions import (
    LINEAR_IN_LOG,
    PURE_LOG,
    SELECTS,
    beside_the_log,
    log_node,
    same_distribution,
    unselected,
)
from toolkit.audit.rules.targets.mirrors import fed_another, fitted_too, kept_apart, mirrored
from toolkit.audit.rules.wanted import CutAt, Wanted
from toolkit.audit.truth.cuts import target_cut
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS, owners, shape_text
from toolkit.audit.truth.proof import Cut
from toolkit.lens.backward_graph import is_cut_marker, node_label
from toolkit.lens.graph_walk import inputs_of

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["COMPARE", "EVEN", "check", "find_trained_targets", "target_edges"]

_BOOTSTRAP = "a target bootstrapped from other rows of the same forward"


_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Max", "Amax", "Maximum", "Minimum"})


#: what puts rows side by side: a side made of arithmetic rows is arithmetic
_JOINS = frozenset({"Stack", "Cat"})


class _Sides(NamedTuple):
    """One form's target side: ``weight``: it is the weight of a log-probability (a
    score-function term), not one side of a comparison."""

    form: str
    target: Any
    reader: Any
    weight: bool = False


def _sides(graph: Graph, node: Any, form: str, target_index: int | None, stepped: set[int]
           ) -> _Sides | None:
    """``(form, target or weight side, the node that reads it, whether it is the weight of a
    log-probability)`` of one form, or ``None`` when it is no target.

    Of a comparison's two sides, the target is the one that reaches no stepped tensor when the
    other does (``MSELoss()(target, prediction)`` in either order); when both or neither do,
    the loss's own convention decides (``mse_loss(input, target)``; for ``a - b`` the side
    computed by arithmetic on a network's output, ``r + γ max Q(s')``). When both sides come
    from one forward pass, only a side computed by arithmetic on *other rows* of that forward
    (a selection on the way: ``values[1:]``, a bootstrap value ``values[-1]``) is a target:
    V-trace's ``v_s``, GAE's returns, a TD target from the next states of one batch; so is one
    that runs a network of its own on that forward's output (PEARL's target value function of
    the task variable, Rakelly et al. 2019); anything else is a centring or a batch statistic.
    Of a cosine similarity's two sides (SimSiam's
    ``D(p, z)``), the target is the side the other is computed from (``p = h(z)``), else the
    second argument.
    """
    inputs = inputs_of(node)
    if len(inputs) != 2:
        return None
    nodes = graph.search.nodes
    if form == COSINE:
        sides = [inputs_of(n)[0] for n in inputs]
        left, right = (graph.reach([id(n)]) if id(n) in nodes else set() for n in sides)
        reaches = [bool(graph.leaves(side) & stepped) for side in (left, right)]
        if reaches[0] != reaches[1]:
            side = 0 if reaches[1] else 1
        elif reaches[0] and mirrored(sides[0], sides[1], stepped) and \
                kept_apart(graph, node, sides, stepped):
            return None  # one network on two views (W-MSE's whitened embeddings)
        else:
            side = 0 if id(sides[0]) in right and id(sides[1]) not in left else 1
        return _Sides(form, sides[side], inputs[side])
    if form != "product":
        left, right = (graph.reach([id(n)]) if id(n) in nodes else set() for n in inputs)
        forward = {k for k in left & right if getattr(nodes[k], "variable", None) is None}
        if forward:  # one forward gives both sides
            arithmetic = [_arithmetic(n) for n in inputs]
            if arithmetic[0] == arithmetic[1]:
                return None  # a centring, a batch statistic, a difference of rows
            side = arithmetic.index(True)
            # or one that runs a network of its own on it (PEARL's target value function on
            # the task variable both sides read): a bootstrap from that network
            own = graph.leaves((left, right)[side]) - graph.leaves((left, right)[1 - side])
            if not _bootstrapped(inputs[side], forward) and not own:
                return None
            return _Sides(f"{_BOOTSTRAP} ({form})", inputs[side], node)
        reaches = [bool(graph.leaves(side) & stepped) for side in (left, right)]
        if reaches[0] != reaches[1]:
            side = 0 if reaches[1] else 1
        elif reaches[0] and mirrored(inputs[0], inputs[1], stepped) and \
                kept_apart(graph, node, inputs, stepped):
            return None  # one network on two views, each pulled toward the other
        elif target_index is not None and _plus_constant(graph, inputs[1 - target_index],
                                                         stepped) and \
                not _plus_constant(graph, inputs[target_index], stepped):
            side = 1 - target_index   # the arguments swapped: mse_loss(td_target, q)
        elif fed_another(graph, inputs, (left, right), stepped):
            return None   # one network on data and on a generator's output: feature matching
        else:
            side = target_index if target_index is not None else _target_side(inputs)
        return _Sides(form, inputs[side], node)
    logs = [log_node(graph, n) for n in inputs]
    if logs[0] is not None and logs[0] is logs[1]:
        # both sides computed from one log-probability: the weight is the side that is more
        # than a selection or a sum of it (a reward with its KL penalty, ``p = log_p.exp()``)
        pure = [log_node(graph, n, PURE_LOG) is not None for n in inputs]
        if pure[0] != pure[1]:
            logs[pure.index(False)] = None
    if logs[0] is None and logs[1] is None:
        found = _surrogate(graph, inputs)
        return None if found is None else _Sides(*found, node)
    weight = 1 if logs[0] is not None else 0
    log = logs[1 - weight]
    reaches = id(inputs[weight]) in nodes and id(log) in graph.reach([id(inputs[weight])])
    if not (reaches and not unselected(inputs[weight], log)
            and unselected(inputs[1 - weight], log)):
        # (a weight made from other rows of the log-probability, below, is none of these)
        if reaches:
            # p · log p: an entropy, the weight is the distribution itself; but a weight made
            # by arithmetic on the log-probability alone (a reward with a KL penalty, RLOO's
            # ``r - beta * (log_p - ref_log_p)``) is no distribution: it carries its gradient;
            # nor is one made with another network's output beside it (Distral's task policy
            # ``softmax(alpha log pi_0 + beta Q_i)``, Teh et al. 2017, eq. 3, a teacher)
            if log_node(graph, inputs[weight], LINEAR_IN_LOG, 16) is not log and \
                    not beside_the_log(graph, inputs[weight], log):
                return None
        elif same_distribution(log, inputs[weight]):
            return None  # p · log p computed apart (softmax and log_softmax of the same logits)
    if mirrored(_base(inputs[weight]), _base(log), stepped) and \
            kept_apart(graph, node, [inputs[weight], log], stepped) and \
            fitted_too(graph, node, inputs[weight]):
        return None  # TRADES's KL between the predictions at x and at x', both trained
    if id(log) in nodes and not graph.leaves(graph.reach([id(log)])) & stepped:
        # the log-probability trains nothing this loss steps: no score-function term, the
        # weight is what is trained (SAC's temperature: -(log_alpha * (log_pi + H)).mean())
        return None
    return _Sides("a log-probability times a weight that carries gradient", inputs[weight], node,
                  weight=True)


def _past_views(node: Any) -> Any:
    """``node``, or what the views above it (a reshape, a squeeze, a transpose) are views of."""
    while node_label(node) in VIEWS and inputs_of(node):
        node = inputs_of(node)[0]
    return node


def _plus_constant(graph: Graph, node: Any, stepped: set[int]) -> bool:
    """Whether ``node`` (past views) adds to, or takes from, a network's output something that
    trains nothing: a reward, a return (``r + γ max Q(s')``), the bootstrapped side of a
    comparison whichever argument it is."""
    node = _past_views(node)
    if node_label(node) not in ("Add", "Sub"):
        return False
    nodes = graph.search.nodes
    return any(k is None or id(k) not in nodes
               or not graph.leaves(graph.reach([id(k)])) & stepped
               for k, _ in node.next_functions)


def _surrogate(graph: Graph, inputs: list[Any]) -> tuple[str, Any] | None:
    """A product ``x * g`` (or ``torch.dot(x, g)``) in the head of the loss whose factor
    ``g`` is a surrogate gradient the loss means as a constant, ``(form, g)``, or ``None``:

    - ``g`` computed from ``x`` through a difference (score distillation's ``w · (ε̂(x) −
      ε)``, Poole et al. 2022; a residual ``2 (x − y)``);
    - ``g`` computed by another forward of the same tensors, from at least twice as much of
      it as ``x`` (the two share no node): a gradient cached from a first pass, kept with its
      graph (Gao et al. 2021, GradCache, which caches it without one).

    A factor computed from the other by arithmetic alone (``x * (A @ x)``, a quadratic form;
    ``x * x.sigmoid()``), two factors of one forward (a gate times an expert's output), or two
    alike (``z1 · z2``) compare nothing: no target.
    """
    nodes = graph.search.nodes
    reach = [graph.reach([id(n)]) if id(n) in nodes else set() for n in inputs]
    for side in (0, 1):
        other = inputs[1 - side]
        if id(other) not in reach[side] or id(inputs[side]) in reach[1 - side]:
            continue
        between = reach[side] - graph.reach([id(other)])
        if any(node_label(nodes[k]) in ("Sub", "Rsub") for k in between if k in nodes):
            return "a product with a surrogate gradient computed from the other factor", \
                inputs[side]
    inner = [{k for k in r if getattr(nodes[k], "variable", None) is None} for r in reach]
    if inner[0] & inner[1] or not graph.leaves(reach[0]) & graph.leaves(reach[1]):
        return None  # one forward, or no stepped tensor in common
    for side in (0, 1):
        if len(inner[side]) >= 2 * max(1, len(inner[1 - side])):
            return "a product with a surrogate gradient from another forward", inputs[side]
    return None


def _arithmetic(node: Any) -> bool:
    """Whether ``node`` (past views) is arithmetic: ``r + γ · V(s')``, ``A + V``; or rows
    that each are, stacked or concatenated (returns made one time step at a time in a loop,
    then ``torch.stack``-ed: Retrace's, n-step returns)."""
    node = _past_views(node)
    if node_label(node) in _JOINS:
        rows = inputs_of(node)
        return bool(rows) and all(_arithmetic(row) for row in rows)
    return node_label(node) in _ARITHMETIC


def _bootstrapped(start: Any, forward: set[int]) -> bool:
    """Whether ``start`` reaches a node of the shared forward ``forward`` (node ids) through a
    selection of rows (``values[1:]``, ``values[-1]``, a chunk of the batch): a target
    bootstrapped from other rows, not a statistic of the same ones."""
    queue = deque([(start, False)])
    seen: set[tuple[int, bool]] = set()
    while queue:
        node, selected = queue.popleft()
        if (id(node), selected) in seen:
            continue
        seen.add((id(node), selected))
        if id(node) in forward:
            if selected:
                return True
            continue  # reached the shared forward with no selection: a selection inside it
            # (a generator's own slices) selects no other rows for this side
        below = selected or node_label(node) in SELECTS
        queue.extend((n, below) for n in inputs_of(node) if not is_cut_marker(n))
    return False


def _terms(graph: Graph, stepped: set[int], derived: Collection[int] = frozenset()
           ) -> list[tuple[list[Any], Any, str, int | None, _Sides]]:
    """``(chain, comparison node, form, index of the target input, its sides)`` of each form
    of the loss's head that has a target side, but for the terms of a mutual comparison: two
    terms each of whose target is the other's prediction, up to operations of one input, the
    two predictions one network's passes (:func:`mirrored`: R-Drop's ``KL(p1 || p2) + KL(p2
    || p1)`` of two dropout passes, Wu et al. 2021, eq. 2): each output is trained toward the
    other on purpose, and no side of either is only a target. The same pair of two networks
    is two peers, each the other's teacher (deep mutual learning, Zhang et al. 2018, whose
    student learns from its peer's prediction as a constant): each term keeps its target. A
    target made from the other term's prediction through a network (SimSiam's ``p2 = h(z2)``)
    is no such pair, nor is one term alone.

    A node in ``derived`` (by ``id``) is one autograd made for a derivative the loss reads
    (``torch.autograd.grad(..., create_graph=True)``): that derivative's formula, which reads
    ``(sigmoid(x) - y) * x`` for a cross-entropy's, compares nothing the script wrote."""
    forms = find_forms(graph)
    metric = repelling(graph, forms, stepped)
    out = []
    for chain, node, form, target_index, _ in forms:
        if id(node) in metric or id(node) in derived:
            continue
        found = _sides(graph, node, form, target_index, stepped)
        if found is not None:
            out.append((chain, node, form, target_index, found))
    pairs = [(_base(found.target), _base(_prediction(node, found)))
             for _, node, _, _, found in out]
    mutual = {i for i, (target, prediction) in enumerate(pairs) if prediction is not None
              and any(j != i and pairs[j] == (prediction, target) for j in range(len(pairs)))
              and mirrored(target, prediction, stepped)}
    return [t for i, t in enumerate(out) if i not in mutual]


def _prediction(node: Any, found: _Sides) -> Any:
    """The side of the comparison (or product) ``node`` that is not ``found``'s target: the
    log-probability a soft target weighs (``softmax(t) * log_softmax(p)``, a KL written by
    torch), or ``None``."""
    sides = inputs_of(node)
    if found.form == COSINE:
        sides = [inputs_of(n)[0] for n in sides]
    return next((n for n in sides if n is not found.target), None)


def _base(node: Any) -> Any:
    """``node`` without the operations of one input above what made it (a softmax, its log,
    a temperature, a dropout): the output those are made of."""
    for _ in range(64):
        kids = inputs_of(node) if node is not None else []
        if len(kids) != 1 or getattr(node, "variable", None) is not None:
            break
        node = kids[0]
    return node


def target_edges(graph: Graph, stepped: set[int], derived: Collection[int] = frozenset()
                 ) -> set[tuple[int, int]]:
    """The edges ``(comparison, target side)`` and ``(product, weight of a log-probability)``
    of the loss's head: the paths no stepped tensor should be trained by (``derived``: see
    :func:`_terms`)."""
    return {(id(found.reader), id(found.target))
            for *_, found in _terms(graph, stepped, derived)}


#: a fix's words when one term of several found no cut that keeps the rest trained
_UNCUT = ("another term's target has no cut, with these, that keeps every stepped tensor "
          "trained: cut it where the loss reads it")


def find_trained_targets(step: RecordedStep, loss: str) -> list[Wanted[TrainedTarget]]:
    """The trained targets of one loss (see the module's docstring), each with the proved cut
    that removes it (:func:`toolkit.audit.truth.cuts.target_cut`) when one is found: the
    finding without edits, wanting that cut written (:class:`~toolkit.audit.rules.wanted.CutAt`,
    one cut per term of the loss)."""
    graph, label, stepped = step.graphs[loss], step.label, set(step.stepped[loss])
    names = label.rec.names
    merged: dict[tuple[str, tuple[str, ...]], TrainedTarget] = {}
    terms: dict[tuple[str, tuple[str, ...]], list[Any]] = {}  # each term's cut, as its sites
    by_target: dict[tuple[int, tuple[str, ...]], tuple[str, tuple[str, ...]]] = {}
    taken = Cut()  # the cuts chosen for this loss's targets so far, proved together
    for chain, node, _, _, found in _terms(graph, stepped, label.rec.derivatives):
        form, target, reader, weight = found
        if weight:
            shared, _ = stepped_below(graph, target, stepped)
        else:
            left, right = (stepped_below(graph, n, stepped)[0] for n in inputs_of(node))
            shared = left & right
        if not shared:
            continue
        what, shape = label.tensor(target, node)
        params = tuple(sorted(names.tensors.get(i, f"<tensor {i}>") for i in shared))
        # one target read by several terms (a Huber written by hand reads ``a - b`` in two
        # branches) or several terms of one form: one finding
        key = by_target.setdefault((id(target), params), (form, params))
        cut = target_cut(step, step.prover, loss, reader, target, shared, taken)
        taken = taken if cut is None else taken | cut
        terms.setdefault(key, []).append(None if cut is None else cut.sites)
        if key in merged:  # another term of the same form: its cut joins the fix
            before = merged[key]
            lines = before.lines if cut is None else tuple(
                dict.fromkeys((*before.lines, *cut.lines)))
            more = [] if cut is None else [t for t in cut.texts if t not in before.fix]
            fix = before.fix if not more else before.fix.replace(
                " (behind it:", f"; and {'; and '.join(more)} (behind it:", 1)
            if cut is None and _UNCUT not in fix:
                fix = fix.replace(" (behind it:", f"; {_UNCUT} (behind it:", 1)
            merged[key] = dataclasses.replace(before, terms=before.terms + 1, lines=lines,
                                              fix=fix)
            continue
        behind = owners(list(params))
        if cut is None:
            fix = (f"cut the target ({what}{shape_text(shape)}, where {label(node)} reads it; "
                   f"behind it: {behind}); no single cut at a line of the step's code was "
                   "proved to keep every stepped tensor trained, so cut it where it is "
                   "computed, under torch.no_grad() or with .detach()")
        else:
            fix = f"cut the target: {cut.texts[0]} (behind it: {behind}): {cut.options}"
        if form == COSINE:
            fix += ("; with no stop-gradient on either side the two views can agree by "
                    "collapsing to a constant (SimSiam, Chen & He 2021, §4.1)")
        elif form.startswith(_BOOTSTRAP):
            fix += ("; a critic trained through its own target also moves the target "
                    "(V-trace and GAE returns are constants of the value loss: compute them "
                    "under torch.no_grad())")
        fix += toolkit_only("; if the gradient through it is meant (residual gradient), audit "
                            "with allow_trained_target=True")
        merged[key] = TrainedTarget(
            loss=loss, optimizer=step.optimizer_of[loss], form=form,
            target=f"{what}{shape_text(shape)}", parameters=params,
            path=tuple(label(n) for n in [*chain, *([reader] if reader is not node else []),
                                          target]), fix=fix,
            lines=() if cut is None else cut.lines)
    return [Wanted(found, CutAt(tuple(terms[key]))) for key, found in merged.items()]


def _target_side(inputs: list[Any]) -> int:
    """Of the two sides of ``a - b``, in either order: the one computed by arithmetic on a
    network's output (``r + γ · max Q(s')``, not the reduction ``max Q(s)`` itself; or rows
    of such arithmetic written in place, returns filled one step at a time, ``returns[t] =
    r[t] + γ · running``), else the second."""
    first, second = (_computed(n) for n in inputs)
    return 0 if first and not second else 1


def _computed(node: Any) -> bool:
    """Whether ``node`` (past views) is arithmetic, or a tensor whose last rows written in
    place are (see :func:`_target_side`)."""
    node = _past_views(node)
    if node_label(node) == "CopySlices" and inputs_of(node):
        node = _past_views(inputs_of(node)[-1])
    return node_label(node) in ("Add", "Sub", "Mul", "Maximum", "Minimum")


def check(step: RecordedStep) -> Found:
    """The rule: each loss's trained targets (none when ``allow_trained_target=True``)."""
    if step.allow_trained_target:
        return {}
    return {"targets": [t for name in step.graphs for t in find_trained_targets(step, name)]}
