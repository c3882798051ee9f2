"""A loss of its own whose backward reaches only a network no optimizer holds: two
discriminators, each with its loss and backward, and the one optimizer meant for both built
over the first alone (the second left out of its argument). The second loss trains nothing, so
its network is what it is for: ``unstepped`` at the optimizer's line, not ``wasted`` work, with
the group that adds the network to the optimizer stepped after that backward; the fixed script
trains as the published one. A network below a trained one that no optimizer holds stays
``wasted``, a note."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, twins

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
first, second = nn.Linear(4, 1), nn.Linear(4, 1)
optimizer = torch.optim.Adam(PARAMS, lr=0.05, betas=(0.5, 0.999))
for step in range(4):
    a, b = torch.randn(16, 4), torch.randn(16, 4)
    optimizer.zero_grad()
    loss_first = F.softplus(-first(a)).mean()
    loss_first.backward()
    loss_second = F.softplus(second(b)).mean()
    loss_second.backward()
    optimizer.step()
if args.out:
    torch.save({"first": first.state_dict(), "second": second.state_dict()}, args.out)
"""

PUBLISHED = SCRIPT.replace("PARAMS", "[*first.parameters(), *second.parameters()]")
LEFT_OUT = SCRIPT.replace("PARAMS", "first.parameters()")
# a frozen feature net left out on purpose below a trained head: its gradient is wasted work
BELOW = LEFT_OUT.replace("loss_second = F.softplus(second(b)).mean()",
                         "loss_second = F.softplus(-first(second(b).expand(-1, 4))).mean()")


def test_the_network_a_loss_alone_trains_is_added_to_the_optimizer_stepped_after_it(tmp_path):
    folder = twins(tmp_path, PUBLISHED, LEFT_OUT)
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert 'optimizer.add_param_group({"params": second.parameters()})' in done.stdout, \
        done.stdout


def test_a_network_below_a_trained_one_is_still_wasted_work(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BELOW, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    kinds = {f["kind"] for f in report["findings"]}
    assert code == 0 and "wasted" in kinds and "unstepped" not in kinds, kinds


# SVRG (Johnson & Zhang 2013): a snapshot no optimizer holds, whose own loss's gradient the
# script reads to correct the live model's before the step; unread, it trains nothing
SNAPSHOT = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
snapshot = copy.deepcopy(model)
for step in range(4):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    snapshot.zero_grad()
    ((snapshot(x) - y) ** 2).mean().backward()
    optimizer.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    CORRECTION
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""
READ = ("for p, q in zip(model.parameters(), snapshot.parameters()):\n"
        "        p.grad -= 0.5 * q.grad")


@pytest.mark.parametrize("read", [True, False], ids=["read", "unread"])
def test_a_gradient_the_script_reads_itself_is_no_loss_that_trains_nothing(tmp_path, read):
    script = tmp_path / "train.py"
    script.write_text(SNAPSHOT.replace("CORRECTION", READ if read else "pass"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    kinds = {f["kind"] for f in report["findings"]}
    assert ("unstepped" in kinds) is not read and code == (0 if read else 1), report["findings"]
