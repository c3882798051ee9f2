"""A target made once before the loop and held since with its graph: Memory Aware Synapses'
anchor (Aljundi et al. 2018), ``old_params = {n: p.clone() ...}`` after the first task,
cloned but not detached, read by every step of the second task's penalty
``importance * (p - old_params[n]) ** 2``. The ``target`` failure is at the line that made it
(and names the line that reads it), and its edit cuts it there, once for every step; the
fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

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
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x1, y1, x2, y2 = torch.randn(32, 3), torch.randn(32, 2), torch.randn(32, 3), torch.randn(32, 2)
for step in range(3):
    loss = F.mse_loss(net(x1), y1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
old_params = {n: ANCHOR for n, p in net.named_parameters()}
for step in range(4):
    penalty = 0.0
    for n, p in net.named_parameters():
        penalty = penalty + (p - old_params[n]).pow(2).sum()
    loss = F.mse_loss(net(x2), y2) + 10.0 * penalty
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""


def test_an_anchor_held_with_its_graph_is_cut_where_it_is_made(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("ANCHOR", "p.clone().detach()"),
                   SCRIPT.replace("ANCHOR", "p.clone()"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["target"], report["findings"]
    assert [a.split(": ")[0] for a in found[0]["at"]] == ["train.py:18", "train.py:22",
                                                          "train.py:25"], found[0]["at"]
    applied(folder, "target", "--watch", "1")
    assert "p.clone().detach() for n, p" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
