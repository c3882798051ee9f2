"""Snapshots of the online network kept in a list (Averaged-DQN, Anschel et al. 2017: the
target is the mean of the K previous Q-networks), the list filled with the network itself,
``target_nets.append(q_net)``, for ``copy.deepcopy(q_net)``: from the first snapshot on the
target, read under no_grad through the loop's variable (``for net in target_nets``), is the
trained network. The ``aliased`` failure names the ``append``, and its edit copies the network
there; the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
target_nets = [copy.deepcopy(q_net)]
optimizer = torch.optim.SGD(q_net.parameters(), lr=0.1)
for step in range(6):
    s, s2, r = torch.randn(16, 3), torch.randn(16, 3), torch.randn(16)
    with torch.no_grad():
        q_next = torch.stack([net(s2) for net in target_nets]).mean(0)
        target = r + 0.9 * q_next.max(1).values
    loss = F.mse_loss(q_net(s).max(1).values, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 2 == 1:
        target_nets.append(SNAPSHOT)
if args.out:
    torch.save({"q_net": q_net.state_dict(),
                "targets": nn.ModuleList(target_nets).state_dict()}, args.out)
"""


def test_the_network_appended_to_its_snapshots_is_copied_there(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("SNAPSHOT", "copy.deepcopy(q_net)"),
                   SCRIPT.replace("SNAPSHOT", "q_net"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"], report["findings"]
    assert found[0]["at"][0] == "train.py:24: target_nets.append(q_net)"
    assert "put a copy of `q_net` there (train.py:24): copy.deepcopy(q_net)" in str(found[0])
    applied(folder, "aliased", "--watch", "1")
    assert "target_nets.append(copy.deepcopy(q_net))\n" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
