"""Two sides of a comparison that are one network's same operations on two inputs: each is
trained toward the other on purpose, and neither is a target, when something keeps the pair
from collapsing (another term of the loss trains the same tensors, or a side passes its batch's
statistics). VICReg's invariance term (Bardes et al. 2022), the Pi-model's two stochastic
passes (Laine and Aila 2017), W-MSE's whitened embeddings (Ermolov et al. 2021), feature
matching's discriminator features of real and generated data (Salimans et al. 2016), TRADES's
two predictions (Zhang et al. 2019). Two outputs of one network only pulled together collapse:
that comparison keeps its target.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import torch

from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS
from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import inputs_of

__all__ = ["fed_another", "fitted_too", "kept_apart", "mirrored"]

def mirrored(a: Any, b: Any, stepped: set[int]) -> bool:
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
                kids = tuple(shape(c, depth + 1) for c in inputs_of(node))
                trains = any(k != "input" for k in kids)
                memo[key] = (node_label(node), kids) if trains else "input"
        return memo[key]

    return a is not b and shape(a) != "input" and shape(a) == shape(b)


def fed_another(graph: Graph, inputs: list[Any], reached: tuple[set[int], set[int]],
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
            kids_of = inputs_of(node)
            if variable is not None:
                memo[key] = ("leaf" if id(variable) in shared else "own", id(variable))
            elif depth > 400:
                memo[key] = ("deep", key)
            elif node_label(node) in VIEWS and len(kids_of) == 1:
                memo[key] = shape(kids_of[0], depth + 1)   # a weight's transpose is the weight
            else:
                memo[key] = "input"   # while it is walked: a cycle is none
                kids = [k for k in (shape(c, depth + 1) for c in kids_of) if k != "input"]
                if all(k[0] in ("own", "other") for k in kids):   # reaches no shared tensor
                    ids = frozenset().union(*({k[1]} if k[0] == "own" else k[1] for k in kids))
                    memo[key] = ("other", ids) if ids else "input"
                else:
                    memo[key] = (node_label(node), tuple(kids))
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


def fitted_too(graph: Graph, node: Any, target: Any) -> bool:
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


def kept_apart(graph: Graph, node: Any, sides: list[Any], stepped: set[int]) -> bool:
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
    return any(any(word in node_label(nodes[k]) for word in _BATCH_STATISTICS) for k in below)
