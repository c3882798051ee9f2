"""Gradient accumulation with no clear between windows (the ``optimizer.zero_grad()`` after
``optimizer.step()`` left out, as Hugging Face's Trainer, which ORPO's reference trains with,
has it): each window's ``backward()`` calls run in an inner loop over micro-batches, and from
the second update on ``.grad`` still holds every earlier window's gradient. The ``stale``
failure's edit clears after the step, where a window ends: before the step's own
``backward()``, inside the inner loop, it would keep only the last micro-batch. The fixed
script trains as the published one. A backward in the step's own block is cleared before it,
as before."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

from toolkit.audit.record import syntax as S

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(4):
    for micro in range(3):
        x = torch.randn(8, 4)
        loss = F.mse_loss(model(x), x.sum(1, keepdim=True))
        (loss / 3).backward()
    optimizer.step()
CLEAR
if args.out:
    torch.save(model.state_dict(), args.out)
"""


def test_a_window_left_uncleared_is_cleared_after_its_step(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CLEAR", "    optimizer.zero_grad()"),
                   SCRIPT.replace("CLEAR\n", ""))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "train.py:18: insert before it: optimizer.zero_grad()" in done.stdout, done.stdout


@pytest.mark.parametrize(("line", "sibling", "expected"), [
    (16, 17, 13),     # the backward inside the inner loop: that loop's line
    (17, 17, None),   # the step itself
    (17, 14, None),   # a line outside the block (the step, beside the inner loop)
    (5, 17, None),    # no loop holds it
])
def test_the_loop_beside_the_step_that_holds_a_line(tmp_path, line, sibling, expected):
    path = tmp_path / "t.py"
    path.write_text(SCRIPT.replace("CLEAR\n", ""), encoding="utf-8")
    assert S.loop_beside(str(path), line, sibling) == expected


def test_a_backward_in_an_if_beside_the_step_is_in_no_loop(tmp_path):
    path = tmp_path / "t.py"
    path.write_text("for i in range(3):\n    if i:\n        loss.backward()\n"
                    "    opt.step()\n", encoding="utf-8")
    assert S.loop_beside(str(path), 3, 4) is None
