"""``toolkit audit SCRIPT``: a list that keeps a pass's tensors past the pass it was filled for
(REINFORCE's log-probabilities, a decoder's outputs) is named where the loop empties or makes
its containers, by the container's name, and emptied there by the edit: with the statement
that empties the loop's other containers (``del rewards[:], outputs[:]``), after the one that
makes another again (``outputs.clear()``), or instead of a ``del`` that drops only a name of it
(``del saved[:]``). Where its own emptying runs too seldom (once an epoch), where it belongs is
the method's: advice only. Each edit is followed: the fixed script audits clean and trains as
the published one."""

from __future__ import annotations

import textwrap

import pytest
from script_audit import applied, assert_trains_as, cli, failures, recorded

from toolkit.audit.record.emptied import emptyings
from toolkit.audit.verify.rerun import load_record

# a regression whose loss reads every entry of a list the loop fills; each backward keeps its
# graph (``retain_graph=True``, as people write it once the second backward fails), so that the
# bug twins run to their end. A linear layer on data saves no weight for its backward: the old
# graph can be gone through again after the optimizer's in-place step
_HEAD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""
_TAIL = """\
if args.out:
    torch.save(model.state_dict(), args.out)
"""

# the rewards' list is emptied each episode, the outputs' is not
_SIBLING_EMPTIED = _HEAD + """\
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
outputs, rewards = [], []
for episode in range(6):
    for t in range(3):
        outputs.append(model(torch.randn(2, 4)).sum())
        rewards.append(float(t))
    loss = torch.stack(outputs).pow(2).mean() - sum(rewards) / len(rewards)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    {emptied}
""" + _TAIL

# the targets' list is made again each pass, the outputs' once before the loop
_SIBLING_REMADE = _HEAD + """\
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
outputs, targets = [], []
for step in range(6):
    {made}
    for t in range(3):
        outputs.append(model(torch.randn(2, 4)))
        targets.append(torch.randn(2, 1))
    loss = sum(F.mse_loss(o, y) for o, y in zip(outputs, targets))
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
""" + _TAIL

# the module's list is read through a local name, and the del drops the name only
_ALIAS_DROPPED = _HEAD + """\
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.saved = []

    def forward(self, x):
        return self.linear(x).sum()


model = Policy()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


def finish_episode():
    saved = model.saved
    loss = torch.stack(saved).pow(2).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    {dropped}


for episode in range(6):
    for t in range(3):
        model.saved.append(model(torch.randn(2, 4)))
    finish_episode()
""" + _TAIL

# the losses' list is emptied once an epoch, not once a step
_EMPTIED_SELDOM = _HEAD + """\
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
losses = []
for epoch in range(3):
    for batch in range(3):
        losses.append(model(torch.randn(2, 4)).pow(2).mean())
        loss = sum(losses)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
{cleared}
""" + _TAIL

# a bank of the last features, kept on purpose (nothing in the loop empties a container): it is
# stored with its graph, and cut where it is stored, not emptied
_BANK = _HEAD + """\
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
bank = []
for step in range(6):
    features = model(torch.randn(3, 4))
    bank.append(features)
    loss = torch.cat(bank[-3:]).pow(2).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
""" + _TAIL

FIXED = [
    pytest.param(_SIBLING_EMPTIED, {"emptied": "del rewards[:]"},
                 {"emptied": "del rewards[:], outputs[:]"}, 21,
                 "rewards[:] -> rewards[:], outputs[:]", id="emptied-with-the-rewards"),
    pytest.param(_SIBLING_REMADE, {"made": "targets = []"}, {"made": "outputs, targets = [], []"},
                 15, "insert before it: outputs.clear()", id="cleared-where-targets-are-made"),
    pytest.param(_ALIAS_DROPPED, {"dropped": "del saved"}, {"dropped": "del saved[:]"}, 30,
                 "saved -> saved[:]", id="the-dropped-name-emptied"),
]


def _project(tmp_path, template: str, buggy: dict, published: dict):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train.py").write_text(template.format(**buggy), encoding="utf-8")
    (folder / "published.py").write_text(template.format(**published), encoding="utf-8")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("template", "buggy", "published", "line", "edit"), FIXED)
def test_audit_the_container_is_emptied_with_the_loop_s_others(
        tmp_path, template, buggy, published, line, edit):
    folder = _project(tmp_path, template, buggy, published)
    done = applied(folder, "carried")
    assert f"edit: train.py:{line}: {edit}" in done.stdout, done.stdout
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)


@pytest.mark.slow
def test_audit_a_container_emptied_too_seldom_is_named_there_without_an_edit(tmp_path):
    folder = _project(tmp_path, _EMPTIED_SELDOM, {"cleared": "    losses.clear()"},
                      {"cleared": "        losses.clear()"})
    done = cli("--record", str(tmp_path / "rec"), "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    report = load_record(str(tmp_path / "rec"))[0]
    (found,) = [f for f in failures(report) if f["kind"] == "carried"]
    assert {a.split(": ", 1)[0] for a in found["at"]} == {"train.py:12", "train.py:20"}
    assert "losses" in found["names"] and not found["edits"]
    # the published script, which empties it each step, is clean
    assert not failures(recorded(folder, tmp_path / "pub", "published.py"))


@pytest.mark.slow
def test_audit_a_bank_nothing_empties_is_not_emptied(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train.py").write_text(_BANK, encoding="utf-8")
    done = cli("--record", str(tmp_path / "rec"), "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    (found,) = [f for f in failures(load_record(str(tmp_path / "rec"))[0])
                if f["kind"] == "carried"]
    assert "bank" in found["names"]
    assert not any("clear()" in e["new"] or "[:]" in e["new"] for e in found["edits"]), found
    assert "emptied" not in found["advice"] and "empty it" not in found["advice"], found


def test_the_statements_that_make_empty_or_drop_a_container_are_read(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent("""\
        from collections import deque, defaultdict
        a, b, c = [], [], 0
        q = deque(maxlen=4)
        full = list(range(3))
        counts = defaultdict(list)


        def finish(model):
            saved = model.saved
            del model.rewards[:], a[:]
            del saved
            b.clear()
            q[:] = []
            del full[0]
        """), encoding="utf-8")
    found = [(e.line.number, e.container, e.how, e.together, e.line.function)
             for e in emptyings(str(script))]
    assert found == [
        (2, "a", "makes", ("b",), "<module>"), (2, "b", "makes", ("a",), "<module>"),
        (3, "q", "makes", (), "<module>"), (5, "counts", "makes", (), "<module>"),
        (10, "model.rewards", "empties", ("a",), "finish"),
        (10, "a", "empties", ("model.rewards",), "finish"),
        (11, "saved", "drops", (), "finish"), (12, "b", "empties", (), "finish"),
        (13, "q", "empties", (), "finish")]
