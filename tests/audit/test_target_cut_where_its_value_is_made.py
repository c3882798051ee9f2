"""A target made of one value with a graph and constants (ReMax's returns, Li et al. 2024:
``returns = kl_penalty + advantages.unsqueeze(1)``, the penalty cut where it is made) carries
that value's gradient: the cut goes on the line that makes the value (``advantages = (...)
.detach()``), where the published code computes it without a graph, not where the loss reads
the sum. A value the loss also trains through keeps its graph: the cut stays at the read."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
policy = nn.Linear(3, 4)
scorer = nn.Linear(3, 1)
optimizer = torch.optim.SGD([*policy.parameters(), *scorer.parameters()], lr=0.1)
for step in range(3):
    x = torch.randn(8, 3)
    logps = policy(x).log_softmax(-1)
    penalty = (0.1 * logps).detach()
ADVANTAGE    returns = penalty + advantages.unsqueeze(1)
    loss = -(returns * logps).mean()EXTRA
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"policy": policy.state_dict(), "scorer": scorer.state_dict()}, args.out)
"""

# the scorer called on two lines (the sampled responses' rewards and the greedy baseline's)
CALLS = ("    rewards = scorer(x).squeeze(1)\n"
         "    baseline = scorer(x.flip(0)).squeeze(1)\n")
MADE = CALLS + "    advantages = (rewards - baseline).clamp(-1.0, 1.0)\n"
CUT = CALLS + "    advantages = (rewards - baseline).clamp(-1.0, 1.0).detach()\n"


def _script(advantage: str, extra: str = "") -> str:
    return SCRIPT.replace("ADVANTAGE", advantage).replace("EXTRA", extra)


def test_the_value_a_target_carries_is_cut_where_it_is_made(tmp_path):
    folder = twins(tmp_path, _script(CUT), _script(MADE))
    done = applied_and_trains(folder, "target", "--watch", "1")
    assert "train.py:18: (rewards - baseline).clamp(-1.0, 1.0) -> " \
           "(rewards - baseline).clamp(-1.0, 1.0).detach()" in done.stdout, done.stdout


def test_a_value_the_loss_also_trains_through_is_cut_at_the_read(tmp_path):
    # the scorer is fitted to the advantage by a term of its own: its graph must stay
    extra = " + advantages.pow(2).mean()"
    folder = twins(tmp_path, _script(MADE, extra).replace(
                       "-(returns * logps)", "-(returns.detach() * logps)"),
                   _script(MADE, extra))
    done = applied_and_trains(folder, "target", "--watch", "1")
    assert "train.py:20: returns -> returns.detach()" in done.stdout, done.stdout
