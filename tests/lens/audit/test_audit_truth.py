"""The audit's counts come from a real backward (issue 62): one ``torch.autograd.grad`` per loss
of the recorded call, never ``.grad``. A gradient that is reached but exactly zero is dead; the
operation where it becomes zero is named; the printed edit is applied and the edited step is
trained with a real ``backward()``.

The step: a discrete bottleneck (a categorical code, as in a VQ or Gumbel straight-through
layer) whose straight-through line lost its cut, ``soft + (hard - soft)`` (the form of
``F.gumbel_softmax(..., hard=True)``, pytorch/pytorch torch/nn/functional.py, without its
``.detach()``): forward it is the hard code, backward every encoder tensor gets exactly zero.
"""

from __future__ import annotations

import pathlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step
from toolkit.audit.fixes.edits import apply_edits


def _bottleneck(seed: int):
    torch.manual_seed(seed)
    enc, dec = nn.Linear(4, 3), nn.Linear(3, 2)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-3)
    x, t = torch.randn(8, 4), torch.randn(8, 2)
    return enc, dec, opt, x, t


def _real_grads(enc, dec, loss):
    params = [*enc.parameters(), *dec.parameters()]
    return torch.autograd.grad(loss, params, allow_unused=True)


def bottleneck_step(enc, dec, x, t):
    def step():
        soft = enc(x).softmax(-1)
        hard = F.one_hot(soft.argmax(-1), 3).to(soft.dtype)
        code = soft + (hard - soft)
        return F.mse_loss(dec(code), t)
    return step


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradients_that_cancel_exactly_are_dead_with_the_line_where_they_cancel(seed: int):
    enc, dec, opt, x, t = _bottleneck(seed)
    step = bottleneck_step(enc, dec, x, t)
    grads = _real_grads(enc, dec, step())  # the oracle: a real backward
    assert all(not g.any() for g in grads[:2]) and all(g.any() for g in grads[2:])
    audit = audit_step(step, opt)
    assert not audit.ok
    assert sorted(d.parameter for d in audit.dead) == ["enc.bias", "enc.weight"], str(audit)
    assert {d.kind for d in audit.dead} == {"cancelled"}, str(audit)
    (line,) = {x for d in audit.dead for x in d.lines}
    assert line.text == "code = soft + (hard - soft)"
    assert all("Softmax" in d.cut for d in audit.dead), str(audit)
    assert not audit.leaks and not enc.weight.grad and not dec.weight.grad  # no .grad touched
    # the printed edit, applied: the same forward values, every stepped tensor trains, and the
    # decoder's gradient (not about the finding) is unchanged
    (edit,) = audit.edits  # run before it was printed: verified
    fixed = apply_edits(pathlib.Path(__file__).read_text(encoding="utf-8"), [edit])
    assert "code = soft + stop_gradient(hard - soft)" in fixed
    scope: dict = {"__name__": "edited"}
    exec(compile(fixed, __file__, "exec"), scope)
    fixed_step = scope["bottleneck_step"](enc, dec, x, t)
    torch.testing.assert_close(fixed_step(), step())
    after = _real_grads(enc, dec, fixed_step())
    assert all(g.any() for g in after)
    torch.testing.assert_close(after[2:], grads[2:])
    assert audit_step(fixed_step, opt).ok


def test_a_gradient_of_zeros_on_one_call_only_is_not_dead():
    """A ReLU layer off for every row of one batch gets zeros then; on the next batch it
    trains: dead means dead on both calls."""
    torch.manual_seed(0)
    layer, head = nn.Linear(2, 2), nn.Linear(2, 1)
    opt = torch.optim.SGD([*layer.parameters(), *head.parameters()], lr=0.1)
    batches = iter([torch.ones(4, 2), -torch.ones(4, 2)])
    with torch.no_grad():
        layer.weight.copy_(torch.eye(2))
        layer.bias.zero_()

    def step():
        return head(torch.relu(layer(next(batches)))).mean()

    assert audit_step(step, opt).ok


class _Sender(nn.Module):
    """An emergent-communication sender (facebookresearch/EGG, egg/core/gs_wrappers.py
    ``GumbelSoftmaxWrapper``): in training a hard Gumbel-softmax sample, whose straight-through
    gradient trains it; in eval mode the argmax, which passes none."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.fc(x)
        if self.training:
            return F.gumbel_softmax(logits, tau=1.0, hard=True)
        return F.one_hot(logits.argmax(-1), 5).to(logits.dtype)


def _game(seed: int, train: bool):
    torch.manual_seed(seed)
    sender, receiver = _Sender(), nn.Linear(5, 3)
    sender.train(train)
    opt = torch.optim.Adam([*sender.parameters(), *receiver.parameters()], lr=1e-3)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    return sender, receiver, opt, lambda: F.cross_entropy(receiver(sender(x)), y)


@pytest.mark.parametrize("seed", [0, 1])
def test_tensors_dead_after_an_argmax_in_eval_mode_are_not_edited_out_of_the_optimizer(seed):
    sender, _, opt, step = _game(seed, train=False)
    audit = audit_step(step, opt)
    assert sorted(d.parameter for d in audit.dead) == ["sender.fc.bias", "sender.fc.weight"]
    assert all(d.kind == "integer_result" for d in audit.dead), str(audit)
    # no edit leaves them out of the optimizer: the user decides, at the line of the argmax
    assert all(not d.edits for d in audit.dead) and not audit.leaks, str(audit)
    (line,) = {x for d in audit.dead for x in d.lines}
    assert "argmax" in line.text and line.function == "forward"
    assert all("in the forward of sender, which is in eval mode" in d.cut for d in audit.dead)
    assert all("sender.train()" in d.fix for d in audit.dead), str(audit)
    # what the fix says, followed: in train mode the sender trains, as a real backward shows
    sender.train()
    grads = torch.autograd.grad(step(), [*sender.parameters()], allow_unused=True)
    assert all(g is not None and g.any() for g in grads)
    assert audit_step(step, opt).ok


def test_an_argmax_in_the_step_itself_is_not_edited_out_of_the_optimizer_either():
    torch.manual_seed(0)
    enc, emb = nn.Linear(4, 3), nn.Embedding(3, 2)
    opt = torch.optim.SGD([*enc.parameters(), *emb.parameters()], lr=0.1)
    x = torch.randn(8, 4)

    def step():
        code = enc(x).argmax(-1)
        return emb(code).pow(2).mean()

    audit = audit_step(step, opt)
    assert sorted(d.parameter for d in audit.dead) == ["enc.bias", "enc.weight"], str(audit)
    assert all(d.kind == "integer_result" and not d.edits for d in audit.dead), str(audit)
