"""A bootstrap target made by a network of its own on what the prediction reads too: PEARL's
critic compares ``Q(s, a, z)`` with ``r + γ V̄(s', z)`` (Rakelly et al. 2019), both sides
reading the task variable ``z`` that the context encoder makes with its graph. The target side
runs the target value network, which the prediction side does not: it is a target, and
computed without ``torch.no_grad()`` it trains the encoder through the bootstrap term.
``target`` names it, cut where the target network's value is made, and the fixed script
trains as the published one. A centring of one forward (``x - x.mean()``) stays no target."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Linear(3, 2)
qf = nn.Linear(5, 1)
vf = nn.Linear(4, 1)
target_vf = copy.deepcopy(vf)
optimizer = torch.optim.Adam([*encoder.parameters(), *qf.parameters()], lr=0.01)
s, s2, a, r = torch.randn(16, 2), torch.randn(16, 2), torch.randn(16, 1), torch.randn(16, 1)
context = torch.randn(16, 3)
for step in range(4):
    z = encoder(context)
    q = qf(torch.cat([s, a, z], 1))
TARGET    loss = F.mse_loss(q, r + 0.9 * v_next)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({**encoder.state_dict(), **{"q." + k: v for k, v in qf.state_dict().items()}},
               args.out)
"""

PUBLISHED = ("    with torch.no_grad():\n"
             "        v_next = target_vf(torch.cat([s2, z], 1))\n")
BUG = "    v_next = target_vf(torch.cat([s2, z], 1))\n"


def test_the_target_networks_value_is_cut_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(SCRIPT.replace("TARGET", PUBLISHED), encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("TARGET", BUG), encoding="utf-8")
    done = applied(folder, "target", "--watch", "1")
    assert "train.py:21: target_vf(torch.cat([s2, z], 1)) -> " in done.stdout, done.stdout
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def test_a_centring_of_one_forward_is_no_target(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("TARGET", "    v_next = q - q.mean()\n").replace(
        "r + 0.9 * v_next", "v_next"), encoding="utf-8")
    _, report = audit(tmp_path, script, "--watch", "1")
    assert not [f for f in failures(report) if f["kind"] == "target"], failures(report)
