"""A new loop begins at its first ``backward()``, not at a later one of its first pass: ADDA
(Tzeng et al. 2017; corenel/pytorch-adda, core/adapt.py ``train_tgt``) pre-trains a source
encoder, then each adaptation step trains the critic (a ``backward()`` at a line not seen
before) and then the target encoder (a second one). The critic's optimizer steps between the
two; it was counted as an earlier loop's, so the target loss, which trains the critic too,
looked like the loss of an optimizer built over the wrong network and got an edit that swaps
its parameters. The target features cut by ``.detach()`` are the bug: the cut is named and
removed, and the script then trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, failures, recorded, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
src_encoder, classifier = nn.Linear(4, 3), nn.Linear(3, 2)
critic = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
xs, ys = torch.randn(32, 4), torch.randint(0, 2, (32,))
xt = torch.randn(32, 4) + 0.5
opt = torch.optim.Adam([*src_encoder.parameters(), *classifier.parameters()], lr=0.01)
for step in range(3):
    loss = F.cross_entropy(classifier(src_encoder(xs)), ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
tgt_encoder = copy.deepcopy(src_encoder)
optimizer_tgt = torch.optim.Adam(tgt_encoder.parameters(), lr=0.01)
optimizer_critic = torch.optim.Adam(critic.parameters(), lr=0.01)
for step in range(3):
    feat = torch.cat([src_encoder(xs), tgt_encoder(xt)]).detach()
    label = torch.cat([torch.zeros(32), torch.ones(32)]).long()
    optimizer_critic.zero_grad()
    loss_critic = F.cross_entropy(critic(feat), label)
    loss_critic.backward()
    optimizer_critic.step()
    optimizer_critic.zero_grad()
    optimizer_tgt.zero_grad()
    feat_tgt = tgt_encoder(xt)
    loss_tgt = F.cross_entropy(critic(feat_tgt), torch.zeros(32).long())
    loss_tgt.backward()
    optimizer_tgt.step()
if args.out:
    torch.save({"tgt": tgt_encoder.state_dict(), "critic": critic.state_dict()}, args.out)
"""

DETACHED = PUBLISHED.replace("critic(feat_tgt)", "critic(feat_tgt.detach())")


def test_the_cut_is_named_and_no_optimizer_is_called_built_over_the_wrong_network(tmp_path):
    folder = twins(tmp_path, PUBLISHED, DETACHED)
    assert not failures(recorded(folder, tmp_path / "published", "published.py",
                                 "--watch", "1"))
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "feat_tgt.detach() -> feat_tgt" in done.stdout, done.stdout
    assert "built over the wrong parameters" not in done.stdout, done.stdout
