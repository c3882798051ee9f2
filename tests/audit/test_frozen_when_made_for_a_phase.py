"""A layer made for the second phase and frozen with the weights it should not be: BitFit
(Ben Zaken et al. 2022) pretrains a model, puts a new classifier on it, switches off every
weight except the biases and the classifier's, and builds a new optimizer. Leaving the
classifier out of what is switched back on (``trainable = ["bias"]``) keeps its weight at the
values it was made with: ``frozen``, with the weight switched on before the phase's loop, after
which the script trains as published. The published script, whose pretrained weights stay
frozen on purpose, is no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
model[2] = nn.Linear(8, 2)
trainable = ["bias", "2."]
for name, param in model.named_parameters():
    param.requires_grad = any(part in name for part in trainable)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
y2 = torch.randint(0, 2, (32,))
for step in range(3):
    loss = F.cross_entropy(model(x), y2)
    loss.backward()
    optimizer.step()
    model.zero_grad()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

HEAD_LEFT_FROZEN = PUBLISHED.replace('trainable = ["bias", "2."]', 'trainable = ["bias"]')


def test_a_new_layer_left_frozen_is_switched_on_before_its_phase(tmp_path):
    folder = twins(tmp_path, PUBLISHED, HEAD_LEFT_FROZEN)
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert "insert before it: model[2].weight.requires_grad_(True)" in done.stdout, done.stdout
