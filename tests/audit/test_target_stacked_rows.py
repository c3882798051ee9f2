"""A target built row by row in a loop and stacked (Retrace's returns, each step's ``g = r_t +
γ (E_π[Q(x_{t+1})] + c_t (g - Q(x_{t+1}, a)))``, collected in a list and ``torch.stack``-ed, as
rlax's ``retrace`` and Kaixhin/ACER compute them) is a target bootstrapped from other rows of
the same forward when its rows are arithmetic on them, as the same return written in one
expression is: with the target policy read from the online Q-values uncut, the loss trains the
network through its own target. Cut there (``q_online.detach()``, as published), it is clean;
and a loss between a stack of rows that are no arithmetic (selections of the same rows) and the
prediction is no target."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from script_audit import audit, failures
from torch import nn

from toolkit import audit_step

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
target_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)


def retrace(q_t, pi_t, c_t, a_t, r_t, discount=0.9):
    expected_q = (pi_t * q_t).sum(-1)
    q_a = q_t.gather(-1, a_t.unsqueeze(-1)).squeeze(-1)
    g = r_t[-1] + discount * expected_q[-1]
    targets = [g]
    for t in range(r_t.shape[0] - 2, -1, -1):
        g = r_t[t] + discount * (expected_q[t] + c_t[t] * (g - q_a[t]))
        targets.append(g)
    return torch.stack(targets[::-1])


for step in range(3):
    obs, actions = torch.randn(5, 8, 4), torch.randint(0, 3, (5, 8))
    rewards, mu = torch.randn(4, 8), torch.full((5, 8), 1 / 3)
    q_online = q_net(obs)
    with torch.no_grad():
        q_target = target_net(obs)
    pi = F.softmax(q_online{cut} / 0.5, dim=-1)
    c = 0.9 * torch.clamp(pi.gather(-1, actions.unsqueeze(-1)).squeeze(-1) / mu, max=1.0)
    returns = retrace(q_target[1:], pi[1:], c[1:], actions[1:], rewards)
    q_a = q_online[:-1].gather(-1, actions[:-1].unsqueeze(-1)).squeeze(-1)
    loss = 0.5 * (returns - q_a).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("cut", "trained"), [("", True), (".detach()", False)],
                         ids=["policy_uncut", "as_published"])
def test_a_return_stacked_from_rows_is_a_target_of_the_script(tmp_path, cut, trained):
    script = tmp_path / "retrace.py"
    script.write_text(SCRIPT.format(cut=cut), encoding="utf-8")
    code, report = audit(tmp_path, script, "--steps", "2")
    found = failures(report)
    if trained:
        assert code == 1 and [f["kind"] for f in found] == ["target"], found
        assert "returns" in found[0]["names"]
    else:
        assert code == 0 and found == [], found


def _step(stacked_rows):
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    x, r = torch.randn(6, 4), torch.randn(5)

    def step():
        v = net(x).squeeze(-1)
        target = torch.stack(stacked_rows(v, r))
        return F.mse_loss(v[:-1], target)
    return step, optimizer


def test_the_step_audit_finds_a_stacked_bootstrap_and_not_a_stack_of_selections():
    # each row r_t + γ v_{t+1}: a TD target bootstrapped from the next row, built row by row
    step, optimizer = _step(lambda v, r: [r[t] + 0.9 * v[t + 1] for t in range(5)])
    found = audit_step(step, optimizer)
    assert [f.form.split(" (")[0] for f in found.targets] == [
        "a target bootstrapped from other rows of the same forward"]
    # each row v_{t+1} itself, stacked: a shift of the same forward, no arithmetic on it
    step, optimizer = _step(lambda v, r: [v[t + 1] for t in range(5)])
    assert audit_step(step, optimizer).targets == ()
