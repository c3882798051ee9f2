"""A derivative of the trained network taken without ``create_graph=True`` inside a residual the
loss squares: a physics-informed loss (Raissi, Perdikaris & Karniadakis 2019, J. Comput. Phys.
378, the Burgers' residual ``u_t + u * u_x - nu * u_xx``). The derivative has no graph, so the
residual holds it as a fixed offset: the loss keeps its value and its gradient misses that
term. A ``constant_term`` at the ``autograd.grad`` call, whose edit passes
``create_graph=True``. The derivative of a network the loss does not train (a teacher's, in
Sobolev training: Czarnecki et al. 2017) is a target there, and a residual whose derivatives
all keep their graph is clean."""

from __future__ import annotations

import pytest
import torch
from script_audit import applied_and_trains, twins
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
net, teacher = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)), nn.Linear(2, 1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
T, X = torch.rand(16, 1), torch.rand(16, 1)


def burgers() -> torch.Tensor:
    t, x = T.clone().requires_grad_(True), X.clone().requires_grad_(True)
    u = net(torch.cat([t, x], 1))
    ones = torch.ones_like(u)
    u_t = torch.autograd.grad(u, t, ones, retain_graph=True, create_graph=True)[0]
    u_x = torch.autograd.grad(u, x, ones, retain_graph=True, create_graph=True)[0]
    return ((u_t + u * u_x) ** 2).mean()


def sobolev() -> torch.Tensor:
    x = X.clone().requires_grad_(True)
    inputs = torch.cat([T, x], 1)
    target = torch.autograd.grad(teacher(inputs).sum(), x)[0]   # the teacher's: a target
    student = torch.autograd.grad(net(inputs).sum(), x, create_graph=True)[0]
    return ((student - target) * (student - target)).mean()


@pytest.mark.parametrize("square", ["pow", "product"])
def test_a_derivative_without_its_graph_inside_a_squared_residual_is_a_constant(square):
    def step() -> torch.Tensor:
        t, x = T.clone().requires_grad_(True), X.clone().requires_grad_(True)
        u = net(torch.cat([t, x], 1))
        u_t = torch.autograd.grad(u, t, torch.ones_like(u), retain_graph=True)[0]
        u_x = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
        residual = u_t + u * u_x
        return (residual ** 2 if square == "pow" else residual * residual).mean()
    (found,) = audit_step(step, optimizer).constant_terms
    # the derivative was taken through all four of the network's tensors
    assert found.tensors == ("u_t",) and len(found.through) == 4
    assert found.taken is not None and found.taken.number == step.__code__.co_firstlineno + 3


def test_the_residual_with_every_derivative_s_graph_is_clean():
    assert not audit_step(burgers, optimizer).constant_terms


def test_a_derivative_of_a_network_the_loss_does_not_train_is_a_target():
    assert not audit_step(sobolev, optimizer).constant_terms


SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for it in range(6):
    t = torch.rand(32, 1, requires_grad=True)
    x = torch.rand(32, 1, requires_grad=True)
    u = net(torch.cat([t, x], 1))
    u_t = torch.autograd.grad(u, t, torch.ones_like(u), retain_graph=True, GRAPH)[0]
    u_x = torch.autograd.grad(u, x, torch.ones_like(u), retain_graph=True, create_graph=True)[0]
    loss = torch.mean((u_t + u * u_x) ** 2) + torch.mean((net(torch.zeros(4, 2)) - 1) ** 2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""


def test_the_edit_keeps_the_derivative_s_graph_and_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("GRAPH", "create_graph=True"),
                   SCRIPT.replace(", GRAPH", ""))
    done = applied_and_trains(folder, "constant_term", "--watch", "1")
    assert "train.py:15" in done.stdout
