"""Twin critics, the second left out of the critics' optimizer (CrossQ, Bhatt et al. 2024,
and every clipped double-Q method: ``Adam(qf1.parameters())`` where both critics belong), whose
actor loss also reaches both critics through ``min(Q1, Q2)`` (at every step, or at every
second): the second critic belongs to the optimizer that holds its twin (a module of its class,
its tensors of the same shapes), not to the actor's, whose loss reaches it as it reaches the
first critic (whose gradient there the critics' ``zero_grad`` clears). One finding, one edit,
and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1), nn.Tanh())
qf1 = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
qf2 = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
CRITICS
for step in range(4):
    obs, act, ret = torch.randn(16, 3), torch.rand(16, 1) * 2 - 1, torch.randn(16, 1)
    sa = torch.cat([obs, act], 1)
    critic_loss = F.mse_loss(qf1(sa), ret) + F.mse_loss(qf2(sa), ret)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    if step % DELAY:
        continue
    sa_pi = torch.cat([obs, actor(obs)], 1)
    actor_loss = -torch.min(qf1(sa_pi), qf2(sa_pi)).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "qf1": qf1.state_dict(),
                "qf2": qf2.state_dict()}, args.out)
"""


# the actor updated at every step, or at every second (TD3's policy delay: the critics' loss
# alone reaches the second critic at the first iteration, both losses at the next)
@pytest.mark.parametrize("delay", [1, 2])
def test_a_network_left_out_goes_to_the_optimizer_of_its_twin(tmp_path, delay):
    published = "critic_optimizer = torch.optim.Adam([*qf1.parameters(), *qf2.parameters()], " \
                "lr=1e-2)"
    script = SCRIPT.replace("DELAY", str(delay))
    folder = twins(tmp_path, script.replace("CRITICS", published),
                   script.replace("CRITICS", "critic_optimizer = torch.optim.Adam("
                                             "qf1.parameters(), lr=1e-2)"))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], report["findings"]
    assert found[0]["at"][0].startswith("train.py:14: critic_optimizer"), found[0]["at"]
    applied_and_trains(folder, "unstepped", "--watch", "1")
