"""How :func:`~toolkit.audit.audit_step` reports a constant term (a gradient penalty taken
without ``create_graph=True``): the ``CONST`` block of ``str()``, the group in ``to_dict()``,
its kind among :attr:`StepAudit.findings`, and the edit that writes ``create_graph=True``. The
finding's principle is judged in ``test_principle_first_order_term.py``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step
from toolkit.audit.kinds import Kind


def _audit(create_graph: bool, weight: bool = False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))

    def step():
        xx = x.clone().requires_grad_(True)
        out = model(xx)
        ce = F.cross_entropy(out, y)
        grad, = torch.autograd.grad(out.sum(), xx, create_graph=create_graph, retain_graph=True)
        penalty = grad.pow(2).sum()
        return ce * penalty if weight else ce + 0.1 * penalty

    return audit_step(step, opt)


def test_the_report_names_the_term_the_call_and_the_tensors_it_was_taken_through():
    audit = _audit(create_graph=False)
    (found,) = audit.constant_terms
    assert found.tensors == ("penalty",)
    assert found.through == ("model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias")
    assert [kind for kind, _ in audit.findings] == [Kind.CONSTANT_TERM]
    text = str(audit)
    assert text.startswith("audit_step: 1 constant term")
    assert "CONST   loss 'loss' adds penalty" in text and "without create_graph=True" in text
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("create_graph", "True")
    assert list(audit.to_dict()["constant_terms"][0]["tensors"]) == ["penalty"]


def test_a_penalty_with_its_graph_or_a_gradient_as_a_weight_is_no_term():
    assert _audit(create_graph=True).ok
    # a constant that scales the loss scales its gradient: a weight, not a term
    assert _audit(create_graph=False, weight=True).constant_terms == ()
