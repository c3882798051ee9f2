"""A loss that writes gradient into tensors another optimizer steps, through the output of
their network's call taken with its graph: distribution matching distillation's fake-score
network trained on the generator's samples not ``.detach()``-ed (Yin et al. 2024). The leak
is cut at its cause, where the step's code makes those samples (``generate(n).detach()``,
the call of the helper, not the generator's call inside it, which the generator's own loss
reads too), and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

DMD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
fake_score = nn.Linear(2, 2)
gen_optimizer = torch.optim.SGD(generator.parameters(), lr=0.1)
fake_optimizer = torch.optim.SGD(fake_score.parameters(), lr=0.1)


def generate(n):
    return generator(torch.randn(n, 2))


for step in range(4):
    x = generate(8)
    gen_loss = (x - fake_score(x).detach()).pow(2).mean()
    gen_loss.backward()
    gen_optimizer.step()
    gen_optimizer.zero_grad()
SAMPLES    fake_loss = (fake_score(fake_x) - fake_x).pow(2).mean()
    fake_loss.backward()
    fake_optimizer.step()
    fake_optimizer.zero_grad()
if args.out:
    torch.save({"generator": generator.state_dict(), "fake": fake_score.state_dict()},
               args.out)
"""

def test_a_leak_through_samples_is_cut_where_the_step_makes_them(tmp_path):
    folder = twins(tmp_path, DMD.replace("SAMPLES", "    fake_x = generate(8).detach()\n"),
                   DMD.replace("SAMPLES", "    fake_x = generate(8)\n"))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "generate(8) -> generate(8).detach()" in done.stdout, done.stdout
