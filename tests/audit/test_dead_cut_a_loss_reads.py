"""Two cuts keep a loss from the same tensors, and only one of them is read by an operation
with a graph: NNCLR's predictor reading a cut projection (the stop-gradient put on the
predictor's input), and the stop-gradient after it, whose values only choose a support-set row
(``argmax``). The ``dead`` failure blames the cut the loss reads, later or not, and removing it
trains the network as the published script does."""

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
net, predictor = nn.Linear(6, 4), nn.Linear(4, 4)
optimizer = torch.optim.SGD([*net.parameters(), *predictor.parameters()], lr=0.1)
bank = F.normalize(torch.randn(32, 4), dim=1)
x = torch.randn(16, 6)
for step in range(3):
    z = net(x + 0.1 * torch.randn_like(x))
    p = predictor(INPUT)
    z = z.detach()
    keys = bank[(F.normalize(z, dim=1) @ bank.T).argmax(dim=1)]
    logits = F.normalize(keys, dim=1) @ F.normalize(p, dim=1).T / 0.1
    loss = F.cross_entropy(logits, torch.arange(16))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"net": net.state_dict(), "predictor": predictor.state_dict()}, args.out)
"""


def test_the_cut_the_loss_reads_is_blamed_and_its_removal_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("INPUT", "z"), SCRIPT.replace("INPUT", "z.detach()"))
    assert audit(tmp_path, folder / "published.py", "--steps", "2")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["dead"]
    assert found[0]["at"][0] == "train.py:16: p = predictor(z.detach())"
    applied(folder, "dead", "--steps", "2")
    assert_trains_as(folder)
