"""``toolkit audit SCRIPT``: a network's buffer that shares its storage with a tensor an
optimizer steps (``at_step.views``). Scripts written for it in the shape of Mixout (Lee et al.
2020, "Mixout: Effective Regularization to Finetune Large-scale Pretrained Language Models"): a
linear layer whose weight is mixed, at training time, towards a target kept as a buffer, the
pre-trained weight, which must stay where it was.

- The target registered as ``self.weight.detach()``, no copy: each step moves it with the
  weight. A failure at the registration, one for every layer that registers it so, whose edit
  takes a copy there and trains as the published script.
- No finding: the published layer (a copy), and a buffer that holds a statistic of the weight
  computed anew (a running mean), whatever it shares with nothing.
"""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, audit, check_fix, failures, twins

PUBLISHED = '''\
import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class MixLinear(nn.Module):
    def __init__(self, n_in, n_out, p=0.3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)
        self.register_buffer("target", self.weight.detach().clone())
        self.register_buffer("mean", torch.zeros(n_out))
        self.p = p

    def forward(self, x):
        keep = torch.bernoulli(torch.full((1, self.weight.size(1)), 1 - self.p))
        w = ((1 - keep) * self.target + keep * self.weight - self.p * self.target) / (1 - self.p)
        out = F.linear(x, w)
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * out.mean(0))
        return out


net = nn.Sequential(MixLinear(4, 8), nn.Tanh(), MixLinear(8, 2))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
x, y = torch.randn(32, 4), torch.randn(32, 2)
for step in range(4):
    loss = F.mse_loss(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"net": net.state_dict()}, args.out)
'''

SHARED = PUBLISHED.replace('self.register_buffer("target", self.weight.detach().clone())',
                           'self.register_buffer("target", self.weight.detach())')


def test_a_buffer_that_shares_a_stepped_weight_is_a_failure_at_its_registration(tmp_path):
    (tmp_path / "train.py").write_text(SHARED, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "aliased" and found["iteration"] == 0
    assert found["at"][0].startswith("train.py:17:")
    assert {"net.0.target", "net.2.target", "net.0.weight", "net.2.weight"} <= set(
        found["names"])
    (edit,) = found["edits"]
    assert edit["new"] == "self.weight.detach().clone()"


def test_the_published_layer_is_no_finding(tmp_path):
    (tmp_path / "train.py").write_text(PUBLISHED, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
def test_the_edit_trains_as_the_published_script(tmp_path):
    folder = twins(tmp_path, PUBLISHED, SHARED)
    check_fix(tmp_path, folder, "aliased", "--watch", "1")
    assert_trains_as(folder)
