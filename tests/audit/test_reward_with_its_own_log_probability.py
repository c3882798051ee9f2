"""A score-function loss whose weight is a reward with a KL penalty computed from the policy's
own log-probability, left with its graph (RLOO's ``r - beta * (log_p - ref_log_p)`` for
``log_p.detach()``, Ahmadian et al. 2024): the weight carries gradient into the policy. The
weight is arithmetic on the log-probability, not a distribution (an entropy's ``p · log p``
stays no finding): ``target``, whose edit cuts the KL penalty where it is made (the one value
with a graph the reward and its advantage are made of, besides constants: the published cut's
place), and the fixed script trains as the published one."""

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
policy, reference = nn.Linear(4, 3), nn.Linear(4, 3)
optimizer = torch.optim.Adam(policy.parameters(), lr=0.01)
k = 4
for step in range(4):
    x = torch.randn(8, 4).repeat_interleave(k, 0)
    with torch.no_grad():
        a = torch.distributions.Categorical(logits=policy(x)).sample()
        ref_logps = F.log_softmax(reference(x), -1).gather(1, a[:, None]).squeeze(1)
        scores = (a == 1).float()
    logps = F.log_softmax(policy(x), -1).gather(1, a[:, None]).squeeze(1)
    entropy = -(F.log_softmax(policy(x), -1).exp() * F.log_softmax(policy(x), -1)).sum(1)
    kl = LOGPS - ref_logps
    rewards = (scores - 0.1 * kl).view(-1, k)
    advantages = (rewards - (rewards.sum(1, keepdim=True) - rewards) / (k - 1)).view(-1)
    loss = -(advantages * logps).mean() - 0.01 * entropy.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(policy.state_dict(), args.out)
"""


def test_a_reward_made_from_the_log_probability_is_cut(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("LOGPS", "logps.detach()"),
                   SCRIPT.replace("LOGPS", "logps"))
    done = applied_and_trains(folder, "target", "--watch", "1")
    assert "train.py:21: logps - ref_logps -> (logps - ref_logps).detach()" in done.stdout, \
        done.stdout
