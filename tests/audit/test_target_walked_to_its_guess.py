"""A guessed label mixed into a target (MixMatch, Berthelot et al. 2019: the sharpened average
of the model's predictions on two augmentations, put beside the one-hot labels and mixed with a
permutation of the batch; the published code guesses under ``torch.no_grad()``), read by the
loss through a slice of the mix: each line between the guess and the loss makes its value from
that one value with a graph and constants (the labels, the mixing weight, the permutation), so
the gradient the target carries is the guess's, and the cut goes where the guess is made, not
on the line that mixes it."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    x, u = torch.randn(8, 4), torch.randn(8, 4)
    labels = F.one_hot(torch.randint(0, 3, (8,)), 3).float()
GUESS
    both = torch.cat([labels, guess], dim=0)
    order = torch.randperm(16)
    mixed = 0.7 * both + 0.3 * both[order]
    logits = model(0.7 * torch.cat([x, u]) + 0.3 * torch.cat([x, u])[order])
    supervised = -(F.log_softmax(logits[:8], 1) * mixed[:8]).sum(1).mean()
    consistency = (logits[8:].softmax(1) - mixed[8:]).pow(2).mean()
    loss = supervised + consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

GUESS = ("    first = model(u)\n"
         "    second = model(u + 0.1)\n"
         "    average = (first.softmax(1) + second.softmax(1)) / 2\n"
         "    sharpened = average ** 2\n"
         "    guess = sharpened / sharpened.sum(1, keepdim=True)")
PUBLISHED = "    with torch.no_grad():\n" + "\n".join(f"    {line}" for line in GUESS.split("\n"))


def test_a_guess_mixed_into_the_target_is_cut_where_it_is_made(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("GUESS", PUBLISHED), SCRIPT.replace("GUESS", GUESS))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "target"]
    assert code == 1 and found, report["findings"]
    lines = {int(a.split(":")[1]) for a in found[0]["at"] if a.startswith("train.py:")}
    assert found[0]["at"][0].split(":")[1] in {"17", "18", "19"}, found[0]["at"]
    assert 22 not in lines, found[0]["at"]   # not the line that mixes it
    applied_and_trains(folder, "target", "--watch", "1")
