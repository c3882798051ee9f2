"""The pieces of the shallow-copy rule (:func:`toolkit.audit.rules.running.copies.shallow`): what a
``copy.copy`` shares (``toolkit.audit.script.session._networks``) and the edit that makes it
deep (:func:`toolkit.audit.fixes.copy_edits.deep_copy_call`), applied to the text."""

from __future__ import annotations

import types

import pytest
from torch import nn

from toolkit.audit.fixes.copy_edits import deep_copy_call
from toolkit.audit.fixes.script_edits import apply_to_text
from toolkit.audit.script.session import _networks


def _span(text: str, line: int, call: str) -> tuple[int, int, int, int]:
    row = text.splitlines()[line - 1]
    start = row.index(call)
    return (line, line, start, start + len(call))


@pytest.mark.parametrize(("head", "call", "new"), [
    ("import copy\n", "copy.copy(members[0])", "copy.deepcopy(members[0])"),
    ("import copy as cp\n", "cp.copy(members[0])", "cp.deepcopy(members[0])"),
])
def test_a_shallow_copy_is_made_deep_by_the_module_s_name(tmp_path, head, call, new):
    text = f"{head}members = [{{}}]\nclone = {call}\n"
    path = tmp_path / "train.py"
    path.write_text(text)
    edit = deep_copy_call(str(path), _span(text, 3, call))
    assert edit is not None and edit.line == 3
    assert apply_to_text(text, [edit]).splitlines()[2] == f"clone = {new}"


@pytest.mark.parametrize("text", [
    "from copy import copy\nclone = copy(x)\n",        # the function by its own name
    "import copy\nclone = x.copy()\n",                 # a method, not the module's function
    "import copy\nclone = copy.copy(x, y)\n",          # not copy.copy's one argument
    "copy = object()\nclone = copy.copy(x)\n",         # a name the file never imports
])
def test_no_edit_for_another_spelling_or_call(tmp_path, text):
    path = tmp_path / "train.py"
    path.write_text(text)
    row = text.splitlines()[1]
    call = row[row.index("=") + 2:]
    assert deep_copy_call(str(path), _span(text, 2, call)) is None


def test_what_a_shallow_copy_shares_and_how_the_copy_reaches_it():
    net, head = nn.Linear(2, 2), nn.Linear(2, 1)
    assert _networks(net) == [("", net)]
    assert _networks({"net": net, "lr": 0.1}) == [(".net", net)]
    assert _networks({"a net": net, 3: head}) == [("['a net']", net), ("[3]", head)]
    assert _networks([0.5, net, head]) == [(".1", net), (".2", head)]
    assert _networks(types.SimpleNamespace(model=net, steps=3)) == [(".model", net)]
    assert _networks({"lr": 0.1, "scores": [1.0]}) == []
    assert _networks(nn.Linear) == []   # a class, not an object holding one


TWO_TARGETS = '''\
import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
q1 = nn.ModuleList([nn.Linear(3, 1) for _ in range(2)])
q2 = nn.ModuleList([nn.Linear(3, 1) for _ in range(2)])
target_q1, target_q2 = copy.deepcopy(q1), copy.deepcopy(q2)
optimizer = torch.optim.SGD([*q1.parameters(), *q2.parameters()], lr=0.1)
for step in range(4):
    s, r, s2 = torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 3)
    with torch.no_grad():
        next_q = torch.cat([t(s2) for t in [*target_q1, *target_q2]], 1)
        y = r + 0.9 * next_q.min(1, keepdim=True).values
    loss = sum(F.mse_loss(q(s), y) for q in [*q1, *q2])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for t, o in [(target_q1, q1), (target_q2, q2)]:
            for tp, op in zip(t.parameters(), o.parameters()):
                tp.mul_(0.5).add_(0.5 * op)
if args.out:
    torch.save({"q1": q1.state_dict(), "q2": q2.state_dict()}, args.out)
'''


def test_two_shallow_copies_of_one_line_are_one_failure_with_both_edits(tmp_path):
    # SUNRISE's target critics, two shallow copies on one line: each is made deep, or the
    # one left shallow keeps the finding
    from script_audit import assert_trains_as, check_fix, twins

    buggy = TWO_TARGETS.replace("copy.deepcopy(q1), copy.deepcopy(q2)",
                                "copy.copy(q1), copy.copy(q2)")
    folder = twins(tmp_path, TWO_TARGETS, buggy)
    done = check_fix(tmp_path, folder, "aliased", "--watch", "1")
    assert done.stdout.count("are shallow copies (copy.copy)") == 1, done.stdout
    assert "copy.copy(q1) -> copy.deepcopy(q1)" in done.stdout
    assert "copy.copy(q2) -> copy.deepcopy(q2)" in done.stdout
    assert_trains_as(folder)
