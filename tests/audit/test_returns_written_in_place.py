"""Returns filled one step at a time (``returns[t] = r[t] + γ · running``), read against a
value network's output in ``returns - value(s)``: where the rewards keep a graph to a network
an optimizer steps (DIAYN's pseudo-reward from its discriminator, Eysenbach et al. 2018, left
uncut), the target is the returns, whatever side of the difference they are on: the finding
names the networks behind the rewards and the edit cuts the returns, never the value's
prediction."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_DIAYN = """\
import torch
from torch import nn

torch.manual_seed(0)
discriminator, value = nn.Linear(3, 2), nn.Linear(3, 1)
optimizer = torch.optim.Adam([*discriminator.parameters(), *value.parameters()], lr=1e-2)
for _ in range(3):
    states = torch.randn(5, 4, 3)
    rewards = torch.log_softmax(discriminator(states), -1)[..., 0]
    returns, running = torch.zeros_like(rewards), torch.zeros(4)
    for t in reversed(range(5)):
        running = rewards[t] + 0.9 * running
        returns[t] = running
    advantages = {difference}
    loss = advantages.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("difference", ["returns - value(states).squeeze(-1)",
                                        "value(states).squeeze(-1) - returns"],
                         ids=["returns_first", "returns_second"])
def test_returns_written_in_place_are_the_target(tmp_path, difference):
    script = tmp_path / "diayn.py"
    script.write_text(_DIAYN.format(difference=difference))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert code == 1 and [f["kind"] for f in got] == ["target"], got
    assert {"discriminator.weight", "discriminator.bias"} <= set(got[0]["names"])
    assert not any(n.startswith("value.") for n in got[0]["names"])
