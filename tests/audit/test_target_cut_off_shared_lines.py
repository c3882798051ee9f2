"""A target made by a network whose forward another loss of the same iteration trained
through (AWAC's advantage weights, read from the critics that the critic's loss trained just
before): a cut at a line of that forward would cut the critic's own loss too, so the target is
cut at the calls that make it in the actor's loss, and the fixed script trains as the published
one, which cuts the weights."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, failures, twins

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, s, a):
        return self.mlp(torch.cat([s, a], dim=-1))


actor, critic = nn.Linear(2, 1), Critic()
actor_opt = torch.optim.SGD(actor.parameters(), lr=0.1)
critic_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
for step in range(3):
    s, a, r = torch.randn(16, 2), torch.randn(16, 1), torch.randn(16, 1)
    critic_loss = F.mse_loss(critic(s, a), r)
    critic_opt.zero_grad()
    critic_loss.backward()
    critic_opt.step()
    adv = critic(s, a) - critic(s, actor(s))
    weights = torch.exp(adv)WEIGHTS
    actor_loss = (weights * (actor(s) - a) ** 2).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
"""


def test_the_target_is_cut_at_its_calls_not_in_the_forward_another_loss_trains(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("WEIGHTS", ".detach()"), SCRIPT.replace("WEIGHTS", ""))
    assert audit(tmp_path, folder / "published.py", "--steps", "2")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["target"]
    assert found[0]["at"][0].startswith("train.py:30: adv = critic(s, a) - critic(s, actor(s))")
    applied(folder, "target", "--steps", "2")
    assert "adv = critic(s, a).detach() - critic(s, actor(s)).detach()" in \
        (folder / "train.py").read_text(encoding="utf-8")
    assert_trains_as(folder)
