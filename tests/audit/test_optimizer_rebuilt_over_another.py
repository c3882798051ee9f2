"""An optimizer built again for a new phase over the wrong network: ES-RNN's refit on the full
history (Smyl 2020; kdgutier/esrnn_torch ``ESRNN.fit`` builds one Adam over the per-series
smoothing parameters and one over the RNN) rebuilds both optimizers, the smoothing one copied
from the RNN's line with its argument left as it was. The RNN's tensors are then stepped twice
with one gradient, and the smoothing parameters, which the loss trains, by nothing. The tensors
stepped twice are one ``shared`` finding; the ``unstepped`` one names the rebuilt optimizer's
line, whose edit builds it over what the same name held before, and trains as the published
script."""

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


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.level = nn.Parameter(torch.ones(4))
        self.rnn = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))

    def forward(self, y):
        return self.rnn(y / self.level) * self.level


def train(steps, level_optimizer, rnn_optimizer):
    for _ in range(steps):
        history, future = torch.rand(16, 4) + 1, torch.rand(16, 4) + 1
        loss = (model(history) - future).abs().mean()
        level_optimizer.zero_grad()
        rnn_optimizer.zero_grad()
        loss.backward()
        rnn_optimizer.step()
        level_optimizer.step()


model = Model()
level_optimizer = torch.optim.Adam([model.level], lr=1e-2)
rnn_optimizer = torch.optim.Adam(model.rnn.parameters(), lr=1e-2)
train(3, level_optimizer, rnn_optimizer)
level_optimizer = torch.optim.Adam(REBUILT, lr=5e-3)
rnn_optimizer = torch.optim.Adam(model.rnn.parameters(), lr=5e-3)
train(3, level_optimizer, rnn_optimizer)
if args.out:
    torch.save(model.state_dict(), args.out)
"""

PUBLISHED = SCRIPT.replace("REBUILT", "[model.level]")
COPIED = SCRIPT.replace("REBUILT", "model.rnn.parameters()")


def test_the_tensors_stepped_twice_are_one_finding_and_the_rebuilt_line_is_named(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(COPIED, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    shared = [f for f in failures(report) if f["kind"] == "shared"]
    unstepped = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and len(shared) == 1 and len(shared[0]["tensors"]) == 4, \
        [f["message"] for f in failures(report)]
    line = COPIED.splitlines().index(
        "level_optimizer = torch.optim.Adam(model.rnn.parameters(), lr=5e-3)") + 1
    assert len(unstepped) == 1 and unstepped[0]["at"][0].startswith(f"train.py:{line}:"), \
        [f["at"] for f in unstepped]


def test_its_edit_builds_it_over_what_its_name_held_and_trains_as_published(tmp_path):
    folder = twins(tmp_path, PUBLISHED, COPIED)
    applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "Adam(model.rnn.parameters(), lr=5e-3)" in (folder / "train.py").read_text()
