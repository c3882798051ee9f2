"""Two rows of one value subtracted (REBEL, Gao et al. 2024: the log-ratio of the first
completion of each pair minus that of the second, ``ratio[:n] - ratio[n:]``, regressed onto
the difference of their rewards) are no value and itself: at the first update both rows are
zero, the policy still the one that sampled, yet they are different elements of the batch and
their difference trains it. No constant term is found; the same value subtracted from itself
still is one."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Linear(4, 3)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
states, actions, rewards = torch.randn(16, 4), torch.randint(0, 3, (16, 1)), torch.randn(16)
with torch.no_grad():
    old = policy(states).log_softmax(-1).gather(1, actions).squeeze(1)
for epoch in range(3):
    new = policy(states).log_softmax(-1).gather(1, actions).squeeze(1)
    ratio = new - old
    DIFFERENCE
    loss = (difference - (rewards[:8] - rewards[8:])).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_two_rows_of_one_value_are_no_value_and_itself(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("DIFFERENCE", "difference = ratio[:8] - ratio[8:]"))
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and failures(report) == [], report["findings"]


@pytest.mark.parametrize("rows", ["ratio[:8] - ratio[:8]", "ratio[::2] - ratio[::2]"])
def test_the_same_rows_subtracted_are_still_a_constant(tmp_path, rows):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("DIFFERENCE", f"difference = {rows}"))
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 1 and [f["kind"] for f in failures(report)] == ["constant_term"], \
        report["findings"]
