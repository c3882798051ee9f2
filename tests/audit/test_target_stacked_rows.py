"""A target built row by row in a loop and stacked (a λ-return of expected values under the
target policy, each step's ``g = r_t + γ ((1 - λ) E_π[Q(x_{t+1})] + λ g)``, collected in a list
and ``torch.stack``-ed, as Retrace's and tree-backup returns are computed) is a target
bootstrapped from other rows of the same forward when its rows are arithmetic on them, as the
same return written in one expression is: with the target policy read from the online
Q-values uncut, the loss trains the network through its own target. Cut there
(``q_online.detach()``), it is clean; and a loss between a stack of rows that are no arithmetic
(selections of the same rows) and the prediction is no target."""

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


def lambda_returns(q_next, pi_next, rewards, lam=0.8, discount=0.9):
    values = (pi_next * q_next).sum(-1)
    out, g = [], values[-1]
    for t in reversed(range(rewards.shape[0])):
        g = rewards[t] + discount * ((1 - lam) * values[t] + lam * g)
        out.insert(0, g)
    return torch.stack(out)


for step in range(3):
    obs, actions = torch.randn(5, 8, 4), torch.randint(0, 3, (5, 8))
    rewards = torch.randn(4, 8)
    q_online = q_net(obs)
    with torch.no_grad():
        q_target = target_net(obs)
    pi = F.softmax(q_online{cut} / 0.5, dim=-1)
    returns = lambda_returns(q_target[1:], pi[1:], rewards)
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
