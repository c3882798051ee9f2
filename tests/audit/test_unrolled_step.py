"""``audit_step`` on an iteration written twice (:mod:`toolkit.audit.rules.unrolled`): a loop
followed by its own pass again is the form of a Jacobian-free (one-step) or truncated gradient,
which cuts what the loop's passes hand on. Uncut, the loss trains through every pass: a
failure at the loop's statement, whose cut the audit runs before printing it. Cut, or under
``no_grad``, or a split whose parts differ (a second loop with a loss term more), or one loop
alone: no finding."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit.audit import UnrolledLoop, apply_edits, audit_step
from toolkit.audit.kinds import Kind, Proof
from toolkit.audit.record.unrolls import unroll_at

torch.manual_seed(0)
X, Y = torch.randn(8, 3), torch.randint(0, 2, (8,))


class Implicit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Linear(4, 4)
        self.U = nn.Linear(3, 4)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(0.5 * self.W(z) + self.U(x))


def _model() -> tuple[Implicit, nn.Linear, torch.optim.Optimizer]:
    layer, head = Implicit(), nn.Linear(4, 2)
    return layer, head, torch.optim.SGD([*layer.parameters(), *head.parameters()], lr=0.1)


layer, head, optimizer = _model()


def uncut_step() -> torch.Tensor:
    z = torch.zeros(8, 4)
    for _ in range(5):
        z = layer(z, X)
    z = layer(z, X)
    return F.cross_entropy(head(z), Y)


def cut_step() -> torch.Tensor:
    z = torch.zeros(8, 4)
    for _ in range(5):
        z = layer(z, X).detach()
    z = layer(z, X)
    return F.cross_entropy(head(z), Y)


def no_grad_step() -> torch.Tensor:
    z = torch.zeros(8, 4)
    with torch.no_grad():
        for _ in range(5):
            z = layer(z, X)
    z = layer(z, X)
    return F.cross_entropy(head(z), Y)


def one_loop_step() -> torch.Tensor:
    z = torch.zeros(8, 4)
    for _ in range(6):
        z = layer(z, X)
    return F.cross_entropy(head(z), Y)


def parts_differ_step() -> torch.Tensor:
    """A warm-up of the state, then passes that each add a term: the split is the loss's."""
    z = torch.zeros(8, 4)
    loss = torch.zeros(())
    for _ in range(3):
        z = layer(z, X)
    for _ in range(3):
        z = layer(z, X)
        loss = loss + F.cross_entropy(head(z), Y)
    return loss


def test_an_uncut_split_unroll_is_a_failure_at_the_loop_with_a_cut_run_before_it_is_printed():
    audit = audit_step(uncut_step, optimizer)
    assert not audit.ok
    (found,) = audit.unrolled
    assert isinstance(found, UnrolledLoop) and found.state == "z"
    assert dict(audit.findings)[Kind.CARRIED] is found
    first = inspect.getsourcelines(uncut_step)[1]
    assert found.cut.number == first + 3 and found.again.number == first + 4
    assert set(found.parameters) == {"layer.W.weight", "layer.W.bias", "layer.U.weight",
                                     "layer.U.bias"}
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("layer(z, X)", "layer(z, X).detach()")
    assert found.proof is Proof.IN_PROCESS
    assert "uncut unroll" in str(audit) and found.fix in str(audit)
    assert audit.to_dict()["unrolled"][0]["state"] == "z"


@pytest.mark.parametrize("step", [cut_step, no_grad_step, one_loop_step, parts_differ_step],
                         ids=["cut", "no-grad", "one-loop", "parts-differ"])
def test_a_cut_unroll_or_a_loop_not_written_twice_is_no_finding(step):
    audit = audit_step(step, optimizer)
    assert audit.ok and audit.unrolled == (), str(audit)


def test_the_edit_written_into_the_step_is_the_cut_step():
    (found,) = audit_step(uncut_step, optimizer).unrolled
    edited = ast.parse(apply_edits(inspect.getsource(inspect.getmodule(uncut_step)),
                                   found.edits))
    (written,) = [f for f in edited.body if getattr(f, "name", "") == "uncut_step"]
    (meant,) = ast.parse(inspect.getsource(cut_step)).body
    assert [ast.dump(s) for s in written.body] == [ast.dump(s) for s in meant.body]  # type: ignore[attr-defined]


TWO_LOOPS = '''\
import torch
w = torch.zeros(3, requires_grad=True)
for _ in range(4):
    w = step(w)
for _ in range(2):
    w = step(w)
z = torch.zeros(3)
for _ in range(4):
    z = f(z)
z = f(z) + 1
'''


def test_two_loops_of_one_body_are_a_split_and_a_state_made_trainable_stays_so(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TWO_LOOPS)
    found = unroll_at(str(path), 4)
    assert found is not None and (found.state, found.at, found.again) == ("w", 4, 5)
    assert found.leaf and found.value == (4, 4, 8, 15)
    assert unroll_at(str(path), 6) is None  # the repetition is not the earlier part
    assert unroll_at(str(path), 9) is None  # the pass after the loop is another pass
