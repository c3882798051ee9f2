"""A phase that computes the features its loss reads as the first statement of a
``with torch.no_grad():`` block meant for a statistic after it (SNGP's last epoch: the random
features and the precision update in one block, Liu et al. 2020): the body below the features
gets no gradient. ``dead``: its edit moves that statement before the ``with``, where it runs
as it did, with gradients on, and the fixed script trains as the published one."""

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
body = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
head = nn.Linear(8, 2)
optimizer = torch.optim.Adam([*body.parameters(), *head.parameters()], lr=0.05)
x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
second_moment = torch.zeros(8, 8)
for step in range(4):
PHASE    loss = F.cross_entropy(head(features), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"body": body.state_dict(), "head": head.state_dict(),
                "second_moment": second_moment}, args.out)
"""

PUBLISHED = """\
    features = body(x)
    with torch.no_grad():
        second_moment += features.t() @ features
"""

BUG = """\
    with torch.no_grad():
        features = body(x)
        second_moment += features.t() @ features
"""


def test_the_first_statement_of_the_block_moves_before_it(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("PHASE", PUBLISHED),
                   SCRIPT.replace("PHASE", BUG))
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "train.py:16: insert before it: features = body(x)" in done.stdout
