"""A loss that trains a network through a value the script cuts at its other reads: PEARL's
critic loss reads the task variable whole while the policy and the value function read it
``.detach()``-ed (Rakelly et al. 2019; the context encoder's optimizer is cleared before the
KL's backward and steps after the critic's). The critic loss's gradient in the encoder's
``.grad`` is the method's, though the critics' own optimizers stepped it first: no leak. The
same loss reaching the encoder through a value the script cuts nowhere, backward after the
encoder's own step has begun to gather, still is one."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
encoder = nn.Linear(3, 2)
critic = nn.Linear(6, 1)
policy = nn.Linear(6, 1)
encoder_opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
critic_opt = torch.optim.Adam(critic.parameters(), lr=0.01)
policy_opt = torch.optim.Adam(policy.parameters(), lr=0.01)
obs, context, target = torch.randn(16, 4), torch.randn(16, 3), torch.randn(16, 1)
for it in range(3):
    z = encoder(context)
    policy_loss = -policy(torch.cat([obs, POLICY_Z], 1)).mean()
    kl = z.pow(2).mean()
    encoder_opt.zero_grad()
    kl.backward(retain_graph=True)
    critic_opt.zero_grad()
    critic_loss = F.mse_loss(critic(torch.cat([obs, CRITIC_Z], 1)), target)
    critic_loss.backward()
    critic_opt.step()
    encoder_opt.step()
    policy_opt.zero_grad()
    policy_loss.backward()
    policy_opt.step()
"""


def _audit(tmp_path, critic_z, policy_z):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("CRITIC_Z", critic_z).replace("POLICY_Z", policy_z),
                      encoding="utf-8")
    return audit(tmp_path, script, "--watch", "1")


def test_the_critic_loss_through_the_value_cut_for_the_policy_is_the_methods(tmp_path):
    code, report = _audit(tmp_path, "z", "z.detach()")
    assert code == 0 and not failures(report), failures(report)


def test_a_value_cut_nowhere_leaves_the_leak(tmp_path):
    code, report = _audit(tmp_path, "z", "encoder(context).detach()")
    assert code == 1 and any(f["kind"] == "leak" for f in failures(report)), failures(report)
