"""A target network aliased as a whole, read through its parts: ``net_prime = net`` (the
option-critic's, Bacon et al. 2017, written for ``copy.deepcopy(net)``), whose parts the
script calls by attribute (``net_prime.q(net_prime.features(s))`` under no_grad, for the
target; ``net.q(net.features(s))`` with gradients). The parts end in the same attribute by
both names, and both holders are one object: the finding names the holders and copies the
target where it is made. The copy as published is clean."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_OPTION_CRITIC = """\
import copy

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features, self.q = nn.Linear(3, 8), nn.Linear(8, 2)


torch.manual_seed(0)
net = Net()
net_prime = {made}
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    s, s2 = torch.randn(4, 3), torch.randn(4, 3)
    with torch.no_grad():
        target = 1.0 + 0.9 * net_prime.q(torch.relu(net_prime.features(s2))).max(1)[0]
    q = net.q(torch.relu(net.features(s))).max(1)[0]
    loss = (q - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 2 == 1:
        net_prime.load_state_dict(net.state_dict())
"""


@pytest.mark.parametrize(("made", "failed"), [("net", ["aliased"]),
                                              ("copy.deepcopy(net)", [])],
                         ids=["holder_aliased", "holder_copied"])
def test_a_holder_aliased_is_named_and_copied_where_it_is_made(tmp_path, made, failed):
    script = tmp_path / "option_critic.py"
    script.write_text(_OPTION_CRITIC.format(made=made))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == failed, got
    assert code == (1 if failed else 0)
    if failed:
        assert "`net_prime` and `net` are one network" in got[0]["message"]
        assert got[0]["at"][0] == "option_critic.py:15: net_prime = net"
        assert {"net.q.weight", "net.features.weight"} <= set(got[0]["names"])
        assert got[0]["edits"][0]["new"].strip().endswith("copy.deepcopy(net)")
