"""An optimizer of a second phase built over the model the phase's network was copied from
(SimPO after SFT, Meng et al. 2024: ``policy = copy.deepcopy(sft_model)``, then
``AdamW(sft_model.parameters())``): the phase's loss trains the copy, which no optimizer
steps, and no backward reaches a tensor the optimizer holds since it was built. Adding the
copy to it would keep the mistake (its own tensors would stay dead): the edit builds it over
the copy, and the script then trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
base = nn.Linear(3, 2)
warmup = torch.optim.SGD(base.parameters(), lr=0.1)
for step in range(2):
    loss = base(torch.randn(8, 3)).pow(2).mean()
    warmup.zero_grad()
    loss.backward()
    warmup.step()
policy = copy.deepcopy(base)
OPTIMIZER
for step in range(3):
    loss = (policy(torch.randn(8, 3)) - 1.0).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"base": base.state_dict(), "policy": policy.state_dict()}, args.out)
"""


def test_the_optimizer_is_built_over_the_copy(tmp_path):
    folder = twins(tmp_path,
                   SCRIPT.replace("OPTIMIZER", "optimizer = torch.optim.SGD(policy.parameters(), "
                                               "lr=0.1)"),
                   SCRIPT.replace("OPTIMIZER", "optimizer = torch.optim.SGD(base.parameters(), "
                                               "lr=0.1)"))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "train.py:18: base.parameters() -> policy.parameters()" in done.stdout, done.stdout
