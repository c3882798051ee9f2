"""Tensors that scale the computation between a loss and the tensors an optimizer steps lie
between them, however far from it they are made: QMIX's mixing weights, made by hypernetworks
from the state and multiplied with the agents' chosen Q-values. A mixer left out of the
optimizer is ``unstepped`` at the optimizer's line, with the parameter group that adds it, and
the fixed script trains as the published one. Features concatenated beside a trained encoder's
and read by a trained head are not scaled into anything: a backbone below, wasted work."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, failures, twins

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.b = nn.Linear(4, 2), nn.Linear(4, 1)

    def forward(self, q, state):
        return (q * self.w(state).abs()).sum(dim=1) + self.b(state).squeeze(1)


agent = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
mixer = Mixer()
params = list(agent.parameters())
PARAMS
optimizer = torch.optim.SGD(params, lr=0.05)
for step in range(3):
    obs, state, target = torch.randn(16, 2, 3), torch.randn(16, 4), torch.randn(16)
    q = agent(obs).max(dim=2).values
    q_tot = mixer(q, state)
    loss = F.mse_loss(q_tot, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"agent": agent.state_dict(), "mixer": mixer.state_dict()}, args.out)
"""

MIXER = "params += list(mixer.parameters())"


def test_a_mixer_left_out_is_unstepped_and_its_group_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("PARAMS", MIXER),
                   SCRIPT.replace("PARAMS", ""))
    assert audit(tmp_path, folder / "published.py", "--steps", "2")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"]
    assert found[0]["at"][0].startswith("train.py:25: optimizer = torch.optim.SGD(")
    assert {"mixer.w.weight", "mixer.b.weight"} <= set(found[0]["names"])
    applied(folder, "unstepped", "--steps", "2")
    assert_trains_as(folder)


def test_features_beside_a_trained_encoder_below_a_trained_head_are_wasted(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "torch.manual_seed(0)\n"
        "frozen, encoder, head = nn.Linear(3, 4), nn.Linear(3, 4), nn.Linear(8, 1)\n"
        "optimizer = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)\n"
        "for step in range(3):\n"
        "    x, y = torch.randn(16, 3), torch.randn(16, 1)\n"
        "    loss = F.mse_loss(head(torch.cat([frozen(x), encoder(x)], dim=1)), y)\n"
        "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n",
        encoding="utf-8")
    code, report = audit(tmp_path, script, "--steps", "2")
    assert code == 0 and not failures(report)
    assert [f["kind"] for f in report["findings"]] == ["wasted"]
