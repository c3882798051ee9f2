"""``audit_step``: a trained target's cut is verified when the tensors it is about still
train, some of them: one may get no gradient in the published step either (a ReLU unit that
never fires, a bias whose gradient is a sum that cancels, as GradCache's passage bias under an
in-batch softmax does up to rounding), and demanding a gradient of every one made a right cut
fail its own check, exactly or by a rounding, as the kernel chose."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from toolkit.audit import Proof, audit_step

torch.manual_seed(0)
embed, side = nn.Linear(3, 4), nn.Linear(3, 4)
head, teacher = nn.Linear(4, 4), nn.Linear(4, 4)
with torch.no_grad():
    side.bias.fill_(-1e3)      # a branch that never fires: no gradient, cut or not
optimizer = torch.optim.SGD([*embed.parameters(), *side.parameters(), *head.parameters()],
                            lr=0.1)
X = torch.randn(8, 3)


def features() -> torch.Tensor:
    return F.relu(embed(X)) + F.relu(side(X))


def taught() -> torch.Tensor:
    targets = teacher(features())
    return F.mse_loss(head(features()), targets)


def test_a_target_cut_is_verified_though_one_of_its_tensors_gets_no_gradient():
    (found,) = audit_step(taught, optimizer).targets
    assert {"side.bias", "embed.bias"} <= set(found.parameters)
    assert [(e.old, e.new) for e in found.edits] == [("teacher(features())",
                                                       "teacher(features()).detach()")]
    assert found.proof is Proof.IN_PROCESS
