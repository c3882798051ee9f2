"""A gradient clip before the ``backward()`` in a loop that follows one updating by hand: the
character LSTM of pytorch/examples' word language model (``p.data.add_(p.grad, alpha=-lr)``)
pre-trains with no optimizer, then fine-tunes with SGD, whose loop clips right after
``zero_grad()``. The pre-training's last gradient, which no step used, was still taken as in
``.grad`` at the clip, so the clip seemed to clip something. The clip reads ``.grad`` as it is
now: ``unclipped``, whose edit moves it after the backward and trains as the published script;
clipped there, the script is clean."""

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
model = nn.Linear(4, 2)
for i in range(3):
    model.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    optimizer.zero_grad()
BEFORE    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
AFTER    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

CLIP = "    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)\n"
PUBLISHED = SCRIPT.replace("BEFORE", "").replace("AFTER", CLIP)
EARLY = SCRIPT.replace("BEFORE", CLIP).replace("AFTER", "")


def test_a_clip_before_the_backward_after_a_manual_phase_is_unclipped_and_moved(tmp_path):
    folder = twins(tmp_path, PUBLISHED, EARLY)
    done = applied_and_trains(folder, "unclipped", "--watch", "1")
    line = EARLY.splitlines().index("    optimizer.zero_grad()") + 2   # the clip after it
    assert f"at:   train.py:{line}:" in done.stdout, done.stdout
    assert (folder / "train.py").read_text() == PUBLISHED


def test_clipped_after_the_backward_it_is_clean(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PUBLISHED, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    assert code == 0 and not failures(report), [f["message"] for f in report["findings"]]
