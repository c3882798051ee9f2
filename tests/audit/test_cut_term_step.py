"""``audit_step``: a term of a loss made only of a trained network's output cut (under
``torch.no_grad()``, or ``.detach()``ed) and of data is a constant that trains nothing (a
second view's regulariser). The edit removes the cuts the term is made of: every one of
them (a KL from ``mu.detach()`` and ``logvar.detach()``), but not a target's beside it (real
features detached where the generated ones pass the generator too). A cut output compared
as a target, used as a weight, or scaled by zero is no such term."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
gen = nn.Linear(4, 4)
optimizer = torch.optim.SGD([*net.parameters(), *gen.parameters()], lr=0.1)
X1, X2 = torch.randn(16, 4), torch.randn(16, 4)


def spread(z: torch.Tensor) -> torch.Tensor:
    return F.relu(1 - torch.sqrt(z.var(0) + 1e-4)).mean()


def second_view_no_grad() -> torch.Tensor:
    z1 = net(X1)
    with torch.no_grad():
        z2 = net(X2)
    return F.mse_loss(z1, z2) + spread(z1) + spread(z2)


def statistics_detached() -> torch.Tensor:
    z = net(gen(X1))
    mu, logvar = z[:, :4], z[:, 4:]
    kl = -0.5 * (1 + logvar.detach() - mu.detach().pow(2) - logvar.detach().exp()).mean()
    return F.mse_loss(mu, X1) + kl


def generated_and_real_detached() -> torch.Tensor:
    fake, real = net(gen(X1)), net(X2)
    return F.mse_loss(fake, X2[:, :1].expand(-1, 8)) + F.l1_loss(fake.detach(), real.detach())


def target_only() -> torch.Tensor:
    z1 = net(X1)
    with torch.no_grad():
        z2 = net(X2)
    return F.mse_loss(z1, z2) + spread(z1)


def weighted_by_cut() -> torch.Tensor:
    per = F.mse_loss(net(X1), X2[:, :1].expand(-1, 8), reduction="none").mean(1)
    return (per * per.detach().softmax(0)).sum()


def scaled_by_zero() -> torch.Tensor:
    z = net(X1)
    return F.mse_loss(z, X2[:, :1].expand(-1, 8)) + 0.0 * spread(z.detach())


def test_a_second_views_term_under_no_grad_is_constant_and_its_call_leaves_the_block():
    (found,) = audit_step(second_view_no_grad, optimizer).constant_terms
    assert found.cut == "no_grad" and set(found.through) == {"net.0.weight", "net.0.bias",
                                                              "net.2.weight", "net.2.bias"}
    # the network's call is the block's one statement: the `with` goes, the call stays
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("    with torch.no_grad():\n        z2 = net(X2)\n",
                                    "    z2 = net(X2)\n")
    assert found.lines[0].text == "z2 = net(X2)"


def test_every_cut_a_term_is_made_of_is_removed():
    (found,) = audit_step(statistics_detached, optimizer).constant_terms
    assert sorted(e.old for e in found.edits) == ["logvar.detach()", "logvar.detach()",
                                                  "mu.detach()"]
    assert {e.new for e in found.edits} == {"logvar", "mu"}


def test_a_targets_cut_beside_the_terms_own_stays():
    (found,) = audit_step(generated_and_real_detached, optimizer).constant_terms
    assert [(e.old, e.new) for e in found.edits] == [("fake.detach()", "fake")]
    assert "gen.weight" in found.through


@pytest.mark.parametrize("step", [target_only, weighted_by_cut, scaled_by_zero],
                         ids=["target", "weight", "zero"])
def test_a_cut_output_compared_weighting_or_scaled_by_zero_is_no_constant_term(step):
    audit = audit_step(step, optimizer)
    assert audit.constant_terms == (), str(audit)
