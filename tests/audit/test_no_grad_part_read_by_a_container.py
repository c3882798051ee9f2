"""A learnt part of a forward computed under ``no_grad`` whose output reaches the rest of the
network only through values made from it (``torch.cat([x, embed])``) and a container's layers
(an ``nn.Sequential``): the layer that reads it trains, so the part is on the prediction's path,
and its tensors no loss reaches are ``dead`` (not a target's network held for nothing). The
edit takes the part's line out of the block, and the script trains as the published one, whose
block holds only the fixed features."""

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


class Conditioned(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("freqs", torch.randn(4))
        self.proj = nn.Linear(8, 6)
        self.net = nn.Sequential(nn.Linear(2 + 6, 16), nn.SiLU(), nn.Linear(16, 2))

    def embed(self, level):
        with torch.no_grad():
            phases = level[:, None] * self.freqs
            features = torch.cat([phases.sin(), phases.cos()], dim=1)
PROJECT

    def forward(self, x, level):
        return self.net(torch.cat([x, self.embed(level)], dim=1))


model = Conditioned()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(4):
    x, level = torch.randn(16, 2), torch.rand(16)
    loss = F.mse_loss(model(x, level), x * level[:, None])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

PUBLISHED = SCRIPT.replace("PROJECT", "        return F.silu(self.proj(features))")
INSIDE = SCRIPT.replace("PROJECT", "            return F.silu(self.proj(features))")


def test_the_part_read_through_a_container_is_dead_and_moved_out_of_the_block(tmp_path):
    folder = twins(tmp_path, PUBLISHED, INSIDE)
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "model.proj.weight" in done.stdout, done.stdout
