"""Tensors an optimizer's call names one by one, frozen before it was built and never switched
back on: an echo state network (Jaeger 2001; stefanonardo/pytorch-esn) keeps its reservoir
fixed while a ridge regression fits the readout, then tunes the reservoir's input scale and
leaking rate by gradient, in a group of its own with its own learning rate. Freezing the whole
reservoir first (``esn.reservoir.requires_grad_(False)``) leaves the tensors that group names
with no gradient: ``frozen``, whose edit switches them on before the phase's loop, and the
script trains as published. An optimizer over a model's ``parameters()`` with part of the model
frozen (a linear probe) names nothing one by one, and is clean."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Reservoir(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w_in", torch.randn(6, 1))   # fixed, as a reservoir's are
        self.log_scale = nn.Parameter(torch.zeros(()))
        self.leak = nn.Parameter(torch.zeros(()))

    def forward(self, u):
        h, out = torch.zeros(6), []
        rate = torch.sigmoid(self.leak)
        for x in u:
            h = (1 - rate) * h + rate * torch.tanh(self.log_scale.exp() * self.w_in[:, 0] * x)
            out.append(h)
        return torch.stack(out)


reservoir, readout = Reservoir(), nn.Linear(6, 1)
FREEZE
u, y = torch.randn(12), torch.randn(12, 1)
optimizer = torch.optim.Adam(GROUPS)
for step in range(3):
    loss = (readout(reservoir(u)) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"reservoir": reservoir.state_dict(), "readout": readout.state_dict()}, args.out)
"""

NAMED = ('[{"params": [reservoir.log_scale, reservoir.leak], "lr": 0.05}, '
         '{"params": readout.parameters(), "lr": 0.01}]')
PUBLISHED = SCRIPT.replace("FREEZE\n", "").replace("GROUPS", NAMED)
FROZEN = SCRIPT.replace("FREEZE", "reservoir.requires_grad_(False)").replace("GROUPS", NAMED)
# a linear probe: the optimizer over every tensor, the reservoir frozen on purpose
PROBE = SCRIPT.replace("FREEZE", "reservoir.requires_grad_(False)").replace(
    "GROUPS", "[*reservoir.parameters(), *readout.parameters()], lr=0.01")


def test_tensors_named_one_by_one_and_frozen_are_frozen_and_the_edit_trains(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(FROZEN, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "frozen"]
    assert code == 1 and found, [f["message"] for f in report["findings"]]
    assert set(found[0]["names"]) == {"reservoir.log_scale", "reservoir.leak"}, found[0]
    (tmp_path / "fix").mkdir()
    applied_and_trains(twins(tmp_path / "fix", PUBLISHED, FROZEN), "frozen", "--watch", "1")


def test_a_probe_over_every_tensor_of_a_partly_frozen_model_is_clean(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PROBE, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    assert code == 0 and not failures(report), [f["message"] for f in report["findings"]]
