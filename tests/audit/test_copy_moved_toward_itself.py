"""An averaged copy bound to the network it averages (``ema = model`` for
``copy.deepcopy(model)``), kept for evaluation only: no loss reads it, but the update that moves
it toward the model after each step moves each tensor toward itself, so the saved average is
the model itself. Written as an in-place lerp under ``no_grad``, or as a ``.copy_`` of arithmetic
on ``state_dict()`` views (Tong et al.'s conditional flow matching examples average so), it is
``aliased`` at the assignment, whose deep copy trains as published. The copy made as published,
and a weight decay written by hand (a tensor moved toward itself under one name), are no
finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
ema = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))


def average(source, target, decay):
UPDATE


for step in range(4):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    average(model, ema, 0.9)
if args.out:
    torch.save({"model": model.state_dict(), "ema": ema.state_dict()}, args.out)
"""

LERP = """\
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters()):
            t.lerp_(s, 1 - decay)"""
STATE = """\
    source_dict, target_dict = source.state_dict(), target.state_dict()
    for key in source_dict:
        target_dict[key].data.copy_(
            target_dict[key].data * decay + source_dict[key].data * (1 - decay))"""
DECAY = """\
    with torch.no_grad():
        for s in source.parameters():
            s.add_(s, alpha=-0.01)"""


@pytest.mark.parametrize("update", [LERP, STATE], ids=["lerp", "state-dict-copy"])
def test_the_copy_bound_to_its_network_is_aliased_and_its_deep_copy_trains(tmp_path, update):
    published = SCRIPT.replace("UPDATE", update)
    bound = published.replace("ema = copy.deepcopy(model)", "ema = model")
    folder = twins(tmp_path, published, bound)
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "train.py:12: model -> copy.deepcopy(model)" in done.stdout, done.stdout


@pytest.mark.parametrize("update", [LERP, DECAY], ids=["published", "weight-decay-by-hand"])
def test_a_copy_or_one_name_moved_toward_itself_is_no_finding(tmp_path, update):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("UPDATE", update), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


REPTILE = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for outer in range(3):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for inner in range(2):
        x = torch.randn(8, 4)
        loss = F.mse_loss(model(x), x.sum(1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = model.state_dict()
    model.load_state_dict({k: before[k] + (after[k] - before[k]) * 0.5 for k in after})
"""


def test_an_outer_step_computed_from_the_live_weights_is_no_finding(tmp_path):
    # Reptile's outer step reads the weights after the inner loop as a live state_dict, with
    # gradients on, and writes the interpolation back: an update, not a restore or a copy
    script = tmp_path / "train.py"
    script.write_text(REPTILE, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
