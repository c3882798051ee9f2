"""A second phase that clears the first phase's optimizer, over a network frozen since
(score distillation's loop calling ``den_optimizer.zero_grad()`` beside the frozen denoiser,
Poole et al. 2022), where the generator's is meant: that clear clears nothing, and the
generator's gradient piles up (``stale``). The edit names the generator's optimizer in that
call, and the fixed script trains as the published one."""

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
denoiser = nn.Linear(2, 2)
den_optimizer = torch.optim.SGD(denoiser.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 2)
    den_loss = (denoiser(x + 0.1 * torch.randn(8, 2)) - x).pow(2).mean()
    den_optimizer.zero_grad()
    den_loss.backward()
    den_optimizer.step()
denoiser.requires_grad_(False)
generator = nn.Linear(3, 2)
gen_optimizer = torch.optim.SGD(generator.parameters(), lr=0.1)
for step in range(3):
    x = generator(torch.randn(8, 3))
    target = (x - (denoiser(x) - x)).detach()
    loss = 0.5 * (x - target).pow(2).sum(1).mean()
    CLEAR.zero_grad()
    loss.backward()
    gen_optimizer.step()
if args.out:
    torch.save({"denoiser": denoiser.state_dict(), "generator": generator.state_dict()},
               args.out)
"""


def test_the_clear_of_the_frozen_phase_names_the_trained_one(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CLEAR", "gen_optimizer"),
                   SCRIPT.replace("CLEAR", "den_optimizer"))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "train.py:24: den_optimizer -> gen_optimizer" in done.stdout, done.stdout
