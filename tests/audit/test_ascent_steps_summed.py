"""``toolkit audit SCRIPT`` on adversarial training whose ascent steps also train: FreeLB (Zhu
et al. 2020, "FreeLB: Enhanced Adversarial Training for Natural Language Understanding",
Algorithm 1), where each of K ascent steps on a perturbation of the word embeddings runs one
``backward()`` of ``loss / K`` and the parameter gradients of all K are summed into one update.
Scripts written for it, beside a PGD adversarial training (Madry et al. 2018) whose attack runs
its own ``backward()``.

- No finding: the published loop. The ascent steps' backward is the statement whose gradient
  the step uses, repeated: a sum, not an attack's gradient leaking into the update (the
  ``leak`` of an input's gradient is the PGD attack's, a statement of its own).
- ``optimizer.zero_grad()`` moved into the ascent loop: the earlier steps' parameter gradient
  is lost (``cleared``), although the script read the perturbation's gradient of each: that
  read is of the input, not of what the optimizer steps. The edit moves the clear after the
  step.
- The embeddings cut where the model reads them, ``model(delta + embeds.detach())``: the cut
  value is the trained network's input, not a target; the embeddings are ``dead``, the edit
  drops the cut.
- PGD's attack, a function of its own whose parameter gradient the loop clears before the
  training backward, stays clean; without that clear it leaks.
"""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, audit, check_fix, failures, twins

PUBLISHED = '''\
import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
embed = nn.Embedding(20, 8)
head = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
optimizer = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=1e-2)
tokens, labels = torch.randint(0, 20, (32, 5)), torch.randint(0, 3, (32,))
for step in range(4):
    optimizer.zero_grad()
    embeds = embed(tokens)
    delta = torch.zeros_like(embeds).uniform_(-0.1, 0.1)
    for astep in range(3):
        delta.requires_grad_()
        loss = F.cross_entropy(head((delta + embeds).mean(1)), labels) / 3
        loss.backward()
        if astep == 2:
            break
        delta = (delta + 0.1 * delta.grad / delta.grad.norm()).detach()
        embeds = embed(tokens)
    optimizer.step()
if args.out:
    torch.save({"embed": embed.state_dict(), "head": head.state_dict()}, args.out)
'''

CLEARED = PUBLISHED.replace("    optimizer.zero_grad()\n    embeds", "    embeds").replace(
    "        loss = F.cross_entropy", "        optimizer.zero_grad()\n"
                                       "        loss = F.cross_entropy")
DETACHED = PUBLISHED.replace("head((delta + embeds).mean(1))",
                             "head((delta + embeds.detach()).mean(1))")

PGD = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))


def attack(x, y):
    delta = torch.zeros_like(x, requires_grad=True)
    for _ in range(3):
        F.cross_entropy(model(x + delta), y).backward()
        delta = (delta + 0.05 * delta.grad.sign()).clamp(-0.1, 0.1).detach().requires_grad_()
    return (x + delta).detach()


for step in range(4):
    x_adv = attack(x, y)
    optimizer.zero_grad()
    F.cross_entropy(model(x_adv), y).backward()
    optimizer.step()
'''

#: the loop's clear left before the attack: its gradient leaks into the update
PGD_LEAK = PGD.replace("    x_adv = attack(x, y)\n    optimizer.zero_grad()\n",
                       "    optimizer.zero_grad()\n    x_adv = attack(x, y)\n")


@pytest.mark.parametrize("text", [PUBLISHED, PGD], ids=["freelb", "pgd"])
def test_summed_ascent_steps_and_a_cleared_attack_are_no_finding(tmp_path, text):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


def test_an_attack_of_its_own_still_leaks_without_the_clear(tmp_path):
    (tmp_path / "train.py").write_text(PGD_LEAK, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1 and [f["kind"] for f in failures(report)] == ["leak"]


@pytest.mark.parametrize(("text", "kind", "line"), [
    (CLEARED, "cleared", 20), (DETACHED, "dead", 21)], ids=["cleared", "detached"])
def test_each_bug_is_named_at_its_line(tmp_path, text, kind, line):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == kind and found["iteration"] == 0
    assert found["at"][0].startswith(f"train.py:{line}:"), found["at"]
    assert found["edits"]


@pytest.mark.slow
@pytest.mark.parametrize(("text", "kind"), [(CLEARED, "cleared"), (DETACHED, "dead")],
                         ids=["cleared", "detached"])
def test_the_edit_trains_as_the_published_loop(tmp_path, text, kind):
    folder = twins(tmp_path, PUBLISHED, text)
    check_fix(tmp_path, folder, kind, "--watch", "1")
    assert_trains_as(folder)
