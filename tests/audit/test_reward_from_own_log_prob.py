"""``toolkit audit SCRIPT``, a REINFORCE weight computed from the policy's own log-probability
of other steps: AIRL's policy reward is ``f - log pi`` (Fu et al. 2018, eq. 5), handed to the
policy optimizer as numbers (justinjfu/inverse_rl, ``AIRL.eval``); taken with its graph, the
return of each step sums the later steps' ``-log pi`` and the loss ``-(log pi * A)`` trains the
policy through its own weight. The weight reaches the log-probability it multiplies only
through a selection of rows (``rewards[t]``), so it is no entropy: a ``target`` failure whose
edit cuts the weight. An entropy term, whose weight is the same rows' probability
(``log_p.exp() * log_p``), stays no finding."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
policy, reward_net = nn.Linear(4, 3), nn.Linear(4, 1)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for _ in range(3):
    states = torch.randn(6, 4)
    log_p = torch.log_softmax(policy(states), dim=1)
    actions = torch.randint(0, 3, (6,))
    log_probs = log_p.gather(1, actions[:, None]).squeeze(1)
    with torch.no_grad():
        shaped = reward_net(states).squeeze(1)
    {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

_REWARD = """rewards = shaped - log_probs
    running, returns = torch.zeros(()), []
    for t in range(5, -1, -1):
        running = rewards[t] + 0.9 * running
        returns.append(running)
    returns = torch.stack(returns[::-1])
    advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(log_probs * advantages).mean()"""
_ENTROPY = """entropy = -(log_p.exp() * log_p).sum(1)
    loss = -(log_probs * shaped).mean() - 0.01 * entropy.mean()"""


@pytest.mark.parametrize(("loss", "found"), [(_REWARD, ["target"]), (_ENTROPY, [])],
                         ids=["reward_minus_log_pi", "entropy_bonus"])
def test_a_weight_made_from_other_steps_log_probabilities_is_a_target(tmp_path, loss, found):
    script = tmp_path / "airl.py"
    script.write_text(_SCRIPT.format(loss=loss))
    code, report = audit(tmp_path, script)
    assert [f["kind"] for f in failures(report)] == found, failures(report)
    assert code == (1 if found else 0)
