"""A helper that trains the network it is handed with the optimizer it is handed, called for
two networks after a warm-up that steps each with its own optimizer, the second call's
optimizer copied from the first's line (DivideMix's
``train(epoch, net2, net1, optimizer1, ...)`` for ``optimizer2``): the first optimizer steps
nothing of the second network, whose gradients pile up. ``unstepped``: its edit hands the call
the optimizer that holds the second network, not a constructor rebuilt over it, and the fixed
script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

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
net1 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
net2 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer1 = torch.optim.SGD(net1.parameters(), lr=0.05, momentum=0.9)
optimizer2 = torch.optim.SGD(net2.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))


def train(net, peer, optimizer):
    with torch.no_grad():
        guess = peer(x).softmax(1)
    loss = F.cross_entropy(net(x), y) + F.mse_loss(net(x).softmax(1), guess)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for net, optimizer in ((net1, optimizer1), (net2, optimizer2)):
    optimizer.zero_grad()
    F.cross_entropy(net(x), y).backward()
    optimizer.step()
for epoch in range(4):
    train(net1, net2, optimizer1)
    train(net2, net1, SECOND)
if args.out:
    torch.save({"net1": net1.state_dict(), "net2": net2.state_dict()}, args.out)
"""


def test_the_call_is_handed_the_optimizer_that_holds_its_network(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("SECOND", "optimizer2"),
                   SCRIPT.replace("SECOND", "optimizer1"))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "train.py:32: optimizer1 -> optimizer2" in done.stdout
