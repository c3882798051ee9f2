"""A recurrent state cut inside the unroll one loss reads whole (``truncated``): a GRU cell
stepped over a sequence, the loss reading every step's prediction, as a world model's
transition (Kaixhin/PlaNet, models.py ``TransitionModel.forward``) or a recurrent agent over an
episode (oxwhirl/pymarl, ``QLearner.train``) is trained. Written ``cell(x[t], h.detach())`` or
with ``h = h.detach()`` at the top of each step, the cut truncates backpropagation through time
to one step. The failure is at the cut; its edit takes the cut away and the fixed script trains
as the published one. Told apart: truncated BPTT's cut between iterations (each chunk its own
backward), a refinement that feeds its own estimate back on the same input cut (self-
conditioning), and a pushforward unroll whose earlier steps the loss reads only through the
state."""

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
cell = nn.GRUCell(3, 5)
head = nn.Linear(5, 2)
optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
for step in range(4):
    x, y = torch.randn(6, 8, 3), torch.randn(6, 8, 2)
    h = torch.zeros(8, 5)
    predictions = []
    for t in range(6):
        STEP
        predictions.append(head(h))
    loss = ((torch.stack(predictions) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"cell": cell.state_dict(), "head": head.state_dict()}, args.out)
"""

PUBLISHED = "h = cell(x[t], h)"
CUT_IN_THE_CALL = "h = cell(x[t], h.detach())"
CUT_AT_THE_TOP = "h = h.detach()\n        h = cell(x[t], h)"


@pytest.mark.parametrize("bug", [CUT_IN_THE_CALL, CUT_AT_THE_TOP], ids=["in_call", "at_top"])
def test_a_state_cut_at_every_step_is_found_and_its_edit_trains_as_published(tmp_path, bug):
    buggy = SCRIPT.replace("STEP", bug)
    folder = twins(tmp_path, SCRIPT.replace("STEP", PUBLISHED), buggy)
    done = applied_and_trains(folder, "truncated")
    line = next(i for i, x in enumerate(buggy.splitlines(), 1) if ".detach()" in x)
    assert f"at:   train.py:{line}:" in done.stdout and "`cell` reads `h`" in done.stdout, \
        done.stdout
    assert ".detach()" not in (folder / "train.py").read_text()


LSTM = SCRIPT.replace("nn.GRUCell(3, 5)", "nn.LSTMCell(3, 5)").replace(
    "h = torch.zeros(8, 5)", "h = c = torch.zeros(8, 5)")


def test_the_cuts_of_one_line_are_one_finding_whose_edit_takes_them_all_away(tmp_path):
    # an LSTM's state is two tensors: each cut alone leaves the other, so one edit has both
    folder = twins(tmp_path, LSTM.replace("STEP", "h, c = cell(x[t], (h, c))"),
                   LSTM.replace("STEP", "h, c = cell(x[t], (h.detach(), c.detach()))"))
    done = applied_and_trains(folder, "truncated")
    assert done.stdout.count("FAIL    truncated") == 1 and "`h`, `c`" in done.stdout, done.stdout
    assert ".detach()" not in (folder / "train.py").read_text()


# truncated BPTT: the state carried between iterations, cut where one chunk's backward ends
TBPTT = SCRIPT.replace("    h = torch.zeros(8, 5)\n", "").replace(
    "for step in range(4):", "h = torch.zeros(8, 5)\nfor step in range(4):\n    h = h.detach()")
# a refinement: the network's own estimate on the same input, compared, then fed back cut
# (RAFT's flow, Teed & Deng 2020, princeton-vl/RAFT core/raft.py, detached before each update
# while every update's estimate is compared): not an unroll
REFINED = SCRIPT.replace("STEP", "h0 = cell(x[t], torch.zeros(8, 5))\n"
                                 "        predictions.append(head(h0))\n"
                                 "        h = cell(x[t], h0.detach())").replace(
    "torch.stack(predictions) - y", "torch.stack(predictions[1::2]) - y")
# pushforward (Brandstetter et al. 2022): the earlier steps reach the loss only through the
# cut state; only the last prediction is compared
PUSHFORWARD = SCRIPT.replace("STEP", PUBLISHED).replace(
    "        predictions.append(head(h))\n", "        h = h.detach() if t < 5 else h\n"
    "    predictions.append(head(h))\n").replace(
    "torch.stack(predictions) - y", "torch.stack(predictions) - y[-1:]")


@pytest.mark.parametrize(("script", "found"), [
    (SCRIPT.replace("STEP", CUT_IN_THE_CALL), True),
    (SCRIPT.replace("STEP", PUBLISHED), False),
    (TBPTT.replace("STEP", PUBLISHED), False),
    (REFINED, False),
    (PUSHFORWARD, False),
], ids=["cut", "published", "tbptt", "refined", "pushforward"])
def test_only_a_cut_inside_the_unroll_a_loss_reads_is_a_failure(tmp_path, script, found):
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    code, report = audit(tmp_path, path, "--steps", "2")
    cut = [f for f in failures(report) if f["kind"] == "truncated"]
    assert bool(cut) == found, [f["message"] for f in failures(report)]
    assert (code == 1) == found, [f["message"] for f in failures(report)]


# a recurrence of plain operations inside one network's forward, no call per step (an IndRNN
# layer, Li et al. 2018; Sunnydreamrain/IndRNN_pytorch steps ``relu(x_t + weight_hh * h)``)
PLAIN = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(3, 5)
        self.weight_hh = nn.Parameter(torch.rand(5))

    def forward(self, x):
        x = self.dense(x)
        h = torch.zeros(x.size(1), 5)
        states = []
        for x_t in x.unbind(0):
            STEP
            states.append(h)
        return torch.stack(states)


net = Recurrent()
head = nn.Linear(5, 2)
optimizer = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.1)
for step in range(4):
    x, y = torch.randn(6, 8, 3), torch.randn(6, 8, 2)
    loss = ((head(net(x)) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"net": net.state_dict(), "head": head.state_dict()}, args.out)
"""

PLAIN_PUBLISHED = "h = torch.relu(x_t + self.weight_hh * h)"
PLAIN_CUT = "h = torch.relu(x_t + self.weight_hh * h.detach())"
# the same input at every step, the estimate cut before each update and every one compared
# (RAFT's refinement, written in plain operations): not an unroll
PLAIN_REFINED = PLAIN.replace("for x_t in x.unbind(0):", "for _ in range(6):").replace(
    "STEP", "h = torch.relu(x[0] + self.weight_hh * h.detach())")


def test_a_state_cut_in_a_loop_of_plain_operations_is_found_and_its_edit_trains(tmp_path):
    buggy = PLAIN.replace("STEP", PLAIN_CUT)
    folder = twins(tmp_path, PLAIN.replace("STEP", PLAIN_PUBLISHED), buggy)
    done = applied_and_trains(folder, "truncated")
    line = next(i for i, x in enumerate(buggy.splitlines(), 1) if ".detach()" in x)
    assert f"at:   train.py:{line}:" in done.stdout and "`h`, cut by" in done.stdout, \
        done.stdout
    assert "tensors: h, net.weight_hh" in done.stdout, done.stdout
    assert ".detach()" not in (folder / "train.py").read_text()


@pytest.mark.parametrize(("script", "found"), [
    (PLAIN.replace("STEP", PLAIN_CUT), True),
    (PLAIN.replace("STEP", PLAIN_PUBLISHED), False),
    (PLAIN_REFINED, False),
], ids=["cut", "published", "refined"])
def test_in_plain_operations_only_a_cut_inside_the_unroll_is_a_failure(tmp_path, script, found):
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    code, report = audit(tmp_path, path, "--steps", "2")
    cut = [f for f in failures(report) if f["kind"] == "truncated"]
    assert bool(cut) == found and (code == 1) == found, [f["message"] for f in report["findings"]]


# the same input at every step: PonderNet's pondering (Banino et al. 2021; labmlai's
# ``ParityPonderGRU`` steps ``h = gru(x, h)`` on one input), whose state the loss reads only
# through its heads, against a refinement that compares the estimate it cuts itself (RAFT's
# flow, ``coords1 = coords1.detach()`` before each update, every update's flow compared)
PONDER = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
cell = nn.GRUCell(3, 5)
head = nn.Linear(5, 1)
optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
for step in range(4):
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    h = torch.zeros(8, 5)
    loss = 0
    for n in range(4):
        STEP
        loss = loss + ((head(h) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"cell": cell.state_dict(), "head": head.state_dict()}, args.out)
"""
# the estimate itself compared: the cell's output is the estimate, cut before the next update
ESTIMATE = PONDER.replace("head = nn.Linear(5, 1)", "head = nn.Identity()").replace(
    "torch.randn(8, 1)", "torch.randn(8, 5)").replace(
    "[*cell.parameters(), *head.parameters()]", "cell.parameters()").replace(
    '"head": head.state_dict()', '"head": {}')


@pytest.mark.parametrize(("script", "found"), [
    (PONDER.replace("STEP", "h = cell(x, h.detach())"), True),
    (PONDER.replace("STEP", "h = cell(x, h)"), False),
    (ESTIMATE.replace("STEP", "h = cell(x, h.detach())"), False),
], ids=["state-cut", "state-kept", "estimate-cut"])
def test_on_the_same_input_a_state_only_heads_read_is_truncated_not_an_estimate(
        tmp_path, script, found):
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    code, report = audit(tmp_path, path, "--steps", "2")
    cut = [f for f in failures(report) if f["kind"] == "truncated"]
    assert bool(cut) == found and (code == 1) == found, [f["message"] for f in report["findings"]]


# a recurrence written with no network at all: its weights are parameters of no module
FUNCTIONAL = """\
import torch

torch.manual_seed(0)
w_in, w_hh = torch.nn.Parameter(torch.randn(3, 5)), torch.nn.Parameter(torch.rand(5))
optimizer = torch.optim.SGD([w_in, w_hh], lr=0.1)
for step in range(3):
    x, y = torch.randn(6, 8, 3), torch.randn(6, 8, 5)
    h, states = torch.zeros(8, 5), []
    for t in range(6):
        STEP
        states.append(h)
    loss = ((torch.stack(states) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("step", "found"), [
    ("h = torch.tanh(x[t] @ w_in + w_hh * h.detach())", True),
    ("h = torch.tanh(x[t] @ w_in + w_hh * h)", False),
], ids=["cut", "kept"])
def test_a_recurrence_of_no_network_is_judged_too(tmp_path, step, found):
    path = tmp_path / "train.py"
    path.write_text(FUNCTIONAL.replace("STEP", step), encoding="utf-8")
    code, report = audit(tmp_path, path, "--steps", "2")
    cut = [f for f in failures(report) if f["kind"] == "truncated"]
    assert bool(cut) == found and (code == 1) == found, [f["message"] for f in report["findings"]]
