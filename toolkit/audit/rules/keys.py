"""Keys cut in a loss over several keys (``cut_keys``).

A contrastive or prototype loss compares each query with several keys (a similarity or
distance matrix, then a softmax over the keys: InfoNCE, NT-Xent, SupCon, CLIP's two-way
cross-entropy, a prototypical network's distances to the class prototypes). Where the keys
are computed in the same step by the network that makes the queries, which the loss's
optimizer steps, the published methods train through the keys as well as the queries (Chen et al. 2020, SimCLR; van den Oord et al.
2018, CPC; Snell et al. 2017; Khosla et al. 2020; Radford et al. 2021): keys cut there
(``.detach()``, ``torch.no_grad()``) leave the loss pulling and pushing the queries alone.
Keys cut on purpose come from another network (MoCo's momentum encoder, a locked tower: the
loss trains it through nothing else, even where an optimizer holds it) or from earlier steps (a memory bank, a queue, a compressive memory carried across segments:
values another call made, cut now or before, or written in place into a tensor that holds
earlier ones); neither is a
finding, nor is a cut value compared without a softmax over keys (a target, SimSiam's stopped
branch) or subtracted for stability (SupCon's row maxima: no similarity).

A ranked pair is such a comparison too: a difference of two scores the loss reads through a
logistic or a hinge, not through a distance (a reward model's ``-logsigmoid(r_chosen -
r_rejected)``, Stiennon et al. 2020; BPR's ``-logsigmoid(x_ui - x_uj)``, Rendle et al. 2009;
RankNet's cross-entropy of a pair, Burges et al. 2005; TransE's margin, Bordes et al. 2013).
The methods push both scores apart; one side cut leaves the loss pushing the other alone. Not
this: a difference that is zero everywhere (``exp(logp - logp.detach())``, GRPO's ratio, whose
gradient is the log-probability's), a value less a cut value computed from it (a shift by its
maximum), a difference squared or taken in size (a TD error: a target), a cut side of an
earlier call (PPO's ratio to the rollout) or of a network the loss's optimizer does not step
(a relativistic generator's, whose cut side is the discriminator's score on real data).

The recording marks every operation that reads cut values into a result with a graph
(:attr:`~toolkit.audit.record.recording.Recording.cut_read`); this rule keeps those that are
a similarity or distance (a matrix product, ``cdist``, a difference squared or taken in
absolute value, broadcast so that each query meets several keys: not a reconstruction's
difference to its own cut input, Soft-IntroVAE's), or a join of cut keys to trained ones that
one is computed from, whose result a loss reads through a softmax (or its ``exp``, a
hand-written log-softmax). The fix removes
the cuts of the keys.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolkit.audit.findings import CutKeys
from toolkit.audit.record import syntax as S
from toolkit.audit.rules.constant import cut_behind, fix_lines, uncut
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.labels import VIEWS
from toolkit.audit.truth.proof import NoGradAt
from toolkit.lens.backward_graph import node_label

if TYPE_CHECKING:
    from toolkit.audit.truth.graph import Graph
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check"]

#: what a similarity of queries and keys is made by (under views): a matrix product, a
#: distance
_PRODUCTS = frozenset({"Mm", "Bmm", "Mv", "Cdist"})
#: what squares a difference into a distance, or takes its size
_DISTANCES = frozenset({"Pow", "Abs", "Norm", "LinalgVectorNorm"})
#: the calls that may read keys into a similarity (a product, a distance, a difference to
#: square) or join them to trained ones (not ``torch.autograd.grad``, whose graph of a graph
#: holds products of its own)
_READS = frozenset({"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "einsum",
                    "cdist", "sub", "__sub__", "__rsub__", "rsub", "cat", "stack"})
#: what only views or rearranges a tensor
_VIEWED = VIEWS | {"Permute", "UnsafeView", "Clone"}
#: what normalises scores over keys: a softmax, its log, a log-sum-exp, or the exp of a
#: hand-written one
_SOFTMAX = frozenset({"LogSoftmax", "Softmax", "Logsumexp", "Exp"})
#: how far up from the similarity the softmax may be (temperatures, masks, views)
_REACH = 24
#: what joins cut keys to trained ones into one tensor of rows
_JOINS = frozenset({"Cat", "Stack"})
#: how far up from a join its similarity may be (a normalisation, views)
_JOINED = 8
#: what ranks the two sides of a difference: a logistic of it, a hinge on it
_RANKS = frozenset({"LogSigmoid", "Sigmoid", "Softplus", "BinaryCrossEntropyWithLogits",
                    "SoftMarginLoss", "Relu", "ClampMin"})
#: what may lie between a ranked difference and its ranking: views, selections of pairs, sums
#: and products with other differences or constants (a margin, DPO's ``beta`` and reference
#: log-ratios), a sign
_TO_RANK = _VIEWED | {"Mul", "Div", "Add", "Sub", "Neg", "Index", "MaskedSelect", "Gather",
                      "Where", "Select", "Slice"}
#: the calls that subtract
_SUBTRACTS = frozenset({"sub", "__sub__", "__rsub__", "rsub", "subtract"})


def check(step: RecordedStep) -> Found:
    """The rule (see the module's docstring): once per set of cuts and loss."""
    rec = step.rec
    found = []
    seen = set()
    for call, cuts, read, name, node in rec.cut_read:
        if call != rec.call or name not in _READS or rec.inside_forward(cuts):
            continue
        for loss, graph in step.graphs.items():
            nodes = graph.search.nodes
            compared = _compared(graph, node) if node in nodes else None
            ranked = compared is None and node in nodes and name in _SUBTRACTS and \
                _ranked(graph, node, rec, cuts)
            if not ranked and (compared is None or not _under_softmax(graph, compared)):
                continue
            if not ranked and compared == node and node_label(nodes[node]) == "Sub" and \
                    node in rec.one_to_one:
                continue   # a difference of each value to one other: no keys to compare with
            if any(how == "detach" and origin.grad_fn._sequence_nr() < rec.marks[-1]
                   for _, how, origin in cuts):
                continue   # keys made by an earlier call (a memory carried, a bank): cut there
            if step.loss_at is not None and all(
                    line is not None and line.path == step.loss_at[0]
                    and S.outside_loop_of(line.path, line.number, step.loss_at[1])
                    for line, _, _ in cuts):
                continue   # made before the loop that trains (a bank made once), in a script
            key = (tuple((line, line.span if line else None) for line, _, _ in cuts), loss)
            if key in seen:
                continue
            seen.add(key)
            stepped = step.stepped[loss]
            behind = frozenset().union(*(cut_behind(cut, stepped) for cut in cuts))
            # the keys' network, which the loss trains through its queries too: keys from a
            # network it does not train (MoCo's momentum encoder, even held by an optimizer;
            # a locked tower) are another network's
            trained = graph.leaves(graph.reach(graph.roots))
            through = tuple(rec.names.name(t) for i, t in stepped.items()
                            if i in behind and i in trained)
            if not through:
                continue
            no_grad = all(how == "no_grad" for _, how, _ in cuts)
            what = "the pairs' cut side" if ranked else "the keys"
            fix = (f"compute {what} with gradients (the network's call out of its "
                   f"torch.no_grad() block, or torch.enable_grad() for the block)" if no_grad
                   else f"drop the cuts of {what} (their .detach())") + (
                ", so that the loss pushes both sides of each pair apart" if ranked else
                ", so that the loss trains the network through its keys as well as its queries")
            places = uncut(cuts, rec.cut_callers)
            # the network's call in a block that also holds values cut on purpose (a reward
            # model's scores, a negative's choice) is where the fix goes: moved out of it
            lines = fix_lines(places) or tuple(dict.fromkeys(
                line for line, _, _ in cuts if line is not None))
            calls = [p.call for p in places if isinstance(p, NoGradAt) and p.call is not None]
            side = S.assigned_name(calls[0].path, calls[0].number) if len(calls) == 1 else None
            finding = CutKeys(loss=loss, through=through, taken=cuts[0][0],
                              read=read, cut="no_grad" if no_grad else "detach",
                              fix=fix, ranked=ranked,
                              side=side if side and side.isidentifier() else None)
            found.append(Wanted(finding, FirstOf((Option(places, fix, lines),))))
    return {"cut_keys": found}


def _inputs(node: Any) -> list[Any]:
    return [n for n, _ in getattr(node, "next_functions", ()) if n is not None]


def _compared(graph: Graph, start: int) -> int | None:
    """The similarity that compares the cut values read at node ``start``: that node, or, for
    cut keys joined to trained ones (``torch.cat([z_i, z_j.detach()])``, SimCLR's one matrix
    of both views), the first similarity above the join within a few nodes; ``None``."""
    nodes = graph.search.nodes
    if _similarity(graph, nodes[start]):
        return start
    if node_label(nodes[start]) not in _JOINS:
        return None
    return _above(graph, start, _JOINED, lambda node: _similarity(graph, node))


def _similarity(graph: Graph, node: Any) -> bool:
    """Whether ``node`` (past views) is a matrix product or a distance of its inputs: a
    difference whose reader squares it or takes its size (``(q - k).pow(2).sum(-1)``)."""
    node = _past_views(node)
    label = node_label(node)
    if label not in _PRODUCTS and label != "Sub":
        return False
    if any(getattr(_past_views(n), "variable", None) is not None for n in _inputs(node)):
        return False   # a layer's weight times its input (``F.linear``): no queries, no keys
    if label in _PRODUCTS:
        return True
    return any(node_label(graph.search.nodes[c]) in _DISTANCES
               for c in graph.callers.get(id(node), ()) if c in graph.search.nodes)


def _ranked(graph: Graph, start: int, rec: Any, cuts: tuple) -> bool:
    """Whether node ``start``, a difference of a value with a graph and a cut one, is read by
    a loss through a ranking (:data:`_RANKS`), with only what :data:`_TO_RANK` names between
    them (not a distance, not a layer: a difference a network reads on is its input), within
    :data:`_JOINED` nodes above it; not where it is zero everywhere, nor where the cut value
    was computed from the other side (a shift by its maximum) or is one value broadcast
    against many (a reference point: KTO's estimate of the KL, a batch's mean)."""
    node = graph.search.nodes[start]
    live = [_past_views(n) for n in _inputs(node)]
    if node_label(node) != "Sub" or start in rec.zero_reads or start in rec.reference_reads \
            or len(live) != 1:
        return False
    for _, how, origin in cuts:
        made = _past_views(origin.grad_fn) if how == "detach" and origin.grad_fn else None
        if made is not None and made is not live[0] and _below(made, live[0], _JOINED):
            return False
    return _above(graph, start, _JOINED, lambda n: node_label(n) in _RANKS,
                  through=lambda n: node_label(n) in _TO_RANK) is not None


def _below(node: Any, wanted: Any, within: int) -> bool:
    """Whether ``wanted`` is ``node``'s input, or an input's, within ``within`` nodes."""
    todo, seen = [(node, 0)], {id(node)}
    while todo:
        n, depth = todo.pop()
        for m in _inputs(n):
            if m is wanted:
                return True
            if depth + 1 < within and id(m) not in seen:
                seen.add(id(m))
                todo.append((m, depth + 1))
    return False


def _past_views(node: Any) -> Any:
    """``node`` past the views and transposes above what it views."""
    while node_label(node) in _VIEWED and len(_inputs(node)) == 1:
        node = _inputs(node)[0]
    return node


def _under_softmax(graph: Graph, start: int) -> bool:
    """Whether a loss reads node ``start`` through a softmax over its values (its log, a
    log-sum-exp, the ``exp`` of a hand-written one), within :data:`_REACH` nodes above it."""
    return _above(graph, start, _REACH, lambda node: node_label(node) in _SOFTMAX) is not None


def _above(graph: Graph, start: int, within: int, wanted: Callable[[Any], bool],
           through: Callable[[Any], bool] | None = None) -> int | None:
    """The nearest node above node ``start`` (toward the loss, ``start`` itself left out),
    within ``within`` nodes of it, that is ``wanted``, found only past nodes that are
    ``through`` (any, where ``None``); ``None``."""
    nodes = graph.search.nodes
    todo, seen = deque([(start, 0)]), {start}
    while todo:
        k, depth = todo.popleft()
        if k != start and wanted(nodes[k]):
            return k
        if depth < within and (k == start or through is None or through(nodes[k])):
            for c in graph.callers.get(k, ()):
                if c not in seen and c in nodes:
                    seen.add(c)
                    todo.append((c, depth + 1))
    return None
