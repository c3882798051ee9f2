"""A network left out of the optimizer whose loss has a term of its own: a latent ODE's
recognition network (Chen et al. 2018, arXiv:1806.07366; rtqichen/torchdiffeq,
examples/latent_ode.py, whose Adam holds the ODE function, the recognition network and the
decoder) left out of the list the optimizer is built over. The trained dynamics read its output,
so it lies below every stepped tensor, as a backbone under a trained head does; but the ELBO's KL
term reaches it and nothing an optimizer steps: that term trains it alone, so it is meant to
train. ``unstepped``, at the optimizer and the list it is built over; the group the edit adds
trains as the published script. A backbone under a trained head with no term of its own stays
wasted work (tests/audit/test_optimizer_left_unused.py)."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
rec, func, dec = nn.Linear(6, 4), nn.Linear(2, 2), nn.Linear(2, 6)
params = PARAMS
optimizer = torch.optim.Adam(params, lr=1e-2)
x = torch.randn(16, 6)
for step in range(3):
    mean, log_var = rec(x).chunk(2, dim=1)
    z = mean + torch.randn_like(mean) * torch.exp(0.5 * log_var)
    for _ in range(3):   # Euler steps of the latent dynamics
        z = z + 0.1 * torch.tanh(func(z))
    kl = 0.5 * (mean.pow(2) + log_var.exp() - log_var - 1).sum(1)
    loss = torch.mean((dec(z) - x).pow(2).sum(1) + kl)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"rec": rec.state_dict(), "func": func.state_dict(), "dec": dec.state_dict()},
               args.out)
"""
PUBLISHED = "list(rec.parameters()) + list(func.parameters()) + list(dec.parameters())"
LEFT_OUT = "list(func.parameters()) + list(dec.parameters())"


def test_a_network_with_a_term_of_its_own_left_out_is_unstepped(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("PARAMS", LEFT_OUT), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], found
    assert set(found[0]["names"]) == {"rec.weight", "rec.bias"}
    assert found[0]["at"][0].startswith("train.py:11: optimizer = ")


def test_the_group_it_adds_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("PARAMS", PUBLISHED),
                   SCRIPT.replace("PARAMS", LEFT_OUT))
    applied_and_trains(folder, "unstepped", "--watch", "1")
