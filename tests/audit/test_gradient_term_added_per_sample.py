"""A term made per sample from a gradient ``torch.autograd.grad`` took without
``create_graph=True``, added element for element to another per-sample term before the loss
averages them (sliced score matching's trace term ``v . (d(v . s)/dx)``, Song et al. 2019):
a constant that trains nothing. ``constant_term``, naming the gradient (``jvp``): its edit
passes ``create_graph=True``, and the fixed script trains as the published one. A gradient added to an input (a perturbation,
read by the network) is no term and stays no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
energy = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(energy.parameters(), lr=0.01)
data = torch.randn(64, 2)
for step in range(4):
    x = data.clone().requires_grad_(True)
    v = torch.randn_like(x)
    score = torch.autograd.grad(-energy(x).sum(), x, create_graph=True)[0]
    score_v = (score * v).sum(-1)
    jvp = torch.autograd.grad(score_v.sum(), x, KEYWORD)[0]
    loss = (0.5 * score_v.pow(2) + (v * jvp).sum(-1)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(energy.state_dict(), args.out)
"""

PERTURBED = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 2), torch.randn(32, 1)
for step in range(3):
    x_adv = x.clone().requires_grad_(True)
    grad = torch.autograd.grad((model(x_adv) - y).pow(2).mean(), x_adv)[0]
    x_adv = x_adv + 0.1 * grad.sign()
    loss = (model(x_adv) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_per_sample_term_of_a_first_order_gradient_gets_its_graph(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("KEYWORD", "create_graph=True"),
                   SCRIPT.replace("KEYWORD", "retain_graph=True"))
    done = applied_and_trains(folder, "constant_term", "--watch", "1")
    assert "create_graph=True" in done.stdout
    assert "tensors: jvp" in done.stdout   # the gradient the term is made from, by its name


def test_a_gradient_added_to_an_input_is_no_term(tmp_path):
    path = tmp_path / "perturbed.py"
    path.write_text(PERTURBED)
    code, report = audit(tmp_path, path, "--watch", "1")
    assert (code, failures(report)) == (0, [])
