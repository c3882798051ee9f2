"""A tensor of its own that an optimizer holds, made without ``requires_grad`` and never
switched on (Kendall, Gal and Cipolla's learned log variances as ``torch.zeros(3)`` for
``torch.zeros(3, requires_grad=True)``): ``frozen``, its edit switches it on before the
optimizer of its own that holds it is built, and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

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
model = nn.Linear(4, 2)
log_vars = LOG_VARS
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
log_var_optimizer = torch.optim.Adam([log_vars], lr=0.05)
x, y = torch.randn(32, 4), torch.randn(32, 2)
for step in range(4):
    out = model(x)
    losses = [F.mse_loss(out[:, i], y[:, i]) for i in range(2)]
    loss = sum(torch.exp(-log_vars[i]) * losses[i] + log_vars[i] for i in range(2))
    optimizer.zero_grad()
    log_var_optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    log_var_optimizer.step()
if args.out:
    torch.save({"model": model.state_dict(), "log_vars": log_vars}, args.out)
"""


def test_a_leaf_made_without_grad_is_switched_on_before_its_optimizer(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("LOG_VARS", "torch.zeros(2, requires_grad=True)"),
                   SCRIPT.replace("LOG_VARS", "torch.zeros(2)"))
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert "train.py:13: insert before it: log_vars.requires_grad_(True)" in done.stdout
