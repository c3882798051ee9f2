"""A plain leaf the script keeps across iterations and trains in a term of its own, left out of
the optimizer: MPO's Lagrange multiplier of the standard deviation's KL bound, made as
``torch.full(..., requires_grad=True)`` (not an ``nn.Parameter``) and missing from the dual
optimizer's list (Abdolmaleki et al. 2018; acme steps every dual variable). ``unstepped``
names it at the optimizer's line, the edit writes it into the optimizer's list, and the fixed
script trains as the published one. A leaf made afresh in each iteration (a gradient penalty's
interpolates, whose ``.grad`` a backward fills) is none."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
policy = nn.Linear(1, 2)
log_alpha_mean = torch.zeros(1, requires_grad=True)
log_alpha_std = torch.zeros(1, requires_grad=True)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=0.05)
dual_optimizer = torch.optim.Adam(DUALS, lr=0.05)
for step in range(4):
    x = torch.randn(8, 2)
    mean = policy(torch.ones(1))
    kl_mean = (mean - x.mean(0)).pow(2).sum()
    kl_std = (mean.pow(2).sum() - 1).abs()
    alpha_mean, alpha_std = F.softplus(log_alpha_mean), F.softplus(log_alpha_std)
    loss = (alpha_mean.detach() * kl_mean + alpha_std.detach() * kl_std
            + (alpha_mean * (0.1 - kl_mean.detach())).sum()
            + (alpha_std * (0.1 - kl_std.detach())).sum())
    policy_optimizer.zero_grad()
    dual_optimizer.zero_grad()
    loss.backward()
    policy_optimizer.step()
    dual_optimizer.step()
if args.out:
    torch.save({**policy.state_dict(), "a": log_alpha_mean, "b": log_alpha_std}, args.out)
"""

PENALTY = """\
import torch
from torch import nn

torch.manual_seed(0)
D = nn.Linear(2, 1)
optimizer = torch.optim.Adam(D.parameters(), lr=0.01)
for step in range(4):
    real, fake = torch.randn(8, 2), torch.randn(8, 2)
    interpolates = (0.5 * real + 0.5 * fake).requires_grad_(True)
    grad, = torch.autograd.grad(D(interpolates).sum(), interpolates, create_graph=True)
    loss = D(fake).mean() - D(real).mean() + 10 * (grad.norm(dim=1) - 1).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_the_multiplier_left_out_is_added_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(
        SCRIPT.replace("DUALS", "[log_alpha_mean, log_alpha_std]"), encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("DUALS", "[log_alpha_mean]"),
                                     encoding="utf-8")
    done = applied(folder, "unstepped", "--watch", "1")
    # written into the list the dual optimizer is built over, as the published line has it
    assert "log_alpha_mean -> log_alpha_mean, log_alpha_std" in done.stdout
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def test_a_leaf_made_afresh_in_each_iteration_is_none(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PENALTY, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
