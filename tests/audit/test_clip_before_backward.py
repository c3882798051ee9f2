"""``toolkit audit SCRIPT``: a gradient clip run before the ``backward()`` whose gradient the
step uses (:mod:`toolkit.audit.rules.running.clipped`). Scripts written for it in the shape of a
Decision Transformer's training step (Chen et al. 2021; kzl/decision-transformer's
``SequenceTrainer.train_step`` clips at 0.25 between the backward and the step).

- The clip moved above the backward: it clips nothing (``unclipped``). The edit moves it before
  the step and trains as the published script. (``clip_grad_value_`` is watched too; over
  tensors with no ``.grad`` at all, torch itself raises.)
- No finding: the published order, and gradient accumulation whose clip comes after every
  micro-batch's backward.
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
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x, y = torch.randn(32, 4), 5 * torch.randn(32, 2)
for step in range(4):
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
'''

EARLY = PUBLISHED.replace(
    "    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n",
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n    loss.backward()\n")
BY_VALUE = PUBLISHED.replace("clip_grad_norm_(model.parameters(), 0.25)",
                             "clip_grad_value_(model.parameters(), 0.01)")

ACCUMULATED = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for step in range(4):
    optimizer.zero_grad()
    for micro in range(2):
        F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2)).backward()
        if micro == 1:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    optimizer.step()
'''


def test_a_clip_before_the_backward_is_a_failure_at_the_clip(tmp_path):
    (tmp_path / "train.py").write_text(EARLY, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unclipped" and found["iteration"] == 0
    assert found["at"][0] == ("train.py:17: torch.nn.utils.clip_grad_norm_(model.parameters(), "
                              "0.25)")
    assert [e["start"][0] for e in found["edits"]] == [17, 19]


@pytest.mark.parametrize("text", [PUBLISHED, BY_VALUE, ACCUMULATED],
                         ids=["published", "value", "accumulated"])
def test_a_clip_after_the_backward_is_no_finding(tmp_path, text):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
def test_the_moved_clip_trains_as_the_published_script(tmp_path):
    folder = twins(tmp_path, PUBLISHED, EARLY)
    check_fix(tmp_path, folder, "unclipped", "--watch", "1")
    assert_trains_as(folder)


# the clip under a condition on the script's options, as locuslab/TCN writes it (``if args.clip >
# 0:``): the edit moves the ``if`` with it
GUARDED = PUBLISHED.replace("    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n",
                            "    if args.clip > 0:\n"
                            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n"
                            ).replace('parser.add_argument("--out", default=None)\n',
                                      'parser.add_argument("--out", default=None)\n'
                                      'parser.add_argument("--clip", type=float, default=1)\n')
GUARDED_EARLY = GUARDED.replace(
    "    loss.backward()\n    if args.clip > 0:\n"
    "        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n",
    "    if args.clip > 0:\n"
    "        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\n    loss.backward()\n")


@pytest.mark.slow
def test_a_clip_under_an_if_moves_with_it_and_trains_as_the_published_script(tmp_path):
    assert GUARDED_EARLY != GUARDED
    folder = twins(tmp_path, GUARDED, GUARDED_EARLY)
    check_fix(tmp_path, folder, "unclipped", "--watch", "1")
    assert (folder / "train.py").read_text() == GUARDED
    assert_trains_as(folder)
