"""A network's output cut and then weighed into the prediction a loss compares with data is
part of that prediction: its network, left without a gradient while an optimizer holds it, is
a failure at the cut, with an edit that removes it. A cut output that meets the prediction
only in the comparison (read by the loss function itself, or added to a side of a difference
a square measures, as a Bellman residual written by hand adds it) is a target: its network,
held by the optimizer for nothing, is information (``hand_updated``).

The failure here is a gated read-out (a trained gate scales a frozen-by-mistake encoder's
features into the prediction, as a gated linear unit or an attention over values scales its
values); the targets are a TD target of a target network (Mnih et al. 2015) and a
distillation target (Hinton et al. 2015), each held by the optimizer."""

from __future__ import annotations

import pytest
from script_audit import audit, cli, failures

HEAD = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(32, 4), torch.randn(32, 3)
"""

GATED = HEAD + """
encoder = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
gate = nn.Linear(4, 3)
opt = torch.optim.SGD([*encoder.parameters(), *gate.parameters()], lr=0.1)
for step in range(3):
    with torch.no_grad():
        feats = encoder(x)
    pred = torch.sigmoid(gate(x)) * feats
    loss = F.smooth_l1_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

#: a target's forms: (the loss, read from ``q``, ``r`` and the cut ``q_next``)
TARGETS = {
    "td-target-in-the-loss-function": "F.mse_loss(q, r + 0.9 * q_next)",
    "bellman-residual-by-hand": "((q - 0.9 * q_next - r) ** 2).mean()",
    "distilled-soft-target": "F.mse_loss(q, q_next)",
}

TARGET = HEAD + """
online, target = nn.Linear(4, 3), nn.Linear(4, 3)
opt = torch.optim.SGD([*online.parameters(), *target.parameters()], lr=0.1)
r = y
for step in range(3):
    q = online(x)
    with torch.no_grad():
        q_next = target(x)
    loss = LOSS
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_cut_output_weighed_into_the_prediction_is_dead_at_its_cut(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(GATED, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["dead"], report["findings"]
    assert any(a.startswith("train.py:13:") for a in found[0]["at"]), found[0]["at"]
    assert set(found[0]["names"]) == {"encoder.0.weight", "encoder.0.bias"}
    assert found[0]["values"] == ["feats"]


def test_its_edit_takes_the_call_out_of_the_block_and_trains_the_encoder(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(GATED, encoding="utf-8")
    assert cli("--watch", "1", "--apply", "train.py", cwd=tmp_path).returncode == 1
    edited = script.read_text(encoding="utf-8")
    assert "no_grad" not in edited and "    feats = encoder(x)\n" in edited
    assert cli("--watch", "1", "train.py", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("case", sorted(TARGETS))
def test_a_cut_output_met_only_in_the_comparison_is_a_target(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(TARGET.replace("LOSS", TARGETS[case]), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
    held = [f for f in report["findings"] if f["kind"] == "hand_updated"]
    assert held and set(held[0]["names"]) == {"target.weight", "target.bias"}, \
        report["findings"]
