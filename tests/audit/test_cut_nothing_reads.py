"""A cut nothing reads (``void_cut``): Learning Loss for Active Learning (Yoo & Kweon 2019,
Mephisto405/Learning-Loss-for-Active-Learning, main.py ``train_epoch``) cuts the backbone's
features before its loss-prediction module reads them, ``features[k] = features[k].detach()``,
so that the module's loss stops training the backbone. Written ``for f in features: f =
f.detach()``, the cut rebinds the loop's variable and the list keeps the features whole: the
module's loss trains the backbone. The failure is at the cut, its edit replaces the loop by
``features = [f.detach() for f in features]``, and the fixed script trains as the published
one. The same loop whose variable is read after the cut, a cut dropped as a statement of its
own (``x.detach()``), and a dropped cut of a value no loss reads (nothing changes) are told
apart."""

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
backbone = nn.ModuleList([nn.Linear(4, 6), nn.Linear(6, 3)])
module = nn.Linear(9, 1)
backbone_optimizer = torch.optim.SGD(backbone.parameters(), lr=0.1)
module_optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(8, 4), torch.randn(8, 3)
    first = torch.relu(backbone[0](x))
    out = backbone[1](first)
    features = [first, out]
    target_loss = ((out - y) ** 2).mean(1)
    CUT
    predicted = module(torch.cat(features, 1)).squeeze(1)
    loss = target_loss.mean() + ((predicted - target_loss.detach()) ** 2).mean()
    backbone_optimizer.zero_grad()
    module_optimizer.zero_grad()
    loss.backward()
    backbone_optimizer.step()
    module_optimizer.step()
if args.out:
    torch.save({"backbone": backbone.state_dict(), "module": module.state_dict()}, args.out)
"""

PUBLISHED = """for i in range(len(features)):
        features[i] = features[i].detach()"""
REBOUND = """for f in features:
        f = f.detach()"""


def test_a_cut_the_loop_rebinds_is_found_and_its_edit_trains_as_published(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CUT", PUBLISHED), SCRIPT.replace("CUT", REBOUND))
    done = applied_and_trains(folder, "void_cut")
    assert "train.py:20" in done.stdout and "backbone" in done.stdout, done.stdout
    assert "features = [f.detach() for f in features]" in (folder / "train.py").read_text()


@pytest.mark.parametrize(("cut", "found"), [
    (REBOUND, True),
    # read after the cut in the loop's body: the cut takes effect there
    ("for f in features:\n        f = f.detach()\n        print(f.shape)", False),
    # a statement of its own: its result is dropped
    ("features[0].detach()", True),
    # dropped, but its value reaches no optimizer's tensor by another way: nothing changes
    ("y.detach()", False),
    (PUBLISHED, False),
], ids=["rebound", "read_in_the_loop", "dropped", "dropped_of_a_plain_value", "published"])
def test_only_a_cut_nothing_reads_is_a_failure(tmp_path, cut, found):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("CUT", cut), encoding="utf-8")
    code, report = audit(tmp_path, script, "--steps", "2")
    void = [f for f in failures(report) if f["kind"] == "void_cut"]
    assert bool(void) == found, [f["message"] for f in failures(report)]
    assert (code == 1) == found, [f["message"] for f in failures(report)]
