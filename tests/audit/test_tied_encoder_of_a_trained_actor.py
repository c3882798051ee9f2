"""Guards of the shared-weights principle (``test_weights_shared_with_the_teacher.py``): an
actor whose encoder is tied to the critic's (``actor.encoder.fc = critic.encoder.fc``), as RAD
(Laskin et al. 2020, "Reinforcement Learning with Augmented Data", arXiv:2004.14990) and SAC-AE
(Yarats et al. 2019, arXiv:1910.01741) tie the actor's convolutions to the critic's, is read
under ``no_grad`` for the critic's target and trained by its own optimizer every other step: a
network that trains, not a target that the critic's steps move. Neither is one that the critic
and the actor both train, each with its own optimizer over its own head."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

HEAD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)

    def forward(self, obs, detach=False):
        h = torch.tanh(self.fc(obs))
        return h.detach() if detach else h


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.mu = nn.Linear(16, 2)

    def forward(self, obs, detach=False):
        return torch.tanh(self.mu(self.encoder(obs, detach)))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.q = nn.Sequential(nn.Linear(18, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs, action, detach=False):
        return self.q(torch.cat([self.encoder(obs, detach), action], -1))


actor, critic = Actor(), Critic()
actor.encoder.fc = critic.encoder.fc   # tied, as copy_conv_weights_from ties them
critic_target = Critic()
critic_target.load_state_dict(critic.state_dict())
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
obs, next_obs = torch.randn(64, 12), torch.randn(64, 12)
actions, rewards = torch.rand(64, 2) * 2 - 1, torch.randn(64, 1)
for step in range(6):
    with torch.no_grad():
        next_action = actor(next_obs)
        target = rewards + 0.99 * critic_target(next_obs, next_action)
    critic_loss = F.mse_loss(critic(obs, actions), target)
    critic_opt.zero_grad()
    critic_loss.backward()
    critic_opt.step()
    if step % EVERY == 0:   # the actor, through the critic, on the critic's encoder cut
        actor_loss = -critic(obs, actor(obs, detach=True), detach=True).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
    with torch.no_grad():
        for p, tp in zip(critic.parameters(), critic_target.parameters()):
            tp.lerp_(p, 0.05)
"""

GUARDS = {"actor-every-step": HEAD.replace("EVERY", "1"),
          "actor-every-other-step": HEAD.replace("EVERY", "2")}


@pytest.mark.parametrize("case", sorted(GUARDS))
@pytest.mark.parametrize("options", [("--watch", "1"), ("--steps", "2")])
def test_an_encoder_tied_to_a_trained_actor_is_no_failure(tmp_path, case, options):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, *options)
    assert code == 0 and not failures(report), report["findings"]
