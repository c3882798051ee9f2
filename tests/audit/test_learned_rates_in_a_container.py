"""A plain ``nn.ParameterList`` of learned inner learning rates, a module the script never
calls, left out of the meta-optimizer (Meta-SGD, Li et al. 2017): the outer loss trains them
through the adapted weights, and no optimizer steps them (``unstepped``). The edit adds the
container's parameters as a group, and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

META_SGD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
weight = nn.Parameter(torch.randn(3, 1))
holder = nn.Module()
holder.weight = weight
alpha = nn.ParameterList([nn.Parameter(torch.full((3, 1), 0.1))])
OPTIMIZER
x, y = torch.randn(6, 3), torch.randn(6, 1)
for step in range(4):
    inner = F.mse_loss(x[:3] @ weight, y[:3])
    grad, = torch.autograd.grad(inner, [weight], create_graph=True)
    adapted = weight - alpha[0] * grad
    outer = F.mse_loss(x[3:] @ adapted, y[3:])
    meta_optimizer.zero_grad()
    outer.backward()
    meta_optimizer.step()
if args.out:
    torch.save({"weight": weight.detach(), "alpha": alpha.state_dict()}, args.out)
"""



def test_learned_learning_rates_left_out_are_added_as_a_group(tmp_path):
    folder = twins(
        tmp_path, META_SGD.replace("OPTIMIZER", "meta_optimizer = torch.optim.Adam("
                                   "[weight, *alpha.parameters()], lr=0.01)"),
        META_SGD.replace("OPTIMIZER", "meta_optimizer = torch.optim.Adam([weight], lr=0.01)"))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "`alpha` gets gradient and no optimizer steps it" in done.stdout, done.stdout
    assert 'add_param_group({"params": list(alpha.parameters())})' in done.stdout
