"""A clear between the two backward() calls of one update: DQfD's update on an agent batch and
an expert batch (Hester et al. 2018), its ``zero_grad()`` copied from a one-batch pre-training
loop to just before the second batch's backward, after a phase whose last gradient stays in
``.grad``. The agent batch's gradient is ``cleared``; the edit moves the clear before the
first backward of the update, not after the step (which would sum the pre-training phase's last
gradient into the first update), and the fixed script trains as the published one."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, cli

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
demo_x, demo_y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(net(demo_x), demo_y)
    loss.backward()
    optimizer.step()
for step in range(4):
FIRST    agent_x, agent_y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    agent_loss = F.cross_entropy(net(agent_x), agent_y)
    agent_loss.backward()
    demo_loss = F.cross_entropy(net(demo_x), demo_y)
SECOND    demo_loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""


def test_the_clear_moves_before_the_first_backward_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    clear = "    optimizer.zero_grad()\n"
    (folder / "published.py").write_text(
        SCRIPT.replace("FIRST", clear).replace("SECOND", ""), encoding="utf-8")
    (folder / "train.py").write_text(
        SCRIPT.replace("FIRST", "").replace("SECOND", clear), encoding="utf-8")
    done = applied(folder, "cleared", "--watch", "1")
    assert "train.py:21: insert before it: optimizer.zero_grad()" in done.stdout, done.stdout
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "    optimizer.zero_grad()\n    agent_loss.backward()\n" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
