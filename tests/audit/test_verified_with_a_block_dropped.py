"""The verification of an edit, where a block the finding is about does not run at the step it
is checked on: stochastic depth (Huang et al. 2016, arXiv:1603.09382) drops residual blocks at
random in each training step, so a dropped block's tensors get no gradient in that step in any
script, the published one too. A fine-tuning phase that computes the features under
``torch.no_grad()`` starves the whole backbone (``dead``); the edit that takes the features out of
``no_grad`` reaches every block that runs, and a block dropped at the step it is checked on is
not held against it: its module ran no forward with a graph since its last step (the
evaluation between the phases runs it under no_grad). The edit is verified, and the fixed script
trains as the published one."""

from __future__ import annotations

from script_audit import audit, check_fix, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, h):
        return h + self.net(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.fc = nn.Linear(8, 3)

    def features(self, x, dropped=()):
        h = self.stem(x)
        for i, block in enumerate(self.blocks):
            if i not in dropped:   # stochastic depth: a dropped block is the identity
                h = block(h)
        return h


model = Net()
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):   # pre-training: every block runs
    loss = F.cross_entropy(model.fc(model.features(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():   # an evaluation: every block runs, with no graph
    accuracy = (model.fc(model.features(x)).argmax(1) == y).float().mean()
model.fc = nn.Linear(8, 3)   # a new head, fine-tuned with the backbone
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(4):
    dropped = (1,) if step % 2 == 0 else ()
    FEATURES
    loss = F.cross_entropy(model.fc(feats), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

PUBLISHED = "feats = model.features(x, dropped)"
BUGGY = "with torch.no_grad():\n        feats = model.features(x, dropped)"


def test_a_block_dropped_at_the_checked_step_does_not_fail_the_edit_that_revives_it(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(SCRIPT.replace("FEATURES", PUBLISHED))
    (folder / "train.py").write_text(SCRIPT.replace("FEATURES", BUGGY))
    code, report = audit(tmp_path, folder / "train.py")
    dead = [f for f in failures(report) if f["kind"] == "dead"]
    assert code == 1 and len(dead) == 1, [f["message"] for f in failures(report)]
    # the block dropped at that step is among the tensors it is about
    assert {"model.blocks.1.net.0.weight", "model.stem.weight"} <= set(dead[0]["names"])
    check_fix(tmp_path, folder, "dead")
