"""Terms of a loss that are constants: a scalar computed from a gradient that
``torch.autograd.grad`` took without ``create_graph=True``, added to a loss with a graph, or
such values added element for element to values the loss sums as they are.

A gradient penalty (WGAN-GP's, R1's, a Jacobian or input-gradient norm) trains the network
through the gradient it penalises, which therefore needs a graph of its own. Taken without one,
the gradient is a constant, and so is every value computed from it: the penalty is in the
loss's value (printed, logged, apparently minimised) and in none of its gradient, so the network
is trained by the rest of the loss alone.

Only a sum says so: a constant *added* to a loss shifts its value and passes no gradient
(``loss + lam * penalty``). The same constant as a weight (``loss + d_weight * g_loss``,
VQGAN's adaptive weight, detached on purpose) scales a gradient, and a gradient used as an
input (FGSM's ``x + eps * grad.sign()``) is data: neither is a finding. The recording marks
every such scalar and the sum that adds it
(:attr:`~toolkit.audit.record.recording.Recording.first_order_added`); this rule keeps those
in a loss's graph and writes the fix at the ``autograd.grad`` call.

The same holds for a term made only of a trained network's output cut, computed under
``torch.no_grad()`` (``inference_mode``) or ``.detach()``ed, of values computed in such a block
from values with a graph (BEAR's conservative Q term, a critic scoring the actor's actions
under no_grad: the block cuts the actor's path), and of data: a second view's
variance term, a second pass's cross-entropy, a KL of detached statistics
(:attr:`~toolkit.audit.record.recording.Recording.cut_values`, followed through every
operation that keeps no graph, and the sums that add such a value to one with a graph). Only
a sum that adds a term to the loss counts (a node reached from the loss through sums, means,
signs and constant factors alone; for a term added element for element, through no factor: a
KL's fixed side, ``q * (log q - log p)``, compares): a cut value compared (a target),
weighting a term, or scaled by zero is none, nor is a cut value added beside itself with its
graph (a gradient scaled, ``x * s + x.detach() * (1 - s)``). The fix removes every cut the
term is made of, but a cut of a value made by a strict part of what another cut's value is
made by (real images' features beside the generated ones'), and, beside the cut of a network
the loss trains another way, a cut of one it does not (a teacher's output beside the
student's: DKD's non-target term), which are a target's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkit.audit.findings import ConstantTerm
from toolkit.audit.record.calls import Edge
from toolkit.audit.record.source import assigned_from, operand_texts
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS
from toolkit.audit.truth.proof import AssignedAt, DetachedAt, KeywordAt, NoGradAt, ReadAt
from toolkit.lens.backward_graph import ShortestPaths, node_label
from toolkit.lens.graph_walk import inputs_of, walk

if TYPE_CHECKING:
    from toolkit.audit.record.sites import Line
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["SUMMING", "check", "cut_behind", "fix_lines", "uncut"]

_FIX = ("take that gradient with create_graph=True, so that the penalty made from it is "
        "differentiated too (WGAN-GP's and R1's gradient penalties pass it)")


def check(step: RecordedStep) -> Found:
    """The rule: each sum of this call that added a constant made from a first-order gradient
    to a loss's graph, once per ``autograd.grad`` line and loss."""
    rec = step.rec
    found = []
    seen = set()
    elementwise: dict[str, set[int]] = {}
    residuals: dict[str, set[int]] = {}
    for call, taken, added, names, node, scalar in rec.first_order_added:
        if call != rec.call:
            continue
        # what the differentiated values were computed from: what the penalty would train
        edges = [e for c, es, line in rec.first_order_calls
                 if c == call and line == taken for e in es]
        search = ShortestPaths(edges) if edges else None
        for loss, graph in step.graphs.items():
            if (taken, loss) in seen or node not in graph.search.nodes:
                continue
            # added element for element: only where the loss sums the elements as they are,
            # or, for the derivative of what this loss trains, a term of a residual it squares
            summed = scalar or node in elementwise.setdefault(
                loss, _sums_of(graph, scaled=False))
            if not summed and node not in residuals.setdefault(loss, _residuals(graph)):
                continue
            through = () if search is None else tuple(
                rec.names.name(t) for t in step.stepped[loss].values() if search.path_to(t))
            if not summed and not through:
                continue
            seen.add((taken, loss))
            finding = ConstantTerm(loss=loss, tensors=names, through=through, taken=taken,
                                   added=added, fix=_FIX)
            places = () if taken is None else (KeywordAt(taken, "grad", "create_graph", "True"),)
            lines = () if taken is None else (taken,)
            found.append(Wanted(finding, FirstOf((Option(places, _FIX, lines),))))
    return {"constant_terms": [*found, *_cut_terms(step), *_self_terms(step),
                               *_cancelled_terms(step)]}


def _cut_terms(step: RecordedStep) -> list[Wanted[ConstantTerm]]:
    """Each sum of this call that added a scalar made only of trained networks' outputs cut
    (computed under ``torch.no_grad()``, or ``.detach()``ed) and data to a loss's graph: a
    constant term, once per set of cuts and loss. Its fix removes every cut it is made of."""
    rec = step.rec
    found = []
    seen = set()
    heads: dict[tuple[str, bool], set[int]] = {}
    for call, cuts, added, node, scalar, inside in rec.cut_added:
        # a module's own stop-gradient, summed by that module (SuperLoss's regulariser of its
        # confidence) is its method; returned, and added to the loss by the step (a mixture
        # of experts' balancing loss computed under no_grad in its forward), a constant term
        if call != rec.call or (inside and rec.inside_forward(cuts)):
            continue
        for loss, graph in step.graphs.items():
            # a term added element for element is one where the loss sums those elements as
            # they are: scaled by a constant (``q * (log q - log p)``, a KL's fixed side),
            # they are a weighted comparison's
            if (loss, scalar) not in heads:
                heads[loss, scalar] = _sums_of(graph, scaled=scalar)
            key = (tuple((line, line.span if line else None) for line, _, _ in cuts), loss)
            if key in seen or node not in heads[loss, scalar] or \
                    _beside_itself(graph, node, cuts) or \
                    _a_reference(rec, graph, cuts, heads, loss):
                continue
            seen.add(key)
            stepped = step.stepped[loss]
            behind = [cut_behind(cut, stepped) for cut in cuts]
            # a cut of a value made by a strict part of what another cut's value is made by
            # (real images' features beside the generated ones') is a target's: it stays
            kept = [k for k, b in enumerate(behind)
                    if b and not any(b < other for other in behind)]
            # and of a network the loss trains no other way, beside the cut of one it does (a
            # teacher's output beside the student's, DKD's non-target term): the teacher's
            trained = graph.search.leaf_node.keys()
            elsewhere = [k for k in kept if not behind[k].isdisjoint(trained)]
            if elsewhere:
                kept = elsewhere
            cuts = tuple(cuts[k] for k in kept)
            reached = frozenset().union(*(behind[k] for k in kept))
            through = tuple(rec.names.name(t) for i, t in stepped.items() if i in reached)
            if not through:
                continue   # cuts of what no optimizer of this loss steps
            no_grad = all(how == "no_grad" for _, how, _ in cuts)
            leaf = all(how == "leaf" for _, how, _ in cuts)
            fix = ("read those tensors whole (`p`, not `p.data` or `p.detach()`), so that the "
                   "term trains them as the rest of the loss does" if leaf else
                   ("compute those outputs with gradients (the network's call out of its "
                    "torch.no_grad() block, or torch.enable_grad() for the block)" if no_grad
                    else "drop the cuts of those outputs (their .detach(), their no_grad)") + (
                ", so that the term trains the networks as the rest of the loss does"))
            places = uncut(cuts, rec.cut_callers)
            lines = fix_lines(places)
            finding = ConstantTerm(loss=loss, tensors=(), through=through,
                                   taken=cuts[0][0], added=added, fix=fix,
                                   cut="no_grad" if no_grad else "leaf" if leaf
                                   else "detach")
            found.append(Wanted(finding, FirstOf((Option(places, fix, lines),))))
    return found


_SELF_FIX = ("cut the value subtracted or divided by (`.detach()`), as the method's "
             "reference (an old policy's log-probabilities, a running statistic) is a "
             "constant")


def _self_terms(step: RecordedStep) -> list[Wanted[ConstantTerm]]:
    """Each difference of this call of a value from itself with its graph (PPO's and GRPO's
    ratio ``exp(logp - old_logp)`` with ``old_logp = logp``, not ``logp.detach()``), or ratio
    of a value to itself (MINE's ``exp_mean / denominator`` where the moving average starts
    from the batch's own value with its graph), that a loss's graph reaches: zero or one
    whatever the weights, so the terms made of it pass no gradient (the clipped surrogate
    trains nothing). The fix cuts the value subtracted (the divisor), where it was bound to
    the other (``old_logp = logp.detach()``) or where it is read."""
    rec = step.rec
    found = []
    for call, line, node in rec.self_differences:
        if call != rec.call or line is None:
            continue
        for loss, graph in step.graphs.items():
            summed = graph.search.nodes.get(node)
            if summed is None:
                continue
            through = _stepped_below(step, loss, Edge(summed, 0))
            if not through:
                continue
            bound = assigned_from(line, 1)
            place: AssignedAt | ReadAt = AssignedAt(bound) if bound is not None \
                else ReadAt(line, 1)
            at = bound if bound is not None else line
            finding = ConstantTerm(loss=loss, tensors=operand_texts(line), through=through,
                                   taken=at, added=line, fix=_SELF_FIX, cut="self")
            found.append(Wanted(finding, FirstOf((Option((place,), _SELF_FIX, (at,)),))))
            break
    return found


def _stepped_below(step: RecordedStep, loss: str, edge: Edge) -> tuple[str, ...]:
    """The names of the tensors ``loss``'s optimizers step that the graph below ``edge``
    reaches, each once."""
    stepped = step.stepped[loss]
    return tuple(dict.fromkeys(step.rec.names.name(n.variable) for _, n, _, _ in walk([edge])
                               if id(getattr(n, "variable", None)) in stepped))


_CANCEL_FIX = ("cut the difference (`z + (z_q - z).detach()`), as a straight-through "
               "estimator does: the sum keeps its value and passes its gradient to the value "
               "added")


def _cancelled_terms(step: RecordedStep) -> list[Wanted[ConstantTerm]]:
    """Each sum of this call of a value and a difference that subtracts that value again, one
    graph on both sides (``z + (z_q - z)``: VQ-VAE's straight-through estimator without the
    ``.detach()`` of the difference; van den Oord et al. 2017, arXiv:1711.00937), that a
    loss's graph reaches: the value's gradient through the sum is zero, so what it was
    computed by (the encoder) gets none from that loss through it. The fix cuts the
    difference, where the sum reads it."""
    rec = step.rec
    found = []
    for call, line, node, at in rec.cancelled:
        if call != rec.call or line is None:
            continue
        for loss, graph in step.graphs.items():
            summed = graph.search.nodes.get(node)
            if summed is None:
                continue
            through = _stepped_below(step, loss, Edge(*summed.next_functions[1 - at]))
            if not through:
                continue
            texts = operand_texts(line)
            finding = ConstantTerm(loss=loss, tensors=texts, through=through, taken=line,
                                   added=line, fix=_CANCEL_FIX, cut="cancel")
            found.append(Wanted(finding, FirstOf((Option((ReadAt(line, at),), _CANCEL_FIX,
                                                         (line,)),),)))
            break
    return found


#: operations that leave a value itself up to a constant factor, a sign or a view
_SCALINGS = frozenset({"Mul", "Div", "Neg", "Clone"}) | VIEWS


def _beside_itself(graph: Graph, node: int, cuts: tuple[tuple[Line | None, str, Any], ...]
                   ) -> bool:
    """Whether the sum ``node`` adds values ``.detach()``-ed to those same values with their
    graph: ``x * s + x.detach() * (1 - s)``, MuZero's gradient scaling between unroll steps
    (Schrittwieser et al. 2020, its pseudocode's ``scale_gradient``), or a straight-through
    sum, whose cut value is a difference from the live one: ``a + (b - a).detach()``
    (VQ-VAE's quantised codes, van den Oord et al. 2017; GECO's moving average of the
    constraint, Rezende & Viola 2018). The value is the term's, the gradient the live side's,
    by design: no constant term."""
    cut = [origin.grad_fn for _, how, origin in cuts if how == "detach"]
    summed = graph.search.nodes.get(node)
    if summed is None or len(cut) != len(cuts):
        return False
    same: set[int] = set()   # the live operands, and what they are a scaling or view of
    todo = inputs_of(summed)
    while todo:
        n = todo.pop()
        if id(n) in same:
            continue
        same.add(id(n))
        below = [c for c, _ in n.next_functions if c is not None]
        if node_label(n) in _SCALINGS and len(below) == 1:
            todo.extend(below)
    return all(id(o) in same or (node_label(o) in ("Sub", "Rsub") and any(
        id(c) in same for c, _ in o.next_functions)) for o in cut)


def _a_reference(rec: Any, graph: Graph, cuts: tuple[tuple[Line | None, str, Any], ...],
                 heads: dict[tuple[str, bool], set[int]], loss: str) -> bool:
    """Whether ``cuts`` are all of parameters' values (``p.detach()``, ``p.data``) and the
    loss of ``graph`` also reads values cut from those parameters beside values with a graph
    otherwise than by a sum of its terms: a factor, or a difference it goes on to square (a
    closed-form KL to a snapshot of the parameters, ``(m - m_old) ** 2 / (2 * s_old ** 2)``,
    VIME's and VCL's, beside which ``log(s_old)`` is the formula's constant). The snapshot
    is a reference the live parameters are compared with, not a term of its own. ``heads``:
    the summing nodes of each loss, by whether scaled (:func:`_sums_of`), filled as needed."""
    if not all(how == "leaf" for _, how, _ in cuts):
        return False
    mine = {id(p) for _, _, origin in cuts for p in origin}
    nodes = graph.search.nodes
    for call, read, _, _, node in rec.cut_read:
        if call != rec.call or node not in nodes or not any(
                how == "leaf" and any(id(p) in mine for p in origin) for _, how, origin in read):
            continue
        if node_label(nodes[node]) not in ("Add", "Sub", "Rsub"):
            return True
        if (loss, True) not in heads:
            heads[loss, True] = _sums_of(graph, scaled=True)
        if node not in heads[loss, True]:
            return True
    return False


def cut_behind(cut: tuple[Line | None, str, Any], stepped: dict[int, Any] | None = None
               ) -> frozenset[int]:
    """``id`` of the tensors of ``stepped`` (every tensor, when ``None``) a cut value (a
    :attr:`~toolkit.audit.record.recording.Recording.cut_values` cut: where, how, origin) was
    computed by: the network's parameters for an output under ``no_grad``, the leaves below
    the node ``.detach()`` cut, the parameter itself for its values read cut (``"leaf"``:
    ``p.data``, ``p.detach()``)."""
    _, how, origin = cut
    if how != "detach":   # the tensors themselves: a network's under no_grad, a leaf's values
        return frozenset(id(p) for p in origin if stepped is None or id(p) in stepped)
    leaves = (getattr(n, "variable", None) for _, n, _, _ in walk([origin]))
    return frozenset(id(v) for v in leaves
                     if v is not None and (stepped is None or id(v) in stepped))


def uncut(cuts: tuple[tuple[Line | None, str, Any], ...],
          callers: dict[tuple[Line | None, int], Line | None] | None = None
          ) -> tuple[NoGradAt | DetachedAt, ...]:
    """The places whose edits remove ``cuts``: each cut's place once (two cuts on one line are
    two places); none when a cut has no line. ``callers``
    (:attr:`~toolkit.audit.record.recording.Recording.cut_callers`): where a network cut by a
    ``no_grad`` block was called in it, that call alone is taken out of the block when it
    can be."""
    if any(line is None for line, _, _ in cuts):
        return ()
    at: dict[tuple, tuple[str, Line | None]] = {}
    for line, how, origin in cuts:
        call = None
        if how == "no_grad" and callers and origin:
            call = callers.get((line, id(next(iter(origin)))))
        at[line, line.span, call] = (how, call)
    return tuple(NoGradAt(line, call) if how == "no_grad" else DetachedAt(line)
                 for (line, _, _), (how, call) in at.items())


def fix_lines(places: tuple[NoGradAt | DetachedAt, ...]) -> tuple[Line, ...]:
    """Where the fixes of :func:`uncut`'s ``places`` go, each once: the network's call in its
    ``no_grad`` block (moved out of it) where one was found, else the cut's own line."""
    return tuple(dict.fromkeys(
        p.call if isinstance(p, NoGradAt) and p.call is not None else p.line for p in places))


#: what passes a loss's value on as a sum of its terms: sums, means, signs, views
SUMMING = frozenset({"Add", "Sub", "Rsub", "Mean", "Sum", "Neg"}) | VIEWS


def _residuals(graph: Graph) -> set[int]:
    """The nodes that add the terms of a residual a loss squares: below a square (``r ** 2``,
    ``r * r``, ``F.mse_loss``) that the loss sums, through sums, signs and views only. A
    physics-informed loss squares the residual of its equation (Raissi et al. 2019's Burgers'
    residual, ``u_t + u * u_x - nu * u_xx``): a derivative of the network taken without
    ``create_graph=True`` is a constant inside it, an offset that trains nothing, as in a sum
    (a derivative of a network the loss does not train, a teacher's, is a target there: see
    :func:`check`)."""
    nodes = graph.search.nodes
    squared: list[int] = []
    for key in _sums_of(graph, scaled=True):
        for child in graph.children.get(key, ()):
            node = nodes[child]
            below = [id(n) for n, _ in node.next_functions if n is not None]
            label = node_label(node)
            if (label == "Pow" and getattr(node, "_saved_exponent", None) == 2) or \
                    (label == "Mul" and len(below) == 2 and below[0] == below[1]) or \
                    label == "MseLoss":
                squared.extend(below)
    return _sums_of(graph, scaled=False, starts=squared)


def _sums_of(graph: Graph, *, scaled: bool = True, starts: list[int] | None = None) -> set[int]:
    """The nodes that sum a loss's terms: reached from the loss (or from ``starts``) through
    sums, means, signs, views and (``scaled``) products or quotients by a constant only (not a
    term's own difference under a square, ``(td_target - value).pow(2)``, which compares)."""
    nodes = graph.search.nodes
    out: set[int] = set()
    todo = list(graph.roots if starts is None else starts)
    while todo:
        key = todo.pop()
        if key in out or key not in nodes:
            continue
        out.add(key)
        node = nodes[key]
        label = node_label(node)
        inputs = inputs_of(node)
        if label in SUMMING or (scaled and label in ("Mul", "Div") and len(inputs) == 1):
            todo.extend(graph.children.get(key, ()))
    return out
