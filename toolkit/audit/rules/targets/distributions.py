"""A log-probability and the factor it is multiplied by in a loss's head: the weight of a
score-function term (``log pi * A``), a soft target (a cross-entropy to a teacher's
probabilities), or the distribution itself (an entropy, ``p * log p``, which is no target).

A weight and a log-probability describe one distribution when the weight is what the log is
taken of, or both are a softmax (a sigmoid) and its log of the same input, up to a temperature
and a sign, meeting before either passes a layer with parameters or selects rows of a batch.
A value summed over the distribution's events is an expectation under it, no function of each
event's probability; a selection of other rows is another input.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from toolkit.audit.rules.targets.comparisons import MAX_HEAD
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS
from toolkit.lens.backward_graph import is_cut_marker, node_label
from toolkit.lens.graph_walk import inputs_of

__all__ = ["LINEAR_IN_LOG", "PURE_LOG", "SELECTS", "beside_the_log", "log_node",
           "same_distribution", "unselected"]

_LOGS = frozenset({"LogSoftmax", "Log", "LogSigmoid", "Logsumexp", "Xlogy", "Log1p"})


_TOWARD_LOG = frozenset({"Gather", "Squeeze", "Unsqueeze", "Select", "Index", "Sum", "Mean",
                         "Neg", "Sub", "Add", "Mul", "Div", "Clamp", "Exp"}) | VIEWS


#: what lies between a log-probability and the sum of its terms: selections and sums alone
PURE_LOG = frozenset({"Gather", "Squeeze", "Unsqueeze", "Select", "Index", "Sum", "Mean",
                       "Neg"}) | VIEWS


#: what makes a reward of a log-probability without making it a probability (a KL penalty in
#: the reward, ``r - beta * (logp - ref_logp)``): arithmetic, selections and joins, no exp
LINEAR_IN_LOG = (_TOWARD_LOG - {"Exp"}) | frozenset(
    {"Rsub", "Repeat", "RepeatInterleave", "Expand", "Clone", "Cat", "Stack"})


def log_node(graph: Graph, start: Any, through: frozenset[str] = _TOWARD_LOG,
              deepest: int = 8) -> Any | None:
    """The log-probability node ``start`` is computed from through index, sum and arithmetic
    ops (``through``, at most ``deepest`` nodes down, not through any module's output), or
    ``None``."""
    queue = deque([(start, 0)])
    seen: set[int] = set()
    while queue:
        node, depth = queue.popleft()
        if id(node) in seen or depth > deepest:
            continue
        seen.add(id(node))
        label = node_label(node)
        if label in _LOGS:
            return node
        if label in through:
            queue.extend((n, depth + 1) for n in inputs_of(node) if not is_cut_marker(n))
    return None


def beside_the_log(graph: Graph, weight: Any, log: Any) -> bool:
    """Whether the weight ``weight`` of the log-probability ``log`` reaches tensors with a
    gradient that ``log`` does not: it is made with another network's output as well (a
    teacher's, a critic's), no function of the log-probability's own distribution."""
    nodes = graph.search.nodes
    if id(weight) not in nodes or id(log) not in nodes:
        return False
    return bool(graph.leaves(graph.reach([id(weight)])) - graph.leaves(graph.reach([id(log)])))


def unselected(start: Any, target: Any) -> bool:
    """Whether ``start`` reaches ``target`` through a path that selects no rows (no slice,
    index, chunk or gather on the way). A weight that reaches its own log-probability only
    through selections, where the log-probability reads it without one, is computed from
    other rows of it (a return summing each step's reward ``r_t - log pi_t`` from later
    steps, AIRL's entropy-regularised reward): no entropy, a weight. A ``gather`` (each row's
    action) selects within the same rows."""
    queue, seen = deque([start]), set()
    while queue and len(seen) < 4 * MAX_HEAD:
        node = queue.popleft()
        if node is target:
            return True
        if id(node) in seen or (node is not start and node_label(node) in _OTHER_ROWS):
            continue
        seen.add(id(node))
        queue.extend(n for n in inputs_of(node) if not is_cut_marker(n))
    return False


def _reads_a_leaf(node: Any) -> bool:
    """Whether ``node`` reads a stored tensor (a parameter) directly or through a view: the
    layer that computes a distribution's parameters."""
    for child in inputs_of(node):
        if getattr(child, "variable", None) is not None:
            return True
        if node_label(child) in VIEWS and any(getattr(c, "variable", None) is not None
                                          for c in inputs_of(child)):
            return True
    return False


SELECTS = frozenset({"Split", "SplitWithSizes", "Slice", "Select", "Index", "Unbind",
                      "Narrow", "Gather", "IndexSelect"})


_OTHER_ROWS = SELECTS - {"Gather"}


def _distribution(start: Any) -> set[tuple[int, int]]:
    """The edges ``(node, output)`` from ``start`` down through parameter-free ops (softmax,
    log, clamp, normalisation), ending at the first layer that reads a parameter or the first
    selection of rows (a slice, a chunk, an index: another part of a batch is another
    distribution)."""
    seen: set[int] = set()
    edges: set[tuple[int, int]] = set()
    queue = deque([start])
    while queue and len(seen) < MAX_HEAD:
        node = queue.popleft()
        if id(node) in seen or getattr(node, "variable", None) is not None:
            continue
        seen.add(id(node))
        if _reads_a_leaf(node) or (node is not start and node_label(node) in SELECTS):
            continue
        for child, nr in node.next_functions:
            if child is not None and not is_cut_marker(child):
                edges.add((id(child), nr))
                queue.append(child)
    return edges


_FAMILY = {"Softmax": "softmax", "LogSoftmax": "softmax", "Sigmoid": "sigmoid",
           "LogSigmoid": "sigmoid"}


#: what leaves a distribution what it is: views, clamps, a sign, a temperature
_SCALE = frozenset({"Clone", "Clamp", "ClampMin", "ClampMax", "Neg", "Mul", "Div"}) | VIEWS


def _strip(node: Any, nr: int = 0) -> tuple[int, int, bool]:
    """``(id of the node under views, clamps, temperatures and signs, which of its outputs,
    whether the sign was flipped)``: ``softmax(z / T)`` and ``log_softmax(z)`` read the same
    ``z``; two chunks of one tensor are two outputs of one node, two inputs."""
    flipped = False
    for _ in range(8):
        inputs = [(n, k) for n, k in node.next_functions if n is not None]
        if _log_normalised(node, inputs):
            node, nr = inputs[0]   # x - logsumexp(x): the same distribution's logits
            continue
        if node_label(node) not in _SCALE or len(inputs) != 1:
            break
        flipped ^= node_label(node) == "Neg"
        node, nr = inputs[0]
    return id(node), nr, flipped


def _log_normalised(node: Any, inputs: list[tuple[Any, int]]) -> bool:
    """Whether ``node`` is ``x - x.logsumexp(...)``: logits normalised, as
    ``torch.distributions.Categorical(logits=x)`` keeps them (its ``probs`` a softmax of
    them, beside the script's own ``log_softmax(x)``)."""
    if node_label(node) != "Sub" or len(inputs) != 2 or node_label(inputs[1][0]) != "Logsumexp":
        return False
    below = inputs_of(inputs[1][0])
    return bool(below) and below[0] is inputs[0][0]


def _families(start: Any) -> set[tuple[str, tuple[int, int, bool]]]:
    """The distributions ``start`` is a parameter-free function of: ``(family, its input)``
    for each softmax or sigmoid (or their logs) met going down, and ``("prob", start)``
    itself; a selection of the same rows (``gather``) is passed, a layer is not, nor a sum or
    a mean: a value summed over the distribution's events is an expectation under it, no
    function of each event's probability (COMA's counterfactual baseline ``sum_u' pi(u')
    Q(u')``, Foerster et al. 2018, eq. 4, a weight of ``log pi(u)`` the method keeps
    constant)."""
    found = {("prob", _strip(start))}
    queue, seen = deque([start]), set()
    while queue and len(seen) < 16:
        node = queue.popleft()
        if id(node) in seen or getattr(node, "variable", None) is not None:
            continue
        seen.add(id(node))
        label = node_label(node)
        edges = [(n, k) for n, k in node.next_functions if n is not None]
        if label in _FAMILY and edges:
            found.add((_FAMILY[label], _strip(*edges[0])))
            continue
        if _reads_a_leaf(node) or label in ("Sum", "Mean"):
            continue
        queue.extend(n for n, _ in edges if not is_cut_marker(n))
    return found


def same_distribution(log: Any, weight: Any) -> bool:
    """Whether a log-probability and its weight describe one distribution: the weight is
    what the log is taken of (``-(p * p.log()).sum()``, ``Categorical(probs=p).entropy()``),
    or both are a softmax (a sigmoid) and its log of the same input, up to a temperature and
    a sign (``-(F.log_softmax(z) * F.softmax(z)).sum(1)``, a focal loss's ``(1 - p) ** γ ·
    log p``). An entropy or a focusing weight, not a target.

    Two functions of the same scores through *different* distributions are no entropy: a
    self-adversarial weight ``softmax(α · s)`` over negatives times each negative's
    ``log σ(−s)`` (Sun et al. 2019, RotatE, eq. 5, where the weight is a constant). Nor
    are the distributions of two parts of a batch (a pseudo-label from a weak view): a
    selection of other rows is another input."""
    if (id(weight), 0) in _distribution(log):
        return True
    start = inputs_of(log)[0] if node_label(log) == "Log" and inputs_of(log) else log
    return bool(_families(start) & _families(weight))
