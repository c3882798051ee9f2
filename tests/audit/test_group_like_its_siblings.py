"""A parameter group left out of the optimizer's list, among groups the script gave settings of
its own (I-JEPA's ``init_opt``: a no-decay group per network, ``{"WD_exclude": True,
"weight_decay": 0}``, which its weight-decay schedule leaves alone): the group the edit adds
takes the settings of the script's group of the same kind (biases and norms), so that the
schedule treats it as the published script does, and the fixed script trains as it."""

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
encoder = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU())
predictor = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 4))


def decayed(module):
    return [p for p in module.parameters() if p.dim() > 1]


def not_decayed(module):
    return [p for p in module.parameters() if p.dim() <= 1]


groups = [
    {"params": decayed(encoder)},
    {"params": decayed(predictor)},
    {"params": not_decayed(encoder), "WD_exclude": True, "weight_decay": 0},
PREDICTOR]
optimizer = torch.optim.AdamW(groups, lr=1e-2)
x = torch.randn(32, 4)
for step in range(5):
    for group in optimizer.param_groups:
        if not group.get("WD_exclude"):
            group["weight_decay"] = 0.5 * (1 + step)
    loss = (predictor(encoder(x)) - x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "predictor": predictor.state_dict()}, args.out)
"""


def test_the_group_left_out_is_added_with_its_siblings_settings_and_trains_as_published(
        tmp_path):
    published = SCRIPT.replace(
        "PREDICTOR",
        '    {"params": not_decayed(predictor), "WD_exclude": True, "weight_decay": 0},\n')
    folder = twins(tmp_path, published, SCRIPT.replace("PREDICTOR", ""))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "'WD_exclude': True, 'weight_decay': 0}" in done.stdout
    # the group holds the tensors in another order than the published one's (the gradients
    # a record keeps by position differ): the weights they train are compared
