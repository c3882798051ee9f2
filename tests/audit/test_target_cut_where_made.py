"""``audit_step``: a trained target is cut where the code computes it, not where the comparison
reads a part of it (``targets[mask]``): the selection computes nothing of the target, and the
line that does is the cause (data2vec's targets, averaged from a teacher's layers and compared
at the masked positions only). A target computed on the comparison's own line is cut there."""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from toolkit.audit import Proof, audit_step

torch.manual_seed(0)
embed, head, teacher = nn.Linear(3, 4), nn.Linear(4, 4), nn.Linear(4, 4)
optimizer = torch.optim.SGD([*embed.parameters(), *head.parameters()], lr=0.1)
X = torch.randn(8, 3)
MASK = torch.arange(8) % 2 == 0


def masked_targets() -> torch.Tensor:
    outs = teacher(embed(X))
    targets = outs / 2
    return F.mse_loss(head(embed(X))[MASK], targets[MASK])


def targets_on_the_comparison_line() -> torch.Tensor:
    return F.mse_loss(head(embed(X))[MASK], (teacher(embed(X)) / 2)[MASK])


def _line(step, text: str) -> int:
    lines, first = inspect.getsourcelines(step)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_target_selected_where_it_is_compared_is_cut_where_it_is_computed():
    (found,) = audit_step(masked_targets, optimizer).targets
    (edit,) = found.edits
    assert edit.line == _line(masked_targets, "targets = outs / 2")
    assert (edit.old, edit.new) == ("outs / 2", "(outs / 2).detach()")
    assert found.proof is Proof.IN_PROCESS


def test_a_target_computed_on_the_comparison_line_is_cut_on_that_line():
    (found,) = audit_step(targets_on_the_comparison_line, optimizer).targets
    assert {e.line for e in found.edits} == {_line(targets_on_the_comparison_line, "return")}
    assert found.proof is Proof.IN_PROCESS
