"""A term of the loss a module computes under ``torch.no_grad()`` in its forward and returns,
which the step adds to the loss: a mixture of experts' load-balancing loss (Shazeer et al.
2017, arXiv:1701.06538, the importance's squared coefficient of variation; Fedus et al. 2021,
arXiv:2101.03961) computed without gradient is a constant, and the router gets no balancing
gradient. A module's own stop-gradient summed inside that module is its method (SuperLoss's
regulariser, ``tests/audit/test_cut_in_the_middle_of_a_forward.py``); summed by the step, it is
a constant term, whose edit takes the block away."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

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


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 3)
        self.experts = nn.ModuleList(nn.Linear(4, 1) for _ in range(3))

    def forward(self, x):
        gates = F.softmax(self.gate(x), dim=1)
BALANCE
        y = sum(gates[:, e:e + 1] * expert(x) for e, expert in enumerate(self.experts))
        return y, balance


model = Experts()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(16, 4)
    target = x.sum(1, keepdim=True)
    y, balance = model(x)
    loss = F.mse_loss(y, target) + 0.1 * balance
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""

WITH = ("        importance = gates.sum(0)\n"
        "        balance = importance.var() / importance.mean() ** 2")
CUT = ("        with torch.no_grad():\n"
       "            importance = gates.sum(0)\n"
       "            balance = importance.var() / importance.mean() ** 2")


def test_a_balancing_loss_returned_with_its_graph_is_no_finding(tmp_path):
    script = SCRIPT.replace("BALANCE", WITH)
    folder = twins(tmp_path, script, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout


def test_a_balancing_loss_computed_under_no_grad_in_the_forward_is_a_constant_term(tmp_path):
    clean = SCRIPT.replace("BALANCE", WITH)
    folder = twins(tmp_path, clean, SCRIPT.replace("BALANCE", CUT))
    done = cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    constant_term: `loss` adds a term (train.py:33), made only of a network's " \
        "output computed under torch.no_grad() at train.py:20" in done.stdout, done.stdout
    assert (folder / "train.py").read_text(encoding="utf-8") == clean
