"""The attack of TRADES (Zhang et al. 2019, arXiv:1901.08573; yaodongyu/TRADES, trades.py,
``trades_loss``) maximises the KL divergence from the model's prediction on the clean input,
``criterion_kl(F.log_softmax(model(x_adv)), F.softmax(model(x_natural)))``, with
``loss.backward()``: the clean prediction is a target that carries gradient into the model's
weights, and the script clears those gradients (``optimizer.zero_grad()``) before the
training loss's backward. No weight changed: no ``target`` failure stands, neither the
watch's (withdrawn by name) nor the step audit's of the same loss. Clearing them before the
attack instead leaves the attack's gradient in the model's ``.grad`` at its step: the failures
stand."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
optimizer = optim.SGD(model.parameters(), lr=0.1)
kl = nn.KLDivLoss(reduction="batchmean")


def attack(x):
    delta = 0.001 * torch.randn(x.shape)
    for _ in range(3):
        delta.requires_grad_()
        loss = kl(F.log_softmax(model(x + delta), dim=1), F.softmax(model(x), dim=1))
        loss.backward()
        delta = (delta.detach() + 0.1 * delta.grad.sign()).clamp(-0.3, 0.3)
    return (x + delta).detach()


for step in range(4):
    x = torch.randn(16, 4)
    y = torch.randint(0, 3, (16,))
ORDER
    logits = model(x)
    loss = F.cross_entropy(logits, y) + 6.0 * kl(F.log_softmax(model(x_adv), dim=1),
                                                 F.softmax(model(x), dim=1))
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""

CLEARED = "    x_adv = attack(x)\n    optimizer.zero_grad()"
LEFT = "    optimizer.zero_grad()\n    x_adv = attack(x)"


def test_an_attack_target_whose_gradient_is_cleared_is_no_failure(tmp_path):
    script = SCRIPT.replace("ORDER", CLEARED)
    folder = twins(tmp_path, script, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
    assert "toolkit audit: 0 failures" in done.stdout, done.stdout
    assert "compares with a target" not in done.stdout, done.stdout


def test_an_attack_target_whose_gradient_reaches_the_step_is_a_failure(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("ORDER", CLEARED), SCRIPT.replace("ORDER", LEFT))
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    leak: the gradient of `loss`" in done.stdout, done.stdout
    assert "withdrawn" not in done.stdout, done.stdout
