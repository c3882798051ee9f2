"""Tensors made after their optimizer was built: a second task's head, appended by a method
the script calls (``net.add_task()``) on the line after the optimizer for that task (PackNet,
Mallya & Lazebnik 2018, builds its optimizer once the new head is there). No optimizer steps
the head, and the edit adds its parameter group after the line that made it: at the
optimizer's own line the head does not exist yet. The edited script trains as the published
one."""

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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.heads = nn.ModuleList([nn.Linear(8, 3)])

    def add_task(self):
        self.heads.append(nn.Linear(8, 3))

    def forward(self, x, task):
        return self.heads[task](self.shared(x))


net = Net()
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    loss = F.cross_entropy(net(x, 0), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
SECOND
for step in range(3):
    loss = F.cross_entropy(net(x, 1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

BUILD = "optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)"
PUBLISHED = SCRIPT.replace("SECOND", f"net.add_task()\n{BUILD}")
BEFORE = SCRIPT.replace("SECOND", f"{BUILD}\nnet.add_task()")


def test_a_head_made_after_its_optimizer_gets_its_group_where_it_is_made(tmp_path):
    folder = twins(tmp_path, PUBLISHED, BEFORE)
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "train.py:35: insert before it: optimizer.add_param_group(" in done.stdout, \
        done.stdout
