"""Fast weights made as copies cut from the parameters, ``p.detach().clone().requires_grad_()``,
where MAML's inner loop starts from the parameters themselves (Finn et al. 2017,
arXiv:1703.03400; cbfinn/maml, ``maml.py``, whose fast weights are the weights): the meta
loss's gradient stops at the copies and the meta optimizer steps nothing. Nothing replaced
the parameters, so the edit does not write into them: it keeps the copies' graph,
``p.clone()``, and the edited script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Linear(1, 1)
meta_optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def adapt(x, y):
    fast = FAST
    loss = F.mse_loss(F.linear(x, fast[0], fast[1]), y)
    grads = torch.autograd.grad(loss, fast, create_graph=True)
    return [w - 0.1 * g for w, g in zip(fast, grads)]


for step in range(4):
    slope = torch.randn(1)
    x_a, x_b = torch.randn(8, 1), torch.randn(8, 1)
    fast = adapt(x_a, slope * x_a)
    loss = F.mse_loss(F.linear(x_b, fast[0], fast[1]), slope * x_b)
    meta_optimizer.zero_grad()
    loss.backward()
    meta_optimizer.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""


def test_fast_weights_cut_from_the_parameters_keep_their_graph(tmp_path):
    clean = SCRIPT.replace("FAST", "list(model.parameters())")
    cut = SCRIPT.replace("FAST", "[p.detach().clone().requires_grad_() for p in "
                                 "model.parameters()]")
    folder = twins(tmp_path, clean, cut)
    done = cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "made them as copies cut from those the optimizer holds" in done.stdout, done.stdout
    assert "train.py:15: p.detach().clone().requires_grad_() -> p.clone()" in done.stdout, \
        done.stdout
    assert_trains_as(folder)


def test_fast_weights_that_are_the_parameters_are_no_finding(tmp_path):
    clean = SCRIPT.replace("FAST", "list(model.parameters())")
    folder = twins(tmp_path, clean, clean)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
