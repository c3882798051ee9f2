"""Two targets a helper returns together, unpacked into two names on one line of the step
(DivideMix's co-guessing, Li et al. 2020: the sharpened guesses of the unlabelled batch and the
co-refined labels of the labelled one, computed under ``no_grad`` in the published code), each
read more than once: the audit names the two targets by the names the step binds them to and
cuts the helper's call, and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

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
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)


DECORATOR
def guess(x_labeled, labels, x_unlabeled):
    sharpened = net(x_unlabeled).softmax(1) ** 2
    refined = 0.5 * labels + 0.5 * net(x_labeled).softmax(1)
    return refined, sharpened / sharpened.sum(1, keepdim=True)


def update(x_labeled, labels, x_unlabeled):
    targets_x, targets_u = guess(x_labeled, labels, x_unlabeled)
    inputs = torch.cat([x_labeled, x_labeled + 0.1, x_unlabeled])
    all_targets = torch.cat([targets_x, targets_x, targets_u])
    loss = -(F.log_softmax(net(inputs), 1) * all_targets).sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for step in range(3):
    update(torch.randn(8, 4), F.one_hot(torch.randint(0, 3, (8,)), 3).float(),
           torch.randn(8, 4))
if args.out:
    torch.save({"net": net.state_dict()}, args.out)
"""


def test_targets_a_helper_returns_together_are_named_and_cut_at_its_call(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("DECORATOR", "@torch.no_grad()"),
                   SCRIPT.replace("DECORATOR\n", ""))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "target"]
    assert code == 1 and found, report["findings"]
    assert found[0]["at"][0].startswith("train.py:21: targets_x, targets_u = guess("), \
        found[0]["at"]
    assert {"targets_x", "targets_u"} <= set(found[0]["names"]), found[0]["names"]
    applied_and_trains(folder, "target", "--watch", "1")
