"""A target part bound to the online part in the model's constructor (SPR's
``self.global_target_classifier = self.global_classifier`` without its ``copy.deepcopy``), read
by the script as ``model.target_head``: the ``aliased`` failure is at that binding, as the
constructor spells it, and its edit copies the part there. The copy adds tensors to
``model.parameters()`` in the middle of the optimizer's list, and the script clips the
encoder's and the head's gradients apart from the transition model's: the verifier compares
the two runs' gradients by the tensors' names, and takes the clipped groups each rescaled by
a factor of its own, so the edit is verified; the fixed script trains as the published one."""

from __future__ import annotations

import pytest
import torch
from script_audit import applied_and_trains, twins

from toolkit.audit.verify.rerun import _aligned, _differs

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 8)
        self.transition = nn.Linear(8, 8)
        self.target_head = TARGET
        self.final = nn.Linear(8, 8)
        for p in self.target_head.parameters():
            p.requires_grad = False


torch.manual_seed(0)
model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 4), torch.randn(32, 8)
for step in range(5):
    latent = model.encoder(x)
    with torch.no_grad():
        target = model.target_head(model.encoder(x + 0.1))
    pred = model.final(model.head(model.transition(latent)))
    loss = F.mse_loss(pred, target) + F.mse_loss(model.head(latent), y)
    optimizer.zero_grad()
    loss.backward()
    stem = [*model.encoder.parameters(), *model.head.parameters()]
    torch.nn.utils.clip_grad_norm_(stem, 0.5)
    torch.nn.utils.clip_grad_norm_(model.transition.parameters(), 0.5)
    optimizer.step()
    with torch.no_grad():
        for p, q in zip(model.head.parameters(), model.target_head.parameters()):
            q.copy_(0.9 * q + 0.1 * p)
if args.out:
    torch.save(model.state_dict(), args.out)
"""


@pytest.mark.slow
def test_the_binding_in_the_constructor_is_copied_and_the_edit_verified(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("TARGET", "copy.deepcopy(self.head)"),
                   SCRIPT.replace("TARGET", "self.head"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "train.py:18: self.target_head = self.head" in done.stdout
    assert "self.target_head = copy.deepcopy(self.head)\n" in (folder / "train.py").read_text()


def test_gradients_clipped_in_groups_are_the_same_up_to_a_factor_per_group():
    torch.manual_seed(0)
    grads = [torch.randn(3) for _ in range(5)]
    scaled = [g * f for g, f in zip(grads, (0.5, 0.5, 0.25, 0.25, 1.0))]
    assert _differs(scaled, grads) is None
    turned = [*scaled[:4], grads[4].flip(0)]
    assert _differs(turned, grads) == 4
    four = [g * f for g, f in zip(grads, (0.9, 0.8, 0.7, 0.6, 1.0))]
    assert _differs(four, grads) == 3


def test_gradients_are_paired_by_name_where_an_edit_moved_a_tensor_in_the_list():
    a, b = torch.ones(2), torch.zeros(2)
    ours = [{"grads": {"opt0.0.0": a, "opt0.0.1": b},
             "names": {"opt0.0.0": "m.w", "opt0.0.1": "m.final"}}]
    theirs = [{"grads": {"opt0.0.0": a, "opt0.0.3": b},
               "names": {"opt0.0.0": "m.w", "opt0.0.3": "m.final"}}]
    mine, other, renamed = _aligned(ours, theirs)
    assert mine[0]["grads"].keys() == other[0]["grads"].keys() == {"m.w", "m.final"}
    assert renamed == {"opt0.0.0": "m.w", "opt0.0.1": "m.final"}
    same = _aligned(ours, ours)
    assert same[0] is ours and same[2] == {}
