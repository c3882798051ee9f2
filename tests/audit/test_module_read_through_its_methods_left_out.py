"""A module the script never calls, whose parameters the loss reads through its methods, left
out of the optimizer of a later phase: deep kernel learning (Wilson et al. 2016; the gpytorch
DKL example builds one Adam over the feature extractor, the kernel, the mean and the
likelihood) fits a Gaussian process's noise, ``likelihood.noise()``, in the marginal
likelihood's term beside the kernel's. Made for the second phase after the first phase's
optimizer was built, and before the second's, it is no replacement of a tensor an optimizer
holds: ``unstepped``, named at the second optimizer's line, with the group that adds it, which
trains as the published script."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Likelihood(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_noise = nn.Parameter(torch.tensor(-1.0))

    def noise(self):
        return self.log_noise.exp()


x, y = torch.randn(16, 2), torch.randn(16)
features = nn.Linear(2, 3)
head = nn.Linear(3, 1)
pre = torch.optim.Adam([*features.parameters(), *head.parameters()], lr=1e-2)
for step in range(3):
    loss = (head(features(x)).squeeze(-1) - y).pow(2).mean()
    pre.zero_grad()
    loss.backward()
    pre.step()
likelihood = Likelihood()
optimizer = torch.optim.Adam(GROUPS, lr=1e-2)
for step in range(3):
    z = features(x)
    k = torch.exp(-torch.cdist(z, z) ** 2) + likelihood.noise() * torch.eye(16)
    chol = torch.linalg.cholesky(k)
    alpha = torch.cholesky_solve(y[:, None], chol)
    loss = 0.5 * (y[:, None] * alpha).sum() + torch.log(torch.diagonal(chol)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"features": features.state_dict(), "likelihood": likelihood.state_dict()},
               args.out)
"""

PUBLISHED = SCRIPT.replace("GROUPS", "[*features.parameters(), *likelihood.parameters()]")
LEFT_OUT = SCRIPT.replace("GROUPS", "features.parameters()")


def test_the_module_left_out_is_unstepped_at_the_optimizer_and_its_edit_trains(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(LEFT_OUT, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    line = LEFT_OUT.splitlines().index("optimizer = torch.optim.Adam(features.parameters(), "
                                       "lr=1e-2)") + 1
    assert code == 1 and found and found[0]["at"][0].startswith(f"train.py:{line}:"), \
        [f["message"] for f in report["findings"]]
    assert "likelihood" in found[0]["names"]
    (tmp_path / "fix").mkdir()
    applied_and_trains(twins(tmp_path / "fix", PUBLISHED, LEFT_OUT), "unstepped", "--watch", "1")
