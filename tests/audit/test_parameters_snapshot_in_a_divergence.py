"""A divergence between a parameterised distribution and a snapshot of its own parameters, taken
cut in the same iteration: its closed form has terms made of the snapshot alone, constants by
design, beside terms that compare the live parameters with it. Variational continual learning
(Nguyen et al. 2018, arXiv:1710.10628) regularises the new task's Gaussian posterior by its KL
to the previous one, ``log(s_old / s) + (s**2 + (m - m_old)**2) / (2 * s_old**2) - 1/2``;
PPO's adaptive KL penalty (Schulman et al. 2017, arXiv:1707.06347, section 4) keeps a
state-independent ``log_std`` beside the old one, ``log_std - old_log_std + ...``. Neither is a
term of a parameter's cut values alone: the snapshot is the reference the live parameters are
compared with. Guards only, found as a false alarm of the rule for such terms (a closed-form KL
to a snapshot taken with ``.detach().clone()``)."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

HEAD = """\
import math
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
"""

VCL = HEAD + """

class MeanField(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.mean = nn.Parameter(torch.randn(n_in, n_out) * 0.1)
        self.rho = nn.Parameter(torch.full((n_in, n_out), -3.0))

    def forward(self, x):
        eps = torch.randn_like(self.mean)
        return x @ (self.mean + F.softplus(self.rho) * eps)

    def kl_to(self, mean_old, rho_old):
        sd, sd_old = F.softplus(self.rho), F.softplus(rho_old)
        return (torch.log(sd_old) - torch.log(sd)
                + (sd ** 2 + (self.mean - mean_old) ** 2) / (2 * sd_old ** 2) - 0.5).sum()


layer = MeanField(6, 3)
optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
for task in range(2):
    x, y = torch.randn(32, 6), torch.randint(3, (32,))
    previous = {name: p.detach().clone() for name, p in layer.named_parameters()}
    for step in range(3):
        nll = F.cross_entropy(layer(x), y)
        kl = layer.kl_to(previous["mean"], previous["rho"])
        loss = nll + kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

PPO_KL = HEAD + """
from torch.distributions import Normal

mean = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
log_std = nn.Parameter(torch.full((2,), -0.5))
optimizer = torch.optim.Adam([*mean.parameters(), log_std], lr=1e-2)
states = torch.randn(64, 4)
for update in range(4):
    with torch.no_grad():
        old_mean = mean(states)
        actions = Normal(old_mean, log_std.exp()).sample()
        advantages = torch.randn(64)
    old_log_std = log_std.detach().clone()
    new = Normal(mean(states), log_std.exp())
    ratio = torch.exp(new.log_prob(actions).sum(-1)
                      - Normal(old_mean, old_log_std.exp()).log_prob(actions).sum(-1))
    kl = (log_std - old_log_std
          + (old_log_std.exp() ** 2 + (old_mean - new.mean) ** 2) / (2 * log_std.exp() ** 2)
          - 0.5).sum(-1).mean()
    loss = -(ratio * advantages).mean() + kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

GUARDS = {"vcl-kl-to-previous-posterior": VCL, "ppo-kl-penalty-old-log-std": PPO_KL}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_divergence_to_a_snapshot_of_the_parameters_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
