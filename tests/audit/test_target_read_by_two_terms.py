"""A target two terms of a loss read by the same operation: MPO's E-step weights,
``softmax(q / temperature)``, weighing the log-probability of each of its two decoupled
Gaussians (Abdolmaleki et al. 2018; acme divides by ``stop_gradient(temperature)``). Written
without the cut, the weights carry the policy's loss into the temperature, which the dual
optimizer steps. One read's form is found (the Gaussian whose scale the policy trains), the
other's scale is a constant: the target is still cut where it is made, for both reads, and the
fixed script trains as the published one."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, cli

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch.distributions import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
mean = torch.zeros(2, requires_grad=True)
log_std = torch.zeros(2, requires_grad=True)
log_temperature = torch.zeros(1, requires_grad=True)
policy_optimizer = torch.optim.Adam([mean, log_std], lr=0.05)
dual_optimizer = torch.optim.Adam([log_temperature], lr=0.05)
for step in range(4):
    actions = torch.randn(8, 2)
    q = -(actions - 1).pow(2).sum(1)
    target_mean, target_std = mean.detach(), log_std.exp().detach()
    temperature = F.softplus(log_temperature)
    weights = F.softmax(q / TEMPERATURE, dim=0)
    loss_temperature = temperature * (0.1 + torch.logsumexp(q / temperature, 0))
    loss_mean = -(weights * Normal(mean, target_std).log_prob(actions).sum(-1)).sum()
    loss_std = -(weights * Normal(target_mean, log_std.exp()).log_prob(actions).sum(-1)).sum()
    loss = loss_mean + loss_std + loss_temperature.sum()
    policy_optimizer.zero_grad()
    dual_optimizer.zero_grad()
    loss.backward()
    policy_optimizer.step()
    dual_optimizer.step()
if args.out:
    torch.save({"mean": mean, "log_std": log_std, "log_temperature": log_temperature},
               args.out)
"""


def test_the_weights_are_cut_where_they_are_made_and_train_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(
        SCRIPT.replace("TEMPERATURE", "temperature.detach()"), encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("TEMPERATURE", "temperature"),
                                     encoding="utf-8")
    done = applied(folder, "target", "--watch", "1")
    assert "train.py:20: F.softmax(q / temperature, dim=0) -> " in done.stdout, done.stdout
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
