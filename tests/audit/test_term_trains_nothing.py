"""``toolkit audit SCRIPT``: two terms of a loss that train nothing, each found in a script, its
edit verified by following it (the fixed script trains as the published one).

- A network whose own loss is computed under ``torch.no_grad()`` (implicit Q-learning's value
  ``v = value(obs)`` moved into the block that makes its targets; a probe's logits inside the
  block that computes its features), with an optimizer of its own: the term is a constant and
  the network never trains. It is no teacher: its output meets no prediction. The edit takes
  the network's call out of the block.
- A value subtracted from itself with its graph (PPO's and GRPO's ratio
  ``exp(logp - old_logp)`` with ``old_logp = logp``, or the log-probabilities computed a second
  time): the ratio is one whatever the weights and passes no gradient, so the clipped surrogate
  trains nothing and only the other terms do. The edit cuts the value subtracted where it is
  bound, or in the difference.

Twins of the same network, equal only at the start (a copy), and ``logp - old_logp.detach()``
are no finding.
"""

from __future__ import annotations

import pytest

from tests.audit.script_audit import assert_trains_as, check_fix, cli, twins

pytestmark = pytest.mark.slow

_VALUE = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
value = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
critic = nn.Linear(4, 1)
target = nn.Linear(4, 1)
target.load_state_dict(critic.state_dict())
v_optimizer = torch.optim.Adam(value.parameters(), lr=1e-2)
q_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
x, r = torch.randn(64, 4), torch.randn(64, 1)
for step in range(6):
    with torch.no_grad():
        target_q = target(x)
{v}
    v_loss = (target_q - v).pow(2).mean()
    q_loss = (critic(x) - r - 0.9 * v.detach()).pow(2).mean()
    for optimizer in (v_optimizer, q_optimizer):
        optimizer.zero_grad()
    (v_loss + q_loss).backward()
    for optimizer in (v_optimizer, q_optimizer):
        optimizer.step()
if args.out:
    torch.save({"value": value.state_dict(), "critic": critic.state_dict()}, args.out)
"""

_RATIO = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
policy = nn.Linear(4, 3)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
x, a, adv = torch.randn(32, 4), torch.randint(0, 3, (32,)), torch.randn(32)


def log_prob():
    return torch.log_softmax(policy(x), -1).gather(1, a[:, None]).squeeze(1)


for step in range(6):
    logp = log_prob()
{old}
    ratio = torch.exp(logp - old_logp)
    surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    loss = -surrogate.mean() + 0.01 * logp.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(policy.state_dict(), args.out)
"""

_PUBLISHED_V = "    v = value(x)"
_PUBLISHED_OLD = "    old_logp = logp.detach()"


def test_a_networks_own_loss_under_no_grad_is_a_constant_and_its_call_leaves_the_block(
        tmp_path):
    buggy = _VALUE.replace("{v}", "        v = value(x)")
    folder = twins(tmp_path, _VALUE.replace("{v}", _PUBLISHED_V), buggy)
    done = check_fix(tmp_path, folder, "constant_term", "--watch", "1")
    assert "train.py:19" in done.stdout          # the call, not the `with` above it
    assert "hand_updated" not in done.stdout     # no teacher: its output meets no prediction
    assert_trains_as(folder)


@pytest.mark.parametrize("old", ["    old_logp = logp", "    old_logp = log_prob()"],
                         ids=["bound", "computed-again"])
def test_a_value_subtracted_from_itself_is_found_and_cut(tmp_path, old):
    folder = twins(tmp_path, _RATIO.replace("{old}", _PUBLISHED_OLD), _RATIO.replace("{old}", old))
    done = check_fix(tmp_path, folder, "constant_term", "--watch", "1")
    # where the value is bound to the other, the cut goes there; else in the difference
    assert ("train.py:20" if old.endswith("= logp") else "train.py:21") in done.stdout
    assert_trains_as(folder)


def test_twins_equal_at_the_start_and_a_cut_reference_are_no_finding(tmp_path):
    twin = """\
import copy
import torch
from torch import nn

torch.manual_seed(0)
q1 = nn.Linear(4, 1)
q2 = copy.deepcopy(q1)
optimizer = torch.optim.SGD([*q1.parameters(), *q2.parameters()], lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(3):
    gap = (q1(x) - q2(x)).mean()
    loss = (q1(x) - y).pow(2).mean() + (q2(x) - y).pow(2).mean() + gap
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    folder = twins(tmp_path, _RATIO.replace("{old}", _PUBLISHED_OLD), twin)
    for script in ("train.py", "published.py"):
        done = cli("--watch", "1", script, cwd=folder)
        assert done.returncode == 0, done.stdout
