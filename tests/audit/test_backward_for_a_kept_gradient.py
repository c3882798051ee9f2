"""An inner step that takes the gradient of a value the network computes by a backward()
and reads it from that value's ``.grad`` (``codes.retain_grad()``, LEO's latent codes in
place of ``torch.autograd.grad``, Rusu et al. 2019): the backward also writes the inner loss's
gradient into every parameter's ``.grad`` after the clear, and the meta step adds it to the
outer loss's. ``leak``: its edit gives that backward ``inputs=`` the value it was taken for,
and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

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
encoder, decoder = nn.Linear(4, 3), nn.Linear(3, 4)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=0.01)
train_x, val_x = torch.randn(16, 4), torch.randn(16, 4)
for step in range(4):
    optimizer.zero_grad()
    codes = encoder(train_x)
    inner = F.mse_loss(decoder(codes), train_x)
INNER    codes = codes - 0.5 * grad
    outer = F.mse_loss(decoder(codes), val_x)
    outer.backward()
    optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
"""

PUBLISHED = """\
    grad = torch.autograd.grad(inner, codes, create_graph=True)[0]
"""

BUG = """\
    codes.retain_grad()
    inner.backward(create_graph=True)
    grad = codes.grad
"""


def test_the_backward_is_taken_over_the_value_it_was_for(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("INNER", PUBLISHED), SCRIPT.replace("INNER", BUG))
    done = applied_and_trains(folder, "leak", "--watch", "1")
    assert "inner.backward(create_graph=True, inputs=[codes])" in done.stdout
