"""A target network synced by rebinding its tensors' storage (``tp.data = p.data``) where the
values were to be copied (``target.load_state_dict(online.state_dict())``, as DQN's target is
refreshed in pytorch/tutorials intermediate_source/reinforcement_q_learning.py): from the first
sync on, the target's tensors are other objects holding the online network's storage, so the
target moves with every step. The two are one network read two ways (``aliased``); the edit
copies the values (``tp.data.copy_(p.data)``) and the fixed script trains as the published one.
A sync that copies (``.clone()``) is no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
target_net = copy.deepcopy(q_net)
optimizer = torch.optim.SGD(q_net.parameters(), lr=0.1)


def sync(target, online):
    SYNC


for step in range(8):
    s, s2, r = torch.randn(16, 4), torch.randn(16, 4), torch.randn(16)
    a = torch.randint(0, 2, (16,))
    with torch.no_grad():
        y = r + 0.9 * target_net(s2).max(1).values
    q = q_net(s).gather(1, a[:, None]).squeeze(1)
    loss = ((q - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 3 == 2:
        sync(target_net, q_net)
if args.out:
    torch.save({"q": q_net.state_dict(), "target": target_net.state_dict()}, args.out)
"""

PUBLISHED = "target.load_state_dict(online.state_dict())"
REBOUND = "for tp, p in zip(target.parameters(), online.parameters()):\n        tp.data = p.data"


def test_a_target_rebound_to_the_online_storage_is_aliased_and_its_values_copied(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("SYNC", PUBLISHED), SCRIPT.replace("SYNC", REBOUND))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "tp.data = p.data -> tp.data.copy_(p.data)" in done.stdout, done.stdout
    assert "tp.data.copy_(p.data)" in (folder / "train.py").read_text()


@pytest.mark.parametrize(("sync", "found"), [
    (REBOUND, True),
    (PUBLISHED, False),
    (REBOUND.replace("= p.data", "= p.data.clone()"), False),
], ids=["rebound", "published", "cloned"])
def test_only_a_storage_shared_with_the_online_network_is_a_failure(tmp_path, sync, found):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.replace("SYNC", sync), encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    aliased = [f for f in failures(report) if f["kind"] == "aliased"]
    assert bool(aliased) == found, [f["message"] for f in failures(report)]
    assert (code == 1) == found, [f["message"] for f in failures(report)]
