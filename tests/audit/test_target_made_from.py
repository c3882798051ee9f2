"""A target written inline in the loss (PopArt's ``F.mse_loss(values, head.normalize(returns))``)
that carries gradient is named by the tensor the script names that it is made from: "the target
(made from `returns`)", and ``returns`` is among the finding's names."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(critic.parameters(), lr=0.01)
mu, sigma = torch.zeros(1), torch.ones(1)
for step in range(3):
    states, last = torch.randn(16, 3), torch.randn(16, 3)
    returns = torch.randn(16, 1) + 0.9 * critic(last)
    loss = F.mse_loss(critic(states), (returns - mu) / sigma)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_an_inline_target_is_named_by_what_it_is_made_from(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["target"]
    assert "the target (made from `returns`) of" in found[0]["message"]
    assert "returns" in found[0]["names"]
    assert found[0]["at"][0].startswith("train.py:10:")
