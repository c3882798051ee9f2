"""Gradients never cleared for the second of two optimizers of one loss: the decoder's is
cleared and stepped first, the encoder's ``zero_grad()`` is missing, so from the second update
the encoder steps on the sum of every loss so far (``stale``). The loss of the iteration
counts as the encoder step's own even though the decoder's step came first: the edit clears
the encoder's gradient before it, and the script trains as the one that clears both."""

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
encoder, decoder = nn.Linear(4, 6), nn.Linear(6, 4)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
for step in range(4):
    x = torch.randn(16, 4)
    loss = F.mse_loss(decoder(torch.tanh(encoder(x))), x)
    decoder_optimizer.zero_grad()
CLEAR
    loss.backward()
    decoder_optimizer.step()
    encoder_optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
"""


def test_the_clear_missing_behind_another_optimizer_s_step_is_written(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("CLEAR", "    encoder_optimizer.zero_grad()"),
                   SCRIPT.replace("CLEAR\n", ""))
    done = applied_and_trains(folder, "stale", "--watch", "1")
    assert "train.py:17: insert before it: encoder_optimizer.zero_grad()" in done.stdout, \
        done.stdout
