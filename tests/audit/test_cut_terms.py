"""``toolkit audit SCRIPT``: a term of a loss that trains nothing its step uses, because a cut
keeps it from what the rest of the loss trains (:mod:`toolkit.audit.rules.running.cut_terms`).
Scripts written for it in the shape of soft actor-critic's actor update (Haarnoja et al. 2018,
"Soft Actor-Critic": the actor minimises ``alpha * log pi(a|s) - Q(s, a)`` at an action drawn
with the reparameterisation trick, the critics trained by their own optimizer on their own
loss).

- The action read by the critic ``.detach()``-ed, or drawn with ``sample()`` while its
  log-probability is read: a failure at the cut, whose edit removes it and trains as the
  published script.
- No finding: the published script; an actor-critic whose one loss is the actor's term, which
  reads the advantage cut from the critic, plus the critic's own regression, each network
  stepped with its part (the cut term trains the actor); a score-function actor whose sampled
  action a critic reads in a term its own optimizer steps with.
"""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, audit, check_fix, failures, twins

PUBLISHED = '''\
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)

actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 4))
critic = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
alpha = 0.2
for step in range(4):
    state = torch.randn(16, 3)
    action, reward = torch.randn(16, 2).clamp(-1, 1), torch.randn(16, 1)
    q_loss = (critic(torch.cat([state, action], 1)) - reward).pow(2).mean()
    critic_opt.zero_grad()
    q_loss.backward()
    critic_opt.step()

    mu, log_std = actor(state).chunk(2, 1)
    dist = torch.distributions.Normal(mu, log_std.clamp(-3, 1).exp())
    x = dist.rsample()
    new_action = torch.tanh(x)
    log_pi = dist.log_prob(x).sum(1, keepdim=True)
    q = critic(torch.cat([state, new_action], 1))
    actor_loss = (alpha * log_pi - q).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
'''

DETACHED = PUBLISHED.replace("q = critic(torch.cat([state, new_action], 1))",
                             "q = critic(torch.cat([state, new_action.detach()], 1))")
SAMPLED = PUBLISHED.replace("x = dist.rsample()", "x = dist.sample()")

#: one loss, the actor's term reading the advantage cut from the critic, and the critic's own
#: regression, each network with its optimizer
A2C = '''\
import torch
from torch import nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
critic = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
for step in range(4):
    state, ret = torch.randn(16, 3), torch.randn(16, 1)
    dist = torch.distributions.Normal(actor(state), 1.0)
    action = dist.sample()
    advantage = ret - critic(state)
    actor_term = -(dist.log_prob(action).sum(1, keepdim=True) * advantage.detach()).mean()
    loss = actor_term + advantage.pow(2).mean()
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    loss.backward()
    actor_opt.step()
    critic_opt.step()
'''

#: a score-function actor: its sampled action is read by a critic of (state, action) whose own
#: regression is a term of the same loss, stepped by the critic's optimizer
SCORED = '''\
import torch
from torch import nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
critic = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
for step in range(4):
    state = torch.randn(16, 3)
    dist = torch.distributions.Normal(actor(state), 1.0)
    action = dist.sample()
    reward = -(action - 0.5).pow(2).sum(1, keepdim=True)
    q = critic(torch.cat([state, action], 1))
    loss = -(dist.log_prob(action).sum(1, keepdim=True) * (reward - q).detach()).mean() + \\
        (q - reward).pow(2).mean()
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    loss.backward()
    actor_opt.step()
    critic_opt.step()
'''


@pytest.mark.parametrize(("text", "kind", "line", "new"), [
    (DETACHED, "constant_term", 29, "new_action"),
    (SAMPLED, "drawn", 26, "rsample"),
], ids=["detached", "sampled"])
def test_a_term_cut_from_what_the_loss_trains_is_a_failure_at_the_cut(
        tmp_path, text, kind, line, new):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == kind and found["iteration"] == 0 and found["step"] == 1
    assert found["at"][0].startswith(f"train.py:{line}:")
    assert sorted(found["names"]) == ["actor.0.bias", "actor.0.weight", "actor.2.bias",
                                      "actor.2.weight"]
    (edit,) = found["edits"]
    assert edit["start"][0] == line and edit["new"] == new


@pytest.mark.parametrize("text", [PUBLISHED, A2C, SCORED], ids=["published", "a2c", "scored"])
def test_a_cut_term_that_trains_what_a_step_uses_is_no_finding(tmp_path, text):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
@pytest.mark.parametrize(("text", "kind"), [(DETACHED, "constant_term"), (SAMPLED, "drawn")],
                         ids=["detached", "sampled"])
def test_the_edit_trains_as_the_published_script(tmp_path, text, kind):
    folder = twins(tmp_path, PUBLISHED, text)
    check_fix(tmp_path, folder, kind, "--watch", "1")
    assert_trains_as(folder)
