"""An optimizer class the script writes itself (K-FAC's, Wide & Deep's FTRL, a momentum SGD with
settings of its own), whose ``__init__`` calls ``super().__init__``: the optimizer is built where
the script calls the class, not inside the class. A predictor left out of it is ``unstepped``
at the line that builds it, and the group the edit adds there (not inside ``__init__``, where it
would run before ``self`` holds any group) trains as the published script."""

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


class Momentum(torch.optim.SGD):
    def __init__(self, params, lr):
        super().__init__(params, lr=lr, momentum=0.9)


enc, pred = nn.Linear(3, 4), nn.Linear(4, 2)
optimizer = Momentum(PARAMS, lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 2)
for step in range(3):
    loss = (pred(enc(x)) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"enc": enc.state_dict(), "pred": pred.state_dict()}, args.out)
"""
PUBLISHED = "[*enc.parameters(), *pred.parameters()]"


def test_a_predictor_left_out_is_named_where_the_script_builds_the_optimizer(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("PARAMS", "enc.parameters()"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], found
    assert found[0]["at"][0].startswith("train.py:17: optimizer = Momentum("), found[0]["at"]


def test_the_group_added_where_it_is_built_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("PARAMS", PUBLISHED),
                   SCRIPT.replace("PARAMS", "enc.parameters()"))
    applied_and_trains(folder, "unstepped", "--watch", "1")
