"""A network trained a generation at a time, each with a fresh optimizer, and put back to the
weights of the generation before when the new one loses (AlphaZero's arena: Silver et al.
2017, arXiv:1712.01815; suragnair/alpha-zero-general, Coach.learn, which reloads the previous
checkpoint into the network it goes on training). Put back whole, two normalisation layers of
one width land on the same values (their initial ones, or zeros), so that each looks moved along
the line to the other: neither is a tensor that trained since, both were written by the script,
and no loss trains a copy that follows another. The script is clean."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(6, 8), nn.BatchNorm1d(8)
        self.fc2, self.bn2 = nn.Linear(8, 8), nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(F.relu(self.bn2(self.fc2(F.relu(self.bn1(self.fc1(x)))))))


def train(net, x, y):
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(3):
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


net = Net()
previous = copy.deepcopy(net)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
for generation in range(3):
    previous.load_state_dict(net.state_dict())
    train(net, x, y)
    if generation % 2 == 0:   # the new generation lost: back to the one before
        net.load_state_dict(previous.state_dict())
"""


def test_a_generation_put_back_whole_is_no_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


def test_the_gradient_the_last_generation_stepped_is_not_wasted(tmp_path):
    """The last gradient of a generation, stepped by its optimizer, is still in ``.grad`` when
    the next generation's fresh optimizer takes the name: used, not work done in vain."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    _, report = audit(tmp_path, script, "--watch", "1")
    assert not [f for f in report["findings"] if f["kind"] in ("wasted", "unstepped")], \
        report["findings"]
