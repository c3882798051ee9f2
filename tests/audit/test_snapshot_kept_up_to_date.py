"""A snapshot taken once as a copy, then kept up to date in the loop as a view: synaptic
intelligence (Zenke et al. 2017) sums ``-g * (p - p_old)`` over the steps and sets
``p_old[n] = p.detach().clone()`` after each; with ``p.detach()`` the snapshot shares the
weight's storage and every later difference is zero. The assignment to fix is the loop's, not
the first (which already copies): ``aliased`` at that line, whose edit trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
W = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
p_old = {n: p.detach().clone() for n, p in model.named_parameters()}
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for n, p in model.named_parameters():
        W[n] += -p.grad * (p.detach() - p_old[n])
        p_old[n] = p.detach().clone()
omega = {n: W[n].clamp(min=0) for n in W}
if args.out:
    torch.save({**model.state_dict(), **{f"omega.{n}": v for n, v in omega.items()}}, args.out)
"""

VIEW = PUBLISHED.replace("p_old[n] = p.detach().clone()", "p_old[n] = p.detach()")


def test_the_loops_view_is_copied_where_it_is_kept(tmp_path):
    folder = twins(tmp_path, PUBLISHED, VIEW)
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "train.py:22: p.detach() -> p.detach().clone()" in done.stdout, done.stdout
