"""Terms of a loss that are constants: a scalar computed from a gradient that
``torch.autograd.grad`` took without ``create_graph=True``, added to a loss with a graph.

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.audit.findings import ConstantTerm
from toolkit.audit.rules.wanted import FirstOf, Option, Wanted
from toolkit.audit.truth.proof import KeywordAt
from toolkit.lens.backward_graph import ShortestPaths

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check"]

_FIX = ("take that gradient with create_graph=True, so that the penalty made from it is "
        "differentiated too (WGAN-GP's and R1's gradient penalties pass it)")


def check(step: RecordedStep) -> Found:
    """The rule: each sum of this call that added a constant made from a first-order gradient
    to a loss's graph, once per ``autograd.grad`` line and loss."""
    rec = step.rec
    found = []
    seen = set()
    for call, taken, added, names, node in rec.first_order_added:
        if call != rec.call:
            continue
        # what the differentiated values were computed from: what the penalty would train
        edges = [e for c, es, line in rec.first_order_calls
                 if c == call and line == taken for e in es]
        search = ShortestPaths(edges) if edges else None
        for loss, graph in step.graphs.items():
            if (taken, loss) in seen or node not in graph.search.nodes:
                continue
            seen.add((taken, loss))
            through = () if search is None else tuple(
                rec.names.name(t) for t in step.stepped[loss].values() if search.path_to(t))
            finding = ConstantTerm(loss=loss, tensors=names, through=through, taken=taken,
                                   added=added, fix=_FIX)
            places = () if taken is None else (KeywordAt(taken, "grad", "create_graph", "True"),)
            lines = () if taken is None else (taken,)
            found.append(Wanted(finding, FirstOf((Option(places, _FIX, lines),))))
    return {"constant_terms": found}
