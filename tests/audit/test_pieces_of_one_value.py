"""Two pieces of one value, equal by chance: IPO's chosen and rejected log-ratios (Azar et al.
2024), ``policy_logps.chunk(2)`` against a reference copied from the policy, are both zero at
the first update, and their difference has one graph below it. They are no value subtracted
from itself (that is one computation on both sides: a log-probability computed twice): the
audit is clean, and says nothing of a cut the script never made (the audit's own comparison of
the two operands is no ``.detach()`` of the script's)."""

from __future__ import annotations

import copy

import pytest
import torch
from script_audit import audit, failures
from torch import nn

from toolkit.audit.record.calls import _one_computation

SCRIPT = """\
import copy
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
ref = copy.deepcopy(policy)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(3):
    x = torch.randn(16, 4)
    logps = policy(x).squeeze(1)
    with torch.no_grad():
        ref_logps = ref(x).squeeze(1)
    chosen, rejected = logps.chunk(2)
    ref_chosen, ref_rejected = ref_logps.chunk(2)
    chosen_ratio = chosen - ref_chosen
    rejected_ratio = rejected - ref_rejected
    delta = chosen_ratio - rejected_ratio
    loss = ((delta - 0.5) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.slow
def test_a_difference_of_two_pieces_equal_by_chance_is_clean(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
    assert not report["not_checked"], report["not_checked"]


def test_pieces_of_one_value_are_no_one_computation():
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    ref = copy.deepcopy(net)
    x = torch.randn(4, 3)
    out = net(x).squeeze(1) - ref(x).squeeze(1).detach()
    a, b = out.chunk(2)
    assert torch.equal(a, b)            # zero both: equal by chance
    assert not _one_computation(a * 1, b * 1)
    # the same forward computed twice is one computation
    assert _one_computation(net(x) * 2, net(x) * 2)
    # another network of equal values is another computation
    assert not _one_computation(net(x), ref(x))
