"""A second phase's optimizer built over a snapshot of the policy instead of the policy (DAgger's
rounds after behaviour cloning, after HumanCompatibleAI/imitation's ``DAggerTrainer``, whose
rounds retrain the policy they roll out): the policy is read through its methods, never called,
and its ``log_std`` is a parameter of the policy itself, of no module the script calls. The edit
builds the optimizer over the whole policy, ``log_std`` with it, so it trains as the published
script and a second audit is clean."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures, twins

SCRIPT = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
        self.mean = nn.Linear(8, 2)
        self.log_std = nn.Parameter(torch.zeros(2))

    def log_prob(self, obs, act):
        mean = self.mean(self.body(obs))
        dist = torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))
        return dist.log_prob(act).sum(-1)


policy = Policy()
obs, act = torch.randn(64, 3), torch.randn(64, 2)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(3):
    loss = -policy.log_prob(obs, act).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
snapshot = copy.deepcopy(policy)
round_optimizer = torch.optim.Adam(OVER.parameters(), lr=1e-2)
for step in range(3):
    loss = -policy.log_prob(obs + 0.1, act).mean()
    round_optimizer.zero_grad()
    loss.backward()
    round_optimizer.step()
if args.out:
    torch.save({"policy": policy.state_dict(), "snapshot": snapshot.state_dict()}, args.out)
"""


def test_an_optimizer_over_the_snapshot_is_built_over_the_whole_policy(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("OVER", "policy"),
                   SCRIPT.replace("OVER", "snapshot"))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], report["findings"]
    assert "policy.log_std" in found[0]["names"], found[0]["names"]
    (edit,) = found[0]["edits"]
    assert (edit["old"], edit["new"]) == ("snapshot.parameters()", "policy.parameters()"), edit
    applied(folder, "unstepped", "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
