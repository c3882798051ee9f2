"""Optimizers built by a comprehension, one over each element of a list, where a copy of the
line above walks the wrong list (``[Adam(q.parameters()) for q in qf1]`` for the second
critics, as in an ensemble of twin critics, SUNRISE's, Lee et al. 2021): the second critics'
loss trains tensors no optimizer steps, and each of those optimizers holds a first critic that
its own optimizer steps too. ``unstepped``; the edit has the comprehension walk the list that
holds them (``for q in qf2``), and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
qf1 = nn.ModuleList([nn.Linear(3, 1) for _ in range(2)])
qf2 = nn.ModuleList([nn.Linear(3, 1) for _ in range(2)])
qf1_optimizers = [torch.optim.Adam(q.parameters(), lr=0.01) for q in qf1]
BUILT
for step in range(3):
    for i in range(2):
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        qf1_loss = (qf1[i](x) - y).pow(2).mean()
        qf2_loss = (qf2[i](x) - y).pow(2).mean()
        qf1_optimizers[i].zero_grad()
        qf1_loss.backward()
        qf1_optimizers[i].step()
        qf2_optimizers[i].zero_grad()
        qf2_loss.backward()
        qf2_optimizers[i].step()
if args.out:
    torch.save({"qf1": qf1.state_dict(), "qf2": qf2.state_dict()}, args.out)
"""

PUBLISHED = "qf2_optimizers = [torch.optim.Adam(q.parameters(), lr=0.01) for q in qf2]\n"
BUG = "qf2_optimizers = [torch.optim.Adam(q.parameters(), lr=0.01) for q in qf1]\n"


def test_the_comprehension_walks_the_list_it_was_meant_for(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("BUILT\n", PUBLISHED),
                   SCRIPT.replace("BUILT\n", BUG))
    applied_and_trains(folder, "unstepped", "--watch", "1")
    assert PUBLISHED in (folder / "train.py").read_text(encoding="utf-8")
