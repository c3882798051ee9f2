"""Networks kept in a plain list and called through a name bound to each in turn (a loop
variable, or a name the script rebinds for each new member): each tensor a finding is about is
named by the list that holds its network (``members[0].weight``), one name per tensor, not by
the passing name, which every member shares.

- A deep ensemble (Lakshminarayanan, Pritzel and Blundell 2017, "Simple and Scalable
  Predictive Uncertainty Estimation using Deep Ensembles", arXiv:1612.01474) trained through
  its averaged logits with a learned temperature, its bug twin averaging the members' logits
  under ``torch.no_grad()``: only the temperature trains.
- A mixture of experts over a plain list of experts (Jacobs, Jordan, Nowlan and Hinton 1991,
  "Adaptive Mixtures of Local Experts": the gate weighs the experts' outputs), its bug twin
  running the experts under ``torch.no_grad()``: only the gate trains.
- A stack of blocks kept in a list and applied in a loop, its bug twin cutting each block's
  input (``h = block(h.detach())``): only the last block trains.
- Boosting by stages (GrowNet: Badirli et al. 2020, arXiv:2002.07971), each stage's new learner
  bound to one name and appended to the list, then a corrective step over all learners and the
  boost rate, its bug twin running the learners of the corrective step under
  ``torch.no_grad()``: only the boost rate trains there.

Each bug twin should exit 1 at the line where the fix belongs, its tensors named by the list
(each name once), with an edit that ``--apply`` writes, after which the script audits clean
and trains as the published one; each published script audits clean."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""

ENSEMBLE = HEAD + """
x, y = torch.randn(64, 4), torch.randint(3, (64,))
members = [nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)) for _ in range(3)]
log_t = nn.Parameter(torch.zeros(1))   # a temperature of the averaged logits
opt = torch.optim.Adam([log_t, *[p for m in members for p in m.parameters()]], lr=1e-2)
for step in range(4):
    logits = torch.stack([member(x) for member in members]).mean(0)
    loss = F.cross_entropy(logits / log_t.exp(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"log_t": log_t.detach(),
                **{f"member{i}": m.state_dict() for i, m in enumerate(members)}}, args.out)
"""

EXPERTS = HEAD + """
x, y = torch.randn(64, 4), torch.randn(64, 2)
experts = [nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)) for _ in range(3)]
gate = nn.Linear(4, 3)
params = [*gate.parameters(), *[p for e in experts for p in e.parameters()]]
opt = torch.optim.SGD(params, lr=0.1)
for step in range(4):
    weights = torch.softmax(gate(x), dim=-1)
    outs = torch.stack([expert(x) for expert in experts], dim=1)
    pred = (weights.unsqueeze(-1) * outs).sum(1)
    loss = F.mse_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"gate": gate.state_dict(),
                **{f"expert{i}": e.state_dict() for i, e in enumerate(experts)}}, args.out)
"""

STACK = HEAD + """
x, y = torch.randn(64, 8), torch.randn(64, 8)
blocks = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(3)]
opt = torch.optim.Adam([p for b in blocks for p in b.parameters()], lr=1e-2)
for step in range(4):
    h = x
    for block in blocks:
        h = block(h)
    loss = F.mse_loss(h, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({f"block{i}": b.state_dict() for i, b in enumerate(blocks)}, args.out)
"""

STAGES = HEAD + """
x = torch.randn(96, 4)
y = torch.sin(x.sum(1, keepdim=True))
learners = []
boost = nn.Parameter(torch.ones(1))


def ensemble(x):
    out = torch.zeros(len(x), 1)
    for m in learners:
        out = out + m(x)
    return out


for stage in range(3):
    learner = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(learner.parameters(), lr=0.05)
    for step in range(3):   # the new learner fits the residual of the fixed ensemble
        with torch.no_grad():
            residual = y - boost * ensemble(x)
        loss = F.mse_loss(learner(x), residual)
        opt.zero_grad()
        loss.backward()
        opt.step()
    learners.append(learner)
    corrective = torch.optim.SGD([boost, *[p for m in learners for p in m.parameters()]],
                                 lr=0.01)
    for step in range(2):   # the fully corrective step over every learner and the boost
        loss = F.mse_loss(boost * ensemble(x), y)
        corrective.zero_grad()
        loss.backward()
        corrective.step()
if args.out:
    torch.save({"boost": boost.detach(),
                **{f"learner{i}": m.state_dict() for i, m in enumerate(learners)}}, args.out)
"""

#: case -> (as published, the bug twin, how the line where the fix belongs begins, the list)
BUGS = {
    "deep-ensemble-logits-under-no-grad": (
        ENSEMBLE,
        ENSEMBLE.replace(
            "    logits = torch.stack([member(x) for member in members]).mean(0)\n",
            "    with torch.no_grad():\n"
            "        logits = torch.stack([member(x) for member in members]).mean(0)\n"),
        "logits = torch.stack(", "members"),
    "mixture-of-experts-under-no-grad": (
        EXPERTS,
        EXPERTS.replace(
            "    outs = torch.stack([expert(x) for expert in experts], dim=1)\n",
            "    with torch.no_grad():\n"
            "        outs = torch.stack([expert(x) for expert in experts], dim=1)\n"),
        "outs = torch.stack(", "experts"),
    "stack-of-blocks-input-cut": (
        STACK, STACK.replace("        h = block(h)\n", "        h = block(h.detach())\n"),
        "h = block(h.detach())", "blocks"),
    "boosting-corrective-step-under-no-grad": (
        STAGES,
        STAGES.replace(
            "        loss = F.mse_loss(boost * ensemble(x), y)\n",
            "        with torch.no_grad():\n"
            "            out = ensemble(x)\n"
            "        loss = F.mse_loss(boost * out, y)\n"),
        "out = ensemble(x)", "learners"),
}


def _named_by_the_list(found: list[dict], held: str) -> bool:
    """Whether every tensor of the findings is named by the list ``held``, each once."""
    names = [n for f in found for n in f["names"]]
    return bool(names) and len(set(names)) == len(names) and all(
        n.startswith(f"{held}[") for n in names)


@pytest.mark.parametrize("case", sorted(BUGS))
def test_tensors_of_networks_held_in_a_list_are_named_by_the_list(tmp_path, case):
    published, buggy, fix_line, held = BUGS[case]
    assert published != buggy
    folder = twins(tmp_path, published, buggy)
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    # the statement the fix changes, or the ``with`` line of the block that holds it
    line = next(i for i, text in enumerate(buggy.splitlines(), 1)
                if text.strip().startswith(fix_line))
    mine = [f for f in found if any(at.startswith((f"train.py:{line}:", f"train.py:{line - 1}:"))
                                    for at in f["at"])]
    assert mine, found
    assert _named_by_the_list(mine, held), [f["names"] for f in mine]


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_bug_of_networks_held_in_a_list_gets_an_edit_that_trains(tmp_path, case):
    published, buggy, _, _ = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


@pytest.mark.parametrize("case", sorted(BUGS))
def test_networks_held_in_a_list_as_published_are_clean(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(BUGS[case][0], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
