"""An optimizer whose groups are filtered from a list of another network's tensors: prefix-tuning
(Li & Liang 2021, arXiv:2101.00190; XiangLi1999/PrefixTuning, gpt2/trainer_prefix.py, whose
AdamW takes a weight-decay group and a no-decay group filtered by name from the prefix model's
``named_parameters()``) with the list made from the frozen language model's tensors instead.
``unstepped`` at the optimizer and at the line that made the list; the edit writes the prefix
for the frozen model where the list reads it, keeping the two groups and their decay, after
which the script trains as published (a replaced argument would drop the groups)."""

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
lm = nn.Linear(4, 4).requires_grad_(False)
prefix = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
named = [(n, p) for n, p in NETWORK.named_parameters() if p.requires_grad]
optimizer = torch.optim.AdamW([
    {"params": [p for n, p in named if "bias" not in n], "weight_decay": 0.1},
    {"params": [p for n, p in named if "bias" in n], "weight_decay": 0.0},
], lr=1e-2)
x, y = torch.randn(8, 4), torch.randn(8, 4)
for step in range(3):
    loss = F.mse_loss(lm(x + prefix(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(prefix.state_dict(), args.out)
"""


def test_groups_filtered_from_the_wrong_network_are_unstepped_at_the_list(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("NETWORK", "lm"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], found
    assert found[0]["at"][0].startswith("train.py:13: optimizer = ")
    assert found[0]["at"][1].startswith("train.py:12: named = ")


def test_the_network_swapped_where_the_list_reads_it_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("NETWORK", "prefix"),
                   SCRIPT.replace("NETWORK", "lm"))
    applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "prefix.named_parameters()" in (folder / "train.py").read_text(encoding="utf-8")
