"""``audit_step`` on the uncut unrolls of :mod:`toolkit.audit.rules.unrolled`.

- An iteration written twice: a loop followed by its own pass again is the form of a
  Jacobian-free (one-step) or truncated gradient, which cuts what the loop's passes hand on.
  Uncut, the loss trains through every pass: a failure at the loop's statement, whose cut the
  audit runs before printing it. Cut, or under ``no_grad``, or a split whose parts differ (a
  second loop with a loss term more), or one loop alone: no finding.
- An estimate compared at each pass and read as the next pass's sampling positions (a
  one-dimensional RAFT-style refinement): a failure where each pass reads it, the cut run
  before it is printed. Cut there: no finding. Positions no loss compares (a spatial
  transformer's; a flow trained by warping alone), or a compared flow whose warped image goes
  only into a photometric term: no finding.
"""

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
        z = layer(z, X)
    z = z.detach()
    z = layer(z, X)
    return F.cross_entropy(head(z), Y)


def cut_in_the_loop_step() -> torch.Tensor:
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


def burn_in_step() -> torch.Tensor:
    """A burn-in of the state, then passes that begin with the same pass and each add a
    term: R2D2 (Kapturowski et al., ICLR 2019) runs its burn-in without gradient."""
    z = torch.zeros(8, 4)
    loss = torch.zeros(())
    for _ in range(3):
        z = layer(z, X)
    for _ in range(3):
        z = layer(z, X)
        loss = loss + F.cross_entropy(head(z), Y)
    return loss


def supervised_in_both_step() -> torch.Tensor:
    """Two loops over one network whose passes both add terms (teacher forcing, then the
    network's own inputs): neither part only advances the state, so neither is a burn-in."""
    z = torch.zeros(8, 4)
    loss = torch.zeros(())
    for _ in range(3):
        z = layer(z, X)
        loss = loss + F.cross_entropy(head(z), Y)
    for _ in range(3):
        z = layer(z, X + 0.1)
        loss = loss + F.cross_entropy(head(z), Y)
    return loss


def test_an_uncut_split_unroll_is_a_failure_at_the_loop_with_a_cut_run_before_it_is_printed():
    audit = audit_step(uncut_step, optimizer)
    assert not audit.ok
    (found,) = audit.unrolled
    assert isinstance(found, UnrolledLoop) and found.state == "z"
    assert dict(audit.findings)[Kind.CARRIED] is found
    first = inspect.getsourcelines(uncut_step)[1]
    assert found.cut.number == first + 3 and found.shown_by.number == first + 4
    assert set(found.parameters) == {"layer.W.weight", "layer.W.bias", "layer.U.weight",
                                     "layer.U.bias"}
    (edit,) = found.edits
    assert (edit.line, edit.old, edit.new) == (first + 4, "", "    z = z.detach()\n")
    assert found.proof is Proof.IN_PROCESS
    assert "uncut unroll" in str(audit) and found.fix in str(audit)
    assert audit.to_dict()["unrolled"][0]["state"] == "z"


@pytest.mark.parametrize("step", [cut_step, cut_in_the_loop_step, no_grad_step, one_loop_step,
                                  supervised_in_both_step],
                         ids=["cut", "cut-in-the-loop", "no-grad", "one-loop",
                              "supervised-in-both"])
def test_a_cut_unroll_or_a_loop_not_written_twice_is_no_finding(step):
    audit = audit_step(step, optimizer)
    assert audit.ok and audit.unrolled == (), str(audit)


def test_a_burn_in_that_only_advances_the_state_is_cut_before_the_passes_that_repeat_it():
    (found,) = audit_step(burn_in_step, optimizer).unrolled
    first = inspect.getsourcelines(burn_in_step)[1]
    (edit,) = found.edits
    assert (edit.line, edit.new) == (first + 7, "    z = z.detach()\n")
    assert found.proof is Proof.IN_PROCESS


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
def forward(self, init):
    slots = init.weight
    for _ in range(3):
        slots = self.iteration(slots)
    return self.iteration(slots)
'''


def test_a_repetition_is_the_body_again_or_its_value_and_the_state_is_read_as_it_began(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TWO_LOOPS)
    found = unroll_at(str(path), 4)
    assert found is not None and (found.state, found.at, found.again) == ("w", 4, 5)
    assert found.leaf and found.start is None and found.indent == ""
    assert unroll_at(str(path), 6) is None  # the repetition is not the earlier part
    # the pass after the loop hands the state on through another expression: the syntax
    # alone does not show the same pass (the run must show one network computing both)
    other = unroll_at(str(path), 9)
    assert other is not None and not other.repeated
    returned = unroll_at(str(path), 14)
    assert returned is not None and (returned.again, returned.indent) == (15, "    ")
    assert returned.start == "init.weight" and not returned.leaf


class Slots(nn.Module):
    """Slot attention's iteration, written small: its initial slots learned, read only
    through the iterations."""

    def __init__(self) -> None:
        super().__init__()
        self.init = nn.Parameter(torch.randn(2, 4))
        self.gru = nn.GRUCell(3, 4)

    def iteration(self, slots: torch.Tensor) -> torch.Tensor:
        return self.gru(X[:2], slots)

    def forward(self) -> torch.Tensor:
        slots = self.init
        for _ in range(3):
            slots = self.iteration(slots)
        return self.iteration(slots)


slotted = Slots()
slot_optimizer = torch.optim.SGD(slotted.parameters(), lr=0.1)


def slot_step() -> torch.Tensor:
    return slotted().pow(2).mean()


def test_a_start_trained_only_through_the_loop_keeps_its_gradient_through_the_cut():
    audit = audit_step(slot_step, slot_optimizer)
    (found,) = audit.unrolled
    (edit,) = found.edits
    assert edit.new == "        slots = slots.detach() + self.init - self.init.detach()\n"
    assert "as if the loop were the identity" in found.fix
    assert found.proof is Proof.IN_PROCESS, str(audit)


LENGTH = 16
positions = torch.arange(LENGTH, dtype=torch.float32)
signal = torch.sin(0.4 * positions).view(1, 1, LENGTH).expand(4, 1, LENGTH)
true_flow = torch.full((4, 1, LENGTH), 1.5)
encoder = nn.Conv1d(1, 3, 3, padding=1)
updater = nn.Conv1d(4, 1, 3, padding=1)
refiner = torch.optim.SGD([*encoder.parameters(), *updater.parameters()], lr=0.1)


def sample(features: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """``features`` at ``coords`` (one position per column), interpolated."""
    where = coords / (LENGTH - 1) * 2 - 1
    grid = torch.stack([where, torch.zeros_like(where)], dim=-1)
    return F.grid_sample(features.unsqueeze(2), grid, align_corners=True)[:, :, 0]


def uncut_refinement() -> torch.Tensor:
    features = encoder(signal)
    flow = torch.zeros(4, 1, LENGTH)
    loss = torch.zeros(())
    for _ in range(3):
        coords = positions + flow
        looked = sample(features, coords)
        flow = flow + updater(torch.cat([looked, flow], dim=1))
        loss = loss + (flow - true_flow).abs().mean()
    return loss


def cut_refinement() -> torch.Tensor:
    features = encoder(signal)
    flow = torch.zeros(4, 1, LENGTH)
    loss = torch.zeros(())
    for _ in range(3):
        coords = positions + flow.detach()
        looked = sample(features, coords)
        flow = flow + updater(torch.cat([looked, flow], dim=1))
        loss = loss + (flow - true_flow).abs().mean()
    return loss


def spatial_transformer() -> torch.Tensor:
    """Positions from a network, learnt through the sampling alone."""
    shift = updater(torch.cat([encoder(signal), signal], dim=1))
    looked = sample(signal, positions + shift)
    return F.mse_loss(looked, signal.roll(1, -1))


def supervised_flow_warped() -> torch.Tensor:
    """A flow compared with the truth, and the image warped by it in a photometric term."""
    flow = updater(torch.cat([encoder(signal), signal], dim=1))
    warped = sample(signal, positions + flow)
    return (flow - true_flow).abs().mean() + (warped - signal.roll(1, -1)).abs().mean()


def test_an_estimate_compared_and_read_as_the_next_sampling_positions_is_cut_where_read():
    audit = audit_step(uncut_refinement, refiner)
    (found,) = audit.unrolled
    assert found.kind == "sampled" and found.state == "flow" and found.n_nodes == 2
    assert found.cut.text == "coords = positions + flow"
    assert "grid_sample" in found.shown_by.text
    assert {"updater.weight", "encoder.weight"} <= set(found.parameters)
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("flow", "flow.detach()")
    assert found.proof is Proof.IN_PROCESS, str(audit)


@pytest.mark.parametrize("step", [cut_refinement, spatial_transformer, supervised_flow_warped],
                         ids=["cut", "spatial-transformer", "photometric"])
def test_positions_cut_or_compared_only_through_the_sampling_are_no_finding(step):
    audit = audit_step(step, refiner)
    assert audit.unrolled == (), str(audit)
