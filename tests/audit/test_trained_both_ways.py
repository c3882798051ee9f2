"""Two patterns whose gradient through a target-like side is the method's.

TRADES (Zhang et al. 2019, eq. 5) compares the prediction at an adversarial input with the
prediction at the natural input, ``KL(f(x) || f(x'))``, and fits ``f(x)`` to the labels in the
same loss: both predictions train, and the authors' code keeps the natural side's gradient.
VAT's prediction on unlabelled data (Miyato et al. 2018) is a label guessed for data the loss
has none for, a constant by the method: still a target.

AWP (Wu et al. 2020) loads the model's weights into a proxy and steps the proxy on a loss of
its own: a copy moved toward the model and then trained by its own optimizer is no copy
trained through a comparison (MoCo's key encoder, trained by the loss that compares it with
the query encoder, still is)."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

HEAD = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
"""

CONSISTENCY = HEAD + """\
for step in range(3):
    x_other = X_OTHER
    kl = F.kl_div(F.log_softmax(model(x_other), dim=1), F.softmax(model(TARGET_INPUT), dim=1),
                  reduction="batchmean")
    loss = F.cross_entropy(model(x), y) + kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

TRADES = CONSISTENCY.replace("X_OTHER", "x + 0.05 * torch.randn_like(x)").replace(
    "TARGET_INPUT", "x")
VAT = CONSISTENCY.replace("X_OTHER", "torch.randn(32, 6)").replace(
    "TARGET_INPUT", "x_other + 0.05 * torch.randn_like(x_other)")

SYNCED = HEAD + """\
proxy = copy.deepcopy(model)
proxy_optimizer = torch.optim.SGD(proxy.parameters(), lr=0.05)
for step in range(3):
    proxy.load_state_dict(model.state_dict())
    proxy_loss = -F.cross_entropy(proxy(x), y)
    proxy_optimizer.zero_grad()
    proxy_loss.backward()
    proxy_optimizer.step()
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

KEYS = HEAD + """\
keys = copy.deepcopy(model)
optimizer = torch.optim.SGD([*model.parameters(), *keys.parameters()], lr=0.05)
for step in range(3):
    with torch.no_grad():
        for k, q in zip(keys.parameters(), model.parameters()):
            k.mul_(0.9).add_(q, alpha=0.1)
    loss = F.mse_loss(model(x), keys(x + 0.05 * torch.randn_like(x)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _kinds(tmp_path, text: str) -> tuple[int, list[str]]:
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    return code, [f["kind"] for f in failures(report)]


def test_a_kl_between_two_predictions_the_loss_fits_is_no_target(tmp_path):
    assert _kinds(tmp_path, TRADES) == (0, [])


def test_a_kl_toward_a_prediction_on_unlabelled_data_is_a_target(tmp_path):
    code, kinds = _kinds(tmp_path, VAT)
    assert code == 1 and "target" in kinds, kinds


def test_a_copy_synced_then_trained_on_its_own_loss_is_no_target(tmp_path):
    assert _kinds(tmp_path, SYNCED) == (0, [])


def test_a_moving_copy_trained_through_the_comparison_is_a_target(tmp_path):
    code, kinds = _kinds(tmp_path, KEYS)
    assert code == 1 and "target" in kinds, kinds
