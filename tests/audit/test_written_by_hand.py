"""A gradient the script writes into ``.grad`` itself from what ``torch.autograd.grad`` returned.
Taken over the tensors it writes (GradNorm's task weights, after Chen et al., "GradNorm", ICML
2018, arXiv:1711.02257), the loss it came from is audited as a backward over them: no closing
line calls it unchecked. Taken over other tensors (a copy of the weights, as first-order MAML
takes it over the adapted ones), no rule reads that loss as the written tensor's: a run that
ends with "0 failures" says in a closing line that it was not checked, naming the tensor and
the line. A ``.grad`` rewritten from a backward's own gradient (clipped by hand) or a gradient
penalty that ``torch.autograd.grad`` computes inside a loss the backward reads is audited, and
no such line is printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import audit

STEP = """\
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Linear(4, 2)
weights = nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([*net.parameters(), weights], lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    losses = ((net(x) - y) ** 2).mean(0)
    opt.zero_grad()
    (weights * losses).sum().backward(retain_graph=True)
{after}
    opt.step()
"""

#: GradNorm's form: the task weights' gradient from a loss on the weighted gradient norms
BY_HAND = """\
    norms = torch.stack([weights[i] * torch.autograd.grad(losses[i], net.weight,
                                                          retain_graph=True)[0].norm()
                         for i in range(2)])
    weights.grad = torch.autograd.grad((norms - norms.mean().detach()).abs().sum(), weights)[0]
"""

#: the gradient taken over a copy of the weights and written into the weights' ``.grad``
OVER_A_COPY = """\
    copy = net.weight * 1.0
    copied = ((x @ copy.t() + net.bias.detach() - y) ** 2).mean()
    net.weight.grad = torch.autograd.grad(copied, copy)[0]
"""

#: GradNorm's norms, each over the parameters of a layer as a generator (``W.parameters()``)
OVER_A_GENERATOR = """\
    norms = torch.stack([weights[i] * torch.autograd.grad(losses[i], net.parameters(),
                                                          retain_graph=True)[0].norm()
                         for i in range(2)])
    weights.grad = torch.autograd.grad((norms - norms.mean().detach()).abs().sum(), weights)[0]
"""

CLIPPED = """\
    net.weight.grad = net.weight.grad.clamp(-0.1, 0.1)
"""

PENALTY = """\
    x.requires_grad_(True)
    gx = torch.autograd.grad(net(x).sum(), x, create_graph=True)[0]
    (gx.norm(dim=1) - 1).pow(2).mean().backward()
"""


def _closing(tmp_path: Path, after: str) -> list[str]:
    script = tmp_path / "train.py"
    script.write_text(STEP.format(after=after.rstrip("\n")), encoding="utf-8")
    code, report = audit(tmp_path, script)
    assert code == 0, report["findings"]
    return report["not_checked"]


def test_a_gradient_taken_over_other_tensors_is_named_as_not_checked(tmp_path: Path) -> None:
    lines = [n for n in _closing(tmp_path, OVER_A_COPY) if "torch.autograd.grad" in n]
    assert len(lines) == 1, lines
    assert "`net.weight`" in lines[0] and "train.py:14" in lines[0], lines[0]
    assert "from torch.autograd.grad over other tensors" in lines[0]


@pytest.mark.parametrize("after", [BY_HAND, OVER_A_GENERATOR, CLIPPED, PENALTY],
                         ids=["over-the-written-tensor", "over-a-generator", "clipped",
                              "penalty"])
def test_gradients_an_audited_backward_made_are_not_named(tmp_path: Path, after: str) -> None:
    assert not [n for n in _closing(tmp_path, after) if "torch.autograd.grad" in n]
