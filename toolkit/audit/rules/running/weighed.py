"""Cut values a prediction is made of: tensors cut off from a loss that compares a prediction
with data, whose cut output the prediction itself reads (weighs, or feeds to an operation
with trained operands) below the comparison, are part of the prediction, not a target.

A target meets the prediction only in the comparison: ``F.mse_loss(q, r + gamma * q_next)``,
a teacher's soft labels, a key encoder's keys (each read by the comparison itself, or added to
one of its sides, as a Bellman residual written ``(q - gamma * q_next - r) ** 2`` adds it). A
mixture of experts (Jacobs, Jordan, Nowlan and Hinton 1991) weighs the experts' outputs by a
gate into the prediction, ``pred = (weights.unsqueeze(-1) * outs).sum(1)``, which the loss
compares with the data: with the experts run under ``no_grad``, only the gate trains, and the
experts' outputs are the prediction's, not a target beside it.

Only comparisons with data are read (a loss function of two inputs, or a difference under an
even function, whose other side carries no graph): where both sides carry one, which side is
the prediction is the target rule's question; a cross-entropy with class labels (a contrastive
loss over cut keys) compares no two values."""

from __future__ import annotations

import torch

from toolkit.audit.record.backward import Graph, read_graph
from toolkit.audit.rules.constant import SUMMING, cut_behind
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.targets.comparisons import COMPARE, EVEN
from toolkit.audit.truth.labels import VIEWS
from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import inputs_of

__all__ = ["note", "weighed"]

#: what adds a value to a side of a comparison: a target's term, not the prediction's own
_ADDING = frozenset({"Add", "Sub", "Rsub", "Neg"}) | VIEWS

#: at most this many nodes of a loss's head are walked
_MOST = 64


def _predictions(root: object) -> list[object]:
    """The prediction side of each comparison with data in the head of the loss ``root``:
    the one input with a graph of a loss function of two inputs, or of a difference under an
    even function; the head is walked through sums, means, signs, views and constant
    factors (products with one input that carries a graph)."""
    out: list[object] = []
    todo: list[tuple[object, bool]] = [(root, False)]
    seen: set[tuple[int, bool]] = set()
    while todo and len(seen) < _MOST:
        node, distance = todo.pop()
        if (id(node), distance) in seen:
            continue
        seen.add((id(node), distance))
        label, below = node_label(node), inputs_of(node)
        if (label in COMPARE or (label == "Sub" and distance)) and len(below) == 1:
            out.append(below[0])
        elif label in EVEN and len(below) == 1:
            todo.append((below[0], True))
        elif label in SUMMING or (label in ("Mul", "Div") and len(below) == 1):
            todo.extend((n, distance) for n in below)
    return out


def _added(prediction: object) -> set[int]:
    """The nodes that add terms to ``prediction``: it, and below it through sums,
    differences, signs and views (where a value added is a target's term)."""
    out: set[int] = set()
    todo = [prediction]
    while todo and len(out) < _MOST:
        node = todo.pop()
        if id(node) in out or node_label(node) not in _ADDING:
            continue
        out.add(id(node))
        todo.extend(inputs_of(node))
    return out


def note(w: WatchState, tensors: list[torch.Tensor], graph: Graph) -> None:
    """At an audited ``backward()`` of one loss: the tensors behind each cut value that an
    operation below the prediction side of a comparison with data read, other than by adding
    it to that side, kept by ``id`` with the iteration (:func:`weighed`)."""
    rec = w.staged.rec
    if rec is None or len(tensors) != 1 or tensors[0].grad_fn is None:
        return
    reads = [(node, cuts) for call, cuts, _, _, node in rec.cut_read
             if call == rec.call and node in graph.nodes]
    if not reads:
        return
    for prediction in _predictions(tensors[0].grad_fn):
        below = read_graph([prediction]).nodes
        added = _added(prediction)
        for node, cuts in reads:
            if node in below and node not in added:
                for cut in cuts:
                    w.weighed_cuts.update(dict.fromkeys(cut_behind(cut), w.iteration))


def weighed(w: WatchState, p: torch.Tensor) -> bool:
    """Whether an audited ``backward()`` of this iteration read a cut output of ``p`` as a
    part of its prediction (:func:`note`)."""
    return w.weighed_cuts.get(id(p)) == w.iteration
