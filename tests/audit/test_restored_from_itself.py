"""A restore from a snapshot that is no copy: the initial weights kept as
``net.state_dict()``, whose tensors share their storage with the parameters, and written back
into them (a lottery ticket's rewind, masked: ``p.copy_(initial[k] * mask)``; Tent's reset,
``load_state_dict`` of a state kept on the adapting module and taken by a helper). The snapshot
follows every step, so the restore writes the weights of now: ``aliased`` at the assignment
that took it, the copy taken there, and the fixed script trains as the published one. A state
dict read as a live view to update another network (an EMA), and a restore from a deep copy,
are no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

REWIND = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 2))
masks = {k: torch.ones_like(p) for k, p in net.named_parameters() if k.endswith("weight")}
x, y = torch.randn(32, 5), torch.randint(0, 2, (32,))


def rewind(model, state):
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(state[k] * masks[k] if k in masks else state[k])


initial = SNAPSHOT
for round_ in range(2):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.2)
    for step in range(3):
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for k, p in net.named_parameters():
        if k in masks:
            masks[k] = (p.detach().abs() > p.detach().abs().median()).float()
    rewind(net, initial)
if args.out:
    torch.save(net.state_dict(), args.out)
"""

RESET = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)


def keep(model):
    state = SNAPSHOT
    return state


class Adapted(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.state = keep(model)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    def forward(self, x):
        logits = self.model(x)
        loss = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def reset(self):
        self.model.load_state_dict(self.state)


adapted = Adapted(nn.Linear(4, 3))
for domain in range(2):
    adapted.reset()
    for step in range(3):
        adapted(torch.randn(16, 4) + domain)
if args.out:
    torch.save(adapted.model.state_dict(), args.out)
"""

# a live view of the model's state read to move an EMA copy: no restore, no finding
EMA = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
ema = copy.deepcopy(model).requires_grad_(False)
live, kept = model.state_dict(), ema.state_dict()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for k in kept:
            kept[k].mul_(0.9).add_(live[k], alpha=0.1)
"""


@pytest.mark.parametrize(("text", "snapshot", "copied"), [
    (REWIND, "net.state_dict()", "copy.deepcopy(net.state_dict())"),
    (RESET, "model.state_dict()", "copy.deepcopy(model.state_dict())")],
    ids=["rewind-masked", "reset-kept-by-a-helper"])
def test_a_restore_from_a_snapshot_that_is_no_copy_is_aliased_and_copied(
        tmp_path, text, snapshot, copied):
    folder = twins(tmp_path, text.replace("SNAPSHOT", copied),
                   text.replace("SNAPSHOT", snapshot))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert f"{snapshot} -> {copied}" in done.stdout, done.stdout


@pytest.mark.parametrize("text", [EMA,
                                  REWIND.replace("SNAPSHOT", "copy.deepcopy(net.state_dict())")],
                         ids=["live-view-for-an-ema", "restore-from-a-copy"])
def test_a_live_view_or_a_restore_from_a_copy_is_no_finding(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
