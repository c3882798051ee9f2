"""Two cuts keep a generator from the losses of one iteration: the discriminator's step
detaches the fakes (as published), and the generator's step augments its fakes under
``no_grad`` through a helper (DiffAugment, Zhao et al. 2020, with the augmentation of the
generator's step put in a ``with torch.no_grad():`` block by mistake). The generator's
optimizer steps after the generator's loss: the cut in that loss's forward is the one that
keeps it dead, not the discriminator's older one. The ``dead`` failure is at the block's
statement, and its edit takes the block away; the fixed script trains as the published
one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


def augment(x):
    return x + 0.1 * torch.randn_like(x)


generator, discriminator = nn.Linear(2, 3), nn.Linear(3, 1)
g_optimizer = torch.optim.SGD(generator.parameters(), lr=0.1)
d_optimizer = torch.optim.SGD(discriminator.parameters(), lr=0.1)
real = torch.randn(16, 3)
for step in range(3):
    g_optimizer.zero_grad()
    d_optimizer.zero_grad()
    fake = generator(torch.randn(16, 2)).detach()
    d_loss = F.relu(1 - discriminator(augment(real))).mean() + \\
        F.relu(1 + discriminator(augment(fake))).mean()
    d_loss.backward()
    d_optimizer.step()
    fake = generator(torch.randn(16, 2))
AUGMENT
    g_loss = -discriminator(fake_aug).mean()
    g_loss.backward()
    g_optimizer.step()
if args.out:
    torch.save({"g": generator.state_dict(), "d": discriminator.state_dict()}, args.out)
"""


def test_the_cut_of_the_steps_own_loss_is_the_dead_ones(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("AUGMENT", "    fake_aug = augment(fake)"),
                   SCRIPT.replace("AUGMENT", "    with torch.no_grad():\n"
                                             "        fake_aug = augment(fake)"))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "dead"]
    assert code == 1 and found, report["findings"]
    assert found[0]["at"][0] == "train.py:30: fake_aug = augment(fake)", found[0]["at"]
    applied_and_trains(folder, "dead", "--watch", "1")
