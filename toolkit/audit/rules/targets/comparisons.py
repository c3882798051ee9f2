"""Where a loss compares two things: the comparisons in the *head* of a loss, found by
structure (issue 62), each with the side its form names the target.

- a loss function of two inputs: ``mse_loss``, ``smooth_l1_loss``, ``huber_loss``,
  ``l1_loss``, ``binary_cross_entropy(_with_logits)`` with a soft target;
- a difference under an even function, through any chain of them and of sums, constant
  factors, roots, clamps and ``relu``: ``(a - b) ** 2``, ``(a - b).abs()``, ``(a - b) * (a -
  b)``, ``(target - pred).abs().pow(2)``, ``torch.norm(a - b)``, a Huber written with
  ``torch.where`` (the two sides of the ``-``);
- a product ``x * g`` whose factor ``g`` is computed from ``x`` through a difference: a
  surrogate gradient meant as a constant (score distillation's ``(x * g).sum()`` with ``g =
  w (ε̂(x_t) − ε)``, Poole et al. 2022): ``g`` is the target;
- a product of two tensors with a graph, one of which is a log-probability (``log_softmax``,
  ``log``, ``log_sigmoid``, ``Categorical.log_prob``): cross-entropy to a soft target
  (``F.cross_entropy`` with probabilities, ``F.kl_div``) and score-function terms
  ``log π · A``. The other factor is the target or weight. An entropy is no target: ``p ·
  log p`` where both factors are functions of one distribution, meeting before either passes
  a layer with parameters or selects rows of a batch (``-(p * p.log()).sum()``,
  ``-(F.log_softmax(z) * F.softmax(z)).sum(1)``, ``Categorical(probs=p).entropy()``). A
  target comes from another forward: another input (a pseudo-label from a weak view), another
  part of a batch, another network (a teacher), another head (a critic's value).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS
from toolkit.lens.backward_graph import is_cut_marker, node_label
from toolkit.lens.graph_walk import inputs_of

__all__ = ["COMPARE", "COSINE", "EVEN", "MAX_HEAD", "find_forms", "repelling", "stepped_below"]

COMPARE = frozenset({"MseLoss", "SmoothL1Loss", "HuberLoss", "L1Loss",
                     "BinaryCrossEntropyWithLogits", "BinaryCrossEntropy", "SoftMarginLoss"})


#: even functions of a difference: a distance
EVEN = frozenset({"Pow", "Abs", "Square", "LinalgVectorNorm", "Norm", "Cosh"})


#: what may lie between an even function and the difference it measures: sums and means of
#: several distances, constant factors, roots, clamps and views (``((a - b) ** 2).sum(1).sqrt()``)
_UNDER_EVEN = frozenset({"Sqrt", "Sum", "Mean", "Add", "Neg", "Mul", "Div", "Clamp", "ClampMin",
                         "ClampMax", "Where", "Log1p", "Relu", "Rsub"}) | VIEWS


#: nodes the head of a loss passes on to each input: sums and means, signs and constant
#: factors, selections, and an elementwise min or max of two terms (PPO's clipped surrogate,
#: ``torch.min(ratio * adv, ratio.clamp(1 - e, 1 + e) * adv)``: each term is the loss's)
_HEAD = frozenset({"Mean", "Sum", "Add", "Sub", "Neg", "Mul", "Div", "Squeeze", "Unsqueeze",
                   "Select", "Index", "Clamp", "Where", "Stack", "Cat", "Minimum",
                   "Maximum", "Sqrt", "Rsub"}) | VIEWS


#: products of two tensors: elementwise, or a dot product (a surrogate's ``torch.dot(y, g)``)
_PRODUCTS = frozenset({"Mul", "Dot", "Vdot"})


MAX_HEAD = 64


COSINE = "a cosine similarity of two views, neither side cut"


_TO_NORM = frozenset({"Clone", "ClampMin", "Clamp", "Expand", "Unsqueeze"}) | VIEWS


def find_forms(graph: Graph) -> list[tuple[list[Any], Any, str, int | None, int]]:
    """``(chain to the comparison, comparison node, form, index of the target input, sign)``
    for the comparisons in the head of the loss; ``sign`` is ``-1`` where the loss grows as
    the comparison's value does not (``-d``, ``relu(m - d)``: a pair pushed apart).

    A comparison is found by structure: a loss function of two inputs (:data:`COMPARE`); a
    difference ``a - b`` under an even function, reached through any chain of them, sums and
    constant factors (``(a - b) ** 2``, ``(a - b).abs().pow(2)``, ``torch.norm(a - b)``, a
    Huber written by hand); a product of two tensors with a graph (a cosine, a soft
    cross-entropy or KL, a score-function term, a surrogate ``(x * g).sum()``)."""
    nodes = graph.search.nodes
    found = []
    queue = deque([([nodes[r]], False, 1) for r in dict.fromkeys(graph.roots)])
    seen: set[tuple[int, bool, int]] = set()
    while queue and len(seen) < MAX_HEAD:
        chain, distance, sign = queue.popleft()
        node = chain[-1]
        if (id(node), distance, sign) in seen:
            continue
        seen.add((id(node), distance, sign))
        label, inputs = node_label(node), inputs_of(node)
        if label in COMPARE and len(inputs) == 2:
            found.append((chain, node, label, 1, sign))
            continue
        if label == "Sub" and distance and len(inputs) == 2:
            found.append((chain, node, _distance_form(chain), None, sign))
            continue
        if label in EVEN and len(inputs) == 1:
            queue.append(([*chain, inputs[0]], True, sign))
            continue
        if label in _PRODUCTS and len(inputs) == 2:
            if inputs[0] is inputs[1]:
                if node_label(inputs[0]) == "Sub":
                    found.append(([*chain, inputs[0]], inputs[0], "(a - b) * (a - b)", None,
                                  sign))
                else:
                    queue.append(([*chain, inputs[0]], True, sign))  # a square: even
                continue
            if all(_normalised(n) for n in inputs):
                found.append((chain, node, COSINE, 1, sign))
                continue
            if not distance:
                found.append((chain, node, "product", None, sign))
                continue
            # under a distance, a product is the measured value's own arithmetic (a
            # forecast scaled back by a learnt level, ``|f(y / level) * level - future|``,
            # compared with data), no loss's product of two terms: walked on below
        if label == "Div" and len(inputs) == 2:
            continue  # divided by something with a graph: a density's term, not a loss's
        if label in _HEAD or (distance and label in _UNDER_EVEN):
            for i, (child, _) in enumerate(node.next_functions):
                if child is not None and not is_cut_marker(child):
                    flip = label in ("Neg", "Rsub") or (label == "Sub" and i == 1)
                    queue.append(([*chain, child], distance, -sign if flip else sign))
    return found


def repelling(graph: Graph, forms: list[tuple[list[Any], Any, str, int | None, int]],
               stepped: set[int]) -> set[int]:
    """The comparison nodes of a metric-learning loss: those whose two sides share stepped
    tensors with a comparison the loss pushes apart (a contrastive loss's ``relu(m - d)``,
    a triplet's negative): pulling pairs together while pushing others apart trains both
    sides by design, and no side is a target."""
    shared: dict[int, set[int]] = {}
    apart: set[int] = set()
    for _, node, form, _, sign in forms:
        if form == "product" or len(inputs_of(node)) != 2:
            continue
        left, right = (stepped_below(graph, n, stepped)[0] for n in inputs_of(node))
        shared[id(node)] = left & right
        pull = -sign if form == COSINE else sign
        if pull < 0:
            apart |= left & right
    return {key for key, found in shared.items() if found & apart}


def _distance_form(chain: list[Any]) -> str:
    """The name of a difference's distance: ``(a - b) ** 2`` and ``|a - b|`` as before, else
    the even functions above it (``|a - b| ** 2``, ``‖a - b‖``)."""
    above = [node_label(n) for n in chain[:-1] if node_label(n) in EVEN]
    if above == ["Pow"]:
        return "(a - b) ** 2"
    if above == ["Abs"]:
        return "|a - b|"
    return f"a distance of a - b ({' of '.join(above) or 'a square'})"


def _normalised(node: Any) -> bool:
    """Whether ``node`` divides a tensor by its norm (``F.cosine_similarity``'s two factors,
    ``F.normalize``): a ``Div`` whose divisor is a vector norm through clamps, clones and
    views."""
    inputs = inputs_of(node)
    if node_label(node) != "Div" or len(inputs) != 2:
        return False
    divisor = inputs[1]
    for _ in range(4):
        if node_label(divisor) in ("LinalgVectorNorm", "Norm"):
            return True
        if node_label(divisor) not in _TO_NORM or not inputs_of(divisor):
            return False
        divisor = inputs_of(divisor)[0]
    return False


def stepped_below(graph: Graph, node: Any, stepped: set[int]) -> tuple[set[int], set[int]]:
    """``(ids of stepped tensors reached from node, ids of the nodes met)``, cuts respected."""
    met = graph.reach([id(node)]) if id(node) in graph.search.nodes else set()
    return graph.leaves(met) & stepped, met
