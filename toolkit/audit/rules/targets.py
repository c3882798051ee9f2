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
views only):

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
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from toolkit.audit.findings import TrainedTarget
from toolkit.audit.rules.wanted import CutAt, Wanted
from toolkit.audit.truth.cuts import target_cut
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS, owners, shape_text
from toolkit.audit.truth.proof import Cut
from toolkit.lens.backward_graph import is_cut_marker, node_label

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["COMPARE", "EVEN", "check", "find_trained_targets", "target_edges"]

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
_LOGS = frozenset({"LogSoftmax", "Log", "LogSigmoid", "Logsumexp", "Xlogy", "Log1p"})
_TOWARD_LOG = frozenset({"Gather", "Squeeze", "Unsqueeze", "Select", "Index", "Sum", "Mean",
                         "Neg", "Sub", "Add", "Mul", "Div", "Clamp", "Exp"}) | VIEWS
#: what lies between a log-probability and the sum of its terms: selections and sums alone
_PURE_LOG = frozenset({"Gather", "Squeeze", "Unsqueeze", "Select", "Index", "Sum", "Mean",
                       "Neg"}) | VIEWS
#: what makes a reward of a log-probability without making it a probability (a KL penalty in
#: the reward, ``r - beta * (logp - ref_logp)``): arithmetic, selections and joins, no exp
_LINEAR_IN_LOG = (_TOWARD_LOG - {"Exp"}) | frozenset(
    {"Rsub", "Repeat", "RepeatInterleave", "Expand", "Clone", "Cat", "Stack"})
_MAX_HEAD = 64
_COSINE = "a cosine similarity of two views, neither side cut"
_BOOTSTRAP = "a target bootstrapped from other rows of the same forward"
_TO_NORM = frozenset({"Clone", "ClampMin", "Clamp", "Expand", "Unsqueeze"}) | VIEWS
_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Max", "Amax", "Maximum", "Minimum"})
#: what puts rows side by side: a side made of arithmetic rows is arithmetic
_JOINS = frozenset({"Stack", "Cat"})


def _label(node: Any) -> str:
    return node_label(node)


def _inputs(node: Any) -> list[Any]:
    return [n for n, _ in node.next_functions if n is not None]


def _forms(graph: Graph) -> list[tuple[list[Any], Any, str, int | None, int]]:
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
    while queue and len(seen) < _MAX_HEAD:
        chain, distance, sign = queue.popleft()
        node = chain[-1]
        if (id(node), distance, sign) in seen:
            continue
        seen.add((id(node), distance, sign))
        label, inputs = _label(node), _inputs(node)
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
                if _label(inputs[0]) == "Sub":
                    found.append(([*chain, inputs[0]], inputs[0], "(a - b) * (a - b)", None,
                                  sign))
                else:
                    queue.append(([*chain, inputs[0]], True, sign))  # a square: even
                continue
            if all(_normalised(n) for n in inputs):
                found.append((chain, node, _COSINE, 1, sign))
                continue
            found.append((chain, node, "product", None, sign))
            continue
        if label == "Div" and len(inputs) == 2:
            continue  # divided by something with a graph: a density's term, not a loss's
        if label in _HEAD or (distance and label in _UNDER_EVEN):
            for i, (child, _) in enumerate(node.next_functions):
                if child is not None and not is_cut_marker(child):
                    flip = label in ("Neg", "Rsub") or (label == "Sub" and i == 1)
                    queue.append(([*chain, child], distance, -sign if flip else sign))
    return found


def _repelling(graph: Graph, forms: list[tuple[list[Any], Any, str, int | None, int]],
               stepped: set[int]) -> set[int]:
    """The comparison nodes of a metric-learning loss: those whose two sides share stepped
    tensors with a comparison the loss pushes apart (a contrastive loss's ``relu(m - d)``,
    a triplet's negative): pulling pairs together while pushing others apart trains both
    sides by design, and no side is a target."""
    shared: dict[int, set[int]] = {}
    apart: set[int] = set()
    for _, node, form, _, sign in forms:
        if form == "product" or len(_inputs(node)) != 2:
            continue
        left, right = (_stepped_below(graph, n, stepped)[0] for n in _inputs(node))
        shared[id(node)] = left & right
        pull = -sign if form == _COSINE else sign
        if pull < 0:
            apart |= left & right
    return {key for key, found in shared.items() if found & apart}


def _distance_form(chain: list[Any]) -> str:
    """The name of a difference's distance: ``(a - b) ** 2`` and ``|a - b|`` as before, else
    the even functions above it (``|a - b| ** 2``, ``‖a - b‖``)."""
    above = [_label(n) for n in chain[:-1] if _label(n) in EVEN]
    if above == ["Pow"]:
        return "(a - b) ** 2"
    if above == ["Abs"]:
        return "|a - b|"
    return f"a distance of a - b ({' of '.join(above) or 'a square'})"


def _normalised(node: Any) -> bool:
    """Whether ``node`` divides a tensor by its norm (``F.cosine_similarity``'s two factors,
    ``F.normalize``): a ``Div`` whose divisor is a vector norm through clamps, clones and
    views."""
    inputs = _inputs(node)
    if _label(node) != "Div" or len(inputs) != 2:
        return False
    divisor = inputs[1]
    for _ in range(4):
        if _label(divisor) in ("LinalgVectorNorm", "Norm"):
            return True
        if _label(divisor) not in _TO_NORM or not _inputs(divisor):
            return False
        divisor = _inputs(divisor)[0]
    return False


def _log_node(graph: Graph, start: Any, through: frozenset[str] = _TOWARD_LOG,
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
        label = _label(node)
        if label in _LOGS:
            return node
        if label in through:
            queue.extend((n, depth + 1) for n in _inputs(node) if not is_cut_marker(n))
    return None


def _stepped_below(graph: Graph, node: Any, stepped: set[int]) -> tuple[set[int], set[int]]:
    """``(ids of stepped tensors reached from node, ids of the nodes met)``, cuts respected."""
    met = graph.reach([id(node)]) if id(node) in graph.search.nodes else set()
    return graph.leaves(met) & stepped, met


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
    the task variable, Rakelly et al. 2019); anything else is a centring or a batch statistic. Of a cosine similarity's two sides (SimSiam's
    ``D(p, z)``), the target is the side the other is computed from (``p = h(z)``), else the
    second argument.
    """
    inputs = _inputs(node)
    if len(inputs) != 2:
        return None
    nodes = graph.search.nodes
    if form == _COSINE:
        sides = [_inputs(n)[0] for n in inputs]
        left, right = (graph.reach([id(n)]) if id(n) in nodes else set() for n in sides)
        reaches = [bool(graph.leaves(side) & stepped) for side in (left, right)]
        if reaches[0] != reaches[1]:
            side = 0 if reaches[1] else 1
        elif reaches[0] and _mirrored(sides[0], sides[1], stepped) and \
                _kept_apart(graph, node, sides, stepped):
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
        elif reaches[0] and _mirrored(inputs[0], inputs[1], stepped) and \
                _kept_apart(graph, node, inputs, stepped):
            return None  # one network on two views, each pulled toward the other
        elif target_index is not None and _plus_constant(graph, inputs[1 - target_index],
                                                         stepped) and \
                not _plus_constant(graph, inputs[target_index], stepped):
            side = 1 - target_index   # the arguments swapped: mse_loss(td_target, q)
        elif _fed_another(graph, inputs, (left, right), stepped):
            return None   # one network on data and on a generator's output: feature matching
        else:
            side = target_index if target_index is not None else _target_side(inputs)
        return _Sides(form, inputs[side], node)
    logs = [_log_node(graph, n) for n in inputs]
    if logs[0] is not None and logs[0] is logs[1]:
        # both sides computed from one log-probability: the weight is the side that is more
        # than a selection or a sum of it (a reward with its KL penalty, ``p = log_p.exp()``)
        pure = [_log_node(graph, n, _PURE_LOG) is not None for n in inputs]
        if pure[0] != pure[1]:
            logs[pure.index(False)] = None
    if logs[0] is None and logs[1] is None:
        found = _surrogate(graph, inputs)
        return None if found is None else _Sides(*found, node)
    weight = 1 if logs[0] is not None else 0
    log = logs[1 - weight]
    reaches = id(inputs[weight]) in nodes and id(log) in graph.reach([id(inputs[weight])])
    if not (reaches and not _unselected(inputs[weight], log)
            and _unselected(inputs[1 - weight], log)):
        # (a weight made from other rows of the log-probability, below, is none of these)
        if reaches:
            # p · log p: an entropy, the weight is the distribution itself; but a weight made
            # by arithmetic on the log-probability alone (a reward with a KL penalty, RLOO's
            # ``r - beta * (log_p - ref_log_p)``) is no distribution: it carries its gradient;
            # nor is one made with another network's output beside it (Distral's task policy
            # ``softmax(alpha log pi_0 + beta Q_i)``, Teh et al. 2017, eq. 3, a teacher)
            if _log_node(graph, inputs[weight], _LINEAR_IN_LOG, 16) is not log and \
                    not _beside_the_log(graph, inputs[weight], log):
                return None
        elif _same_distribution(log, inputs[weight]):
            return None  # p · log p computed apart (softmax and log_softmax of the same logits)
    if _mirrored(_base(inputs[weight]), _base(log), stepped) and \
            _kept_apart(graph, node, [inputs[weight], log], stepped) and \
            _fitted_too(graph, node, inputs[weight]):
        return None  # TRADES's KL between the predictions at x and at x', both trained
    if id(log) in nodes and not graph.leaves(graph.reach([id(log)])) & stepped:
        # the log-probability trains nothing this loss steps: no score-function term, the
        # weight is what is trained (SAC's temperature: -(log_alpha * (log_pi + H)).mean())
        return None
    return _Sides("a log-probability times a weight that carries gradient", inputs[weight], node,
                  weight=True)


def _beside_the_log(graph: Graph, weight: Any, log: Any) -> bool:
    """Whether the weight ``weight`` of the log-probability ``log`` reaches tensors with a
    gradient that ``log`` does not: it is made with another network's output as well (a
    teacher's, a critic's), no function of the log-probability's own distribution."""
    nodes = graph.search.nodes
    if id(weight) not in nodes or id(log) not in nodes:
        return False
    return bool(graph.leaves(graph.reach([id(weight)])) - graph.leaves(graph.reach([id(log)])))


def _past_views(node: Any) -> Any:
    """``node``, or what the views above it (a reshape, a squeeze, a transpose) are views of."""
    while _label(node) in VIEWS and _inputs(node):
        node = _inputs(node)[0]
    return node


def _plus_constant(graph: Graph, node: Any, stepped: set[int]) -> bool:
    """Whether ``node`` (past views) adds to, or takes from, a network's output something that
    trains nothing: a reward, a return (``r + γ max Q(s')``), the bootstrapped side of a
    comparison whichever argument it is."""
    node = _past_views(node)
    if _label(node) not in ("Add", "Sub"):
        return False
    nodes = graph.search.nodes
    return any(k is None or id(k) not in nodes
               or not graph.leaves(graph.reach([id(k)])) & stepped
               for k, _ in node.next_functions)


def _mirrored(a: Any, b: Any, stepped: set[int]) -> bool:
    """Whether the two sides ``a`` and ``b`` of a comparison are one computation on two inputs:
    the same operations, in the same order, down to the same stepped tensors, whatever reaches
    no stepped tensor (the two views, their noise) aside. VICReg's invariance term
    ``mse_loss(z_a, z_b)`` of one backbone and projector on two augmentations (Bardes et
    al., ICLR 2022), the Pi-model's squared difference of two stochastic passes (Laine and
    Aila, ICLR 2017): each side is trained toward the other on purpose, no side is a target. A
    side made through more layers (SimSiam's predictor), by arithmetic (``r + γ max Q(s')``) or
    from another network is no mirror."""
    memo: dict[int, object] = {}

    def shape(node: Any, depth: int = 0) -> object:
        key = id(node)
        if key not in memo:
            variable = getattr(node, "variable", None)
            if variable is not None:
                memo[key] = ("leaf", id(variable)) if id(variable) in stepped else "input"
            elif depth > 400:
                memo[key] = ("deep", key)   # too deep to compare: no mirror
            else:
                memo[key] = "input"   # while it is walked: a cycle is none
                kids = tuple(shape(c, depth + 1) for c in _inputs(node))
                trains = any(k != "input" for k in kids)
                memo[key] = (_label(node), kids) if trains else "input"
        return memo[key]

    return a is not b and shape(a) != "input" and shape(a) == shape(b)


def _fed_another(graph: Graph, inputs: list[Any], reached: tuple[set[int], set[int]],
                 stepped: set[int]) -> bool:
    """Whether the two sides of a comparison are one network's same operations on two inputs,
    one of which another stepped network made: feature matching, a discriminator's features of
    real data and of a generated sample compared (Salimans et al. 2016, §3.1; GANomaly's
    adversarial loss ``l2(D(x), D(G(x)))``, Akcay et al. 2018). The loss trains the generator
    through its side, the network both sides run through on both, as a mirrored pair (what its
    own optimizer does with that gradient is the other rules' to judge): no side is a target.

    The shared network's tensors are the stepped ones both sides reach. A computation that
    reaches none of them is an input, set aside where the other side has data (no node) in its
    place; a layer's own tensors are not (another network's layer on top of the shared one, a
    teacher's beside a student's, frozen or not, keeps the sides apart)."""
    ours = [graph.leaves(side) & stepped for side in reached]
    shared = ours[0] & ours[1]
    if not shared or ours[0] == ours[1]:
        return False
    memo: dict[int, Any] = {}

    def shape(node: Any, depth: int = 0) -> Any:
        key = id(node)
        if key not in memo:
            variable = getattr(node, "variable", None)
            kids_of = _inputs(node)
            if variable is not None:
                memo[key] = ("leaf" if id(variable) in shared else "own", id(variable))
            elif depth > 400:
                memo[key] = ("deep", key)
            elif _label(node) in VIEWS and len(kids_of) == 1:
                memo[key] = shape(kids_of[0], depth + 1)   # a weight's transpose is the weight
            else:
                memo[key] = "input"   # while it is walked: a cycle is none
                kids = [k for k in (shape(c, depth + 1) for c in kids_of) if k != "input"]
                if all(k[0] in ("own", "other") for k in kids):   # reaches no shared tensor
                    ids = frozenset().union(*({k[1]} if k[0] == "own" else k[1] for k in kids))
                    memo[key] = ("other", ids) if ids else "input"
                else:
                    memo[key] = (_label(node), tuple(kids))
        return memo[key]

    def same(x: Any, y: Any) -> bool:
        if not (isinstance(x[1], tuple) and isinstance(y[1], tuple)):
            return x == y
        if x[0] != y[0]:
            return False
        a, b = x[1], y[1]
        if len(a) != len(b):   # another network's output in place of data: set aside
            a, b = (tuple(k for k in a if k[0] != "other"),
                    tuple(k for k in b if k[0] != "other"))
        return len(a) == len(b) and all(same(i, j) for i, j in zip(a, b))

    left, right = shape(inputs[0]), shape(inputs[1])
    return isinstance(left, tuple) and isinstance(right, tuple) and \
        left[0] not in ("other", "own", "leaf", "deep") and same(left, right)


#: what a layer saves of the data it reads (a linear layer's input, a convolution's)
_DATA = ("_saved_mat1", "_saved_input")


def _data_read(nodes: Mapping[int, Any], ids: Collection[int]) -> set[tuple[int, tuple]]:
    """The data (no graph of their own) the layers among ``ids`` read, by address and shape:
    what a network was called on."""
    found = set()
    for k in ids:
        for attr in _DATA:
            saved = getattr(nodes[k], attr, None)
            if isinstance(saved, torch.Tensor) and not saved.requires_grad:
                found.add((saved.data_ptr(), tuple(saved.shape)))
    return found


def _fitted_too(graph: Graph, node: Any, target: Any) -> bool:
    """Whether the soft target ``target`` of the comparison ``node`` is the network's
    prediction on data another term of the loss fits (TRADES's ``softmax(f(x))``, whose
    cross-entropy term trains ``f(x)`` toward the labels, Zhang et al. 2019, eq. 5): a
    regulariser between two predictions the loss trains, as the authors' code keeps it, not
    a label guessed for data the loss has none for (VAT's prediction on unlabelled data, a
    constant by the method, Miyato et al. 2018)."""
    nodes = graph.search.nodes
    if id(node) not in nodes or id(target) not in nodes:
        return False
    # every read of the target itself left out (``F.kl_div`` reads it twice), not the
    # output it is made from (a cross-entropy of the same logits)
    removed = {(k, id(target)) for k, kids in graph.children.items() if id(target) in kids}
    others = graph.reach(graph.roots, removed=removed | {
        (id(node), c) for c in graph.children.get(id(node), ())})
    return bool(_data_read(nodes, graph.reach([id(target)])) & _data_read(nodes, others))


#: operations that normalise a batch by its own statistics (a batch normalization, a
#: whitening's Cholesky factor, a variance): a side made through one cannot collapse to a
#: constant
_BATCH_STATISTICS = ("BatchNorm", "Cholesky", "Var", "Std")


def _kept_apart(graph: Graph, node: Any, sides: list[Any], stepped: set[int]) -> bool:
    """Whether something keeps the two mirrored ``sides`` of the comparison ``node`` from
    collapsing to one constant, so that pulling each toward the other is the method: another
    term of the loss trains the same tensors without passing the comparison (VICReg's
    variance and covariance terms, the Pi-model's cross-entropy on labelled rows), or a side
    is made through its batch's statistics (a batch normalization, W-MSE's whitening). Two
    outputs of one network only pulled together collapse (Hadsell et al. 2006 push dissimilar
    pairs apart for that reason): that comparison has a target."""
    nodes = graph.search.nodes
    if id(node) in nodes:
        others = graph.reach(graph.roots, removed={(id(node), c) for c in
                                                   graph.children.get(id(node), ())})
        if graph.leaves(others) & stepped:
            return True
    below = set()
    for side in sides:
        below |= graph.reach([id(side)]) if id(side) in nodes else set()
    return any(any(word in _label(nodes[k]) for word in _BATCH_STATISTICS) for k in below)


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
        if any(_label(nodes[k]) in ("Sub", "Rsub") for k in between if k in nodes):
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
    if _label(node) in _JOINS:
        rows = _inputs(node)
        return bool(rows) and all(_arithmetic(row) for row in rows)
    return _label(node) in _ARITHMETIC


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
        below = selected or _label(node) in _SELECTS
        queue.extend((n, below) for n in _inputs(node) if not is_cut_marker(n))
    return False


def _unselected(start: Any, target: Any) -> bool:
    """Whether ``start`` reaches ``target`` through a path that selects no rows (no slice,
    index, chunk or gather on the way). A weight that reaches its own log-probability only
    through selections, where the log-probability reads it without one, is computed from
    other rows of it (a return summing each step's reward ``r_t - log pi_t`` from later
    steps, AIRL's entropy-regularised reward): no entropy, a weight. A ``gather`` (each row's
    action) selects within the same rows."""
    queue, seen = deque([start]), set()
    while queue and len(seen) < 4 * _MAX_HEAD:
        node = queue.popleft()
        if node is target:
            return True
        if id(node) in seen or (node is not start and _label(node) in _OTHER_ROWS):
            continue
        seen.add(id(node))
        queue.extend(n for n in _inputs(node) if not is_cut_marker(n))
    return False


def _reads_a_leaf(node: Any) -> bool:
    """Whether ``node`` reads a stored tensor (a parameter) directly or through a view: the
    layer that computes a distribution's parameters."""
    for child in _inputs(node):
        if getattr(child, "variable", None) is not None:
            return True
        if _label(child) in VIEWS and any(getattr(c, "variable", None) is not None
                                          for c in _inputs(child)):
            return True
    return False


_SELECTS = frozenset({"Split", "SplitWithSizes", "Slice", "Select", "Index", "Unbind",
                      "Narrow", "Gather", "IndexSelect"})
_OTHER_ROWS = _SELECTS - {"Gather"}


def _distribution(start: Any) -> set[tuple[int, int]]:
    """The edges ``(node, output)`` from ``start`` down through parameter-free ops (softmax,
    log, clamp, normalisation), ending at the first layer that reads a parameter or the first
    selection of rows (a slice, a chunk, an index: another part of a batch is another
    distribution)."""
    seen: set[int] = set()
    edges: set[tuple[int, int]] = set()
    queue = deque([start])
    while queue and len(seen) < _MAX_HEAD:
        node = queue.popleft()
        if id(node) in seen or getattr(node, "variable", None) is not None:
            continue
        seen.add(id(node))
        if _reads_a_leaf(node) or (node is not start and _label(node) in _SELECTS):
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
        if _label(node) not in _SCALE or len(inputs) != 1:
            break
        flipped ^= _label(node) == "Neg"
        node, nr = inputs[0]
    return id(node), nr, flipped


def _log_normalised(node: Any, inputs: list[tuple[Any, int]]) -> bool:
    """Whether ``node`` is ``x - x.logsumexp(...)``: logits normalised, as
    ``torch.distributions.Categorical(logits=x)`` keeps them (its ``probs`` a softmax of
    them, beside the script's own ``log_softmax(x)``)."""
    if _label(node) != "Sub" or len(inputs) != 2 or _label(inputs[1][0]) != "Logsumexp":
        return False
    below = _inputs(inputs[1][0])
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
        label = _label(node)
        edges = [(n, k) for n, k in node.next_functions if n is not None]
        if label in _FAMILY and edges:
            found.add((_FAMILY[label], _strip(*edges[0])))
            continue
        if _reads_a_leaf(node) or label in ("Sum", "Mean"):
            continue
        queue.extend(n for n, _ in edges if not is_cut_marker(n))
    return found


def _same_distribution(log: Any, weight: Any) -> bool:
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
    start = _inputs(log)[0] if _label(log) == "Log" and _inputs(log) else log
    return bool(_families(start) & _families(weight))


def _terms(graph: Graph, stepped: set[int], derived: Collection[int] = frozenset()
           ) -> list[tuple[list[Any], Any, str, int | None, _Sides]]:
    """``(chain, comparison node, form, index of the target input, its sides)`` of each form
    of the loss's head that has a target side, but for the terms of a mutual comparison: two
    terms each of whose target is the other's prediction, up to operations of one input, the
    two predictions one network's passes (:func:`_mirrored`: R-Drop's ``KL(p1 || p2) + KL(p2
    || p1)`` of two dropout passes, Wu et al. 2021, eq. 2): each output is trained toward the
    other on purpose, and no side of either is only a target. The same pair of two networks
    is two peers, each the other's teacher (deep mutual learning, Zhang et al. 2018, whose
    student learns from its peer's prediction as a constant): each term keeps its target. A
    target made from the other term's prediction through a network (SimSiam's ``p2 = h(z2)``)
    is no such pair, nor is one term alone.

    A node in ``derived`` (by ``id``) is one autograd made for a derivative the loss reads
    (``torch.autograd.grad(..., create_graph=True)``): that derivative's formula, which reads
    ``(sigmoid(x) - y) * x`` for a cross-entropy's, compares nothing the script wrote."""
    forms = _forms(graph)
    metric = _repelling(graph, forms, stepped)
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
              and _mirrored(target, prediction, stepped)}
    return [t for i, t in enumerate(out) if i not in mutual]


def _prediction(node: Any, found: _Sides) -> Any:
    """The side of the comparison (or product) ``node`` that is not ``found``'s target: the
    log-probability a soft target weighs (``softmax(t) * log_softmax(p)``, a KL written by
    torch), or ``None``."""
    sides = _inputs(node)
    if found.form == _COSINE:
        sides = [_inputs(n)[0] for n in sides]
    return next((n for n in sides if n is not found.target), None)


def _base(node: Any) -> Any:
    """``node`` without the operations of one input above what made it (a softmax, its log,
    a temperature, a dropout): the output those are made of."""
    for _ in range(64):
        kids = _inputs(node) if node is not None else []
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
            shared, _ = _stepped_below(graph, target, stepped)
        else:
            left, right = (_stepped_below(graph, n, stepped)[0] for n in _inputs(node))
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
        if form == _COSINE:
            fix += ("; with no stop-gradient on either side the two views can agree by "
                    "collapsing to a constant (SimSiam, Chen & He 2021, §4.1)")
        elif form.startswith(_BOOTSTRAP):
            fix += ("; a critic trained through its own target also moves the target "
                    "(V-trace and GAE returns are constants of the value loss: compute them "
                    "under torch.no_grad())")
        fix += ("; if the gradient through it is meant (residual gradient), audit with "
                "allow_trained_target=True")
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
    if _label(node) == "CopySlices" and _inputs(node):
        node = _past_views(_inputs(node)[-1])
    return _label(node) in ("Add", "Sub", "Mul", "Maximum", "Minimum")


def check(step: RecordedStep) -> Found:
    """The rule: each loss's trained targets (none when ``allow_trained_target=True``)."""
    if step.allow_trained_target:
        return {}
    return {"targets": [t for name in step.graphs for t in find_trained_targets(step, name)]}
