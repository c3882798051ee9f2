"""A target made with the prediction's own graph, ``target = x - grad``, compared with ``x``
(distribution matching distillation's loss, Yin et al. 2024): the gradients through ``x``
and through ``target`` cancel exactly. Where the name is bound just for that comparison, the
cut goes where it is made (``target = (x - grad).detach()``), as the published code writes
it; where the script reads the name again, it goes at the comparison's operand."""

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
generator = nn.Linear(3, 2)
optimizer = torch.optim.SGD(generator.parameters(), lr=0.1)
for step in range(3):
    x = generator(torch.randn(8, 3))
    with torch.no_grad():
        grad = x - torch.tanh(x)
TARGET    loss = 0.5 * F.mse_loss(x, READ)
EXTRA    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"generator": generator.state_dict()}, args.out)
"""


def _script(target: str, read: str, extra: str = "") -> str:
    return SCRIPT.replace("TARGET", target).replace("READ", read).replace("EXTRA", extra)


def test_a_name_bound_for_the_comparison_is_cut_where_it_is_made(tmp_path):
    folder = twins(tmp_path, _script("    target = (x - grad).detach()\n", "target"),
                   _script("    target = x - grad\n", "target"))
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "train.py:16: x - grad -> (x - grad).detach()" in done.stdout, done.stdout


def test_a_name_read_again_is_cut_at_the_comparison(tmp_path):
    extra = "    print(target.mean().item())\n"
    folder = twins(tmp_path, _script("    target = x - grad\n", "target.detach()", extra),
                   _script("    target = x - grad\n", "target", extra))
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "train.py:17: target -> target.detach()" in done.stdout, done.stdout
