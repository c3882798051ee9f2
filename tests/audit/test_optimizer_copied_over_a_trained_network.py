"""A second optimizer built over the first one's network (FactorVAE's discriminator optimizer,
its line copied from the VAE's with the name changed; Kim and Mnih 2018): its own loss reads
the VAE's codes cut and trains only the discriminator, which no optimizer holds, and its
``zero_grad()`` clears the VAE's gradient before its step. Some of its tensors are dead (the
encoder, behind the cut), the others were trained by the VAE's optimizer: the step's losses
reach none of them all the same, so it is built over the wrong network, and the edit replaces
its argument."""

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
encoder, decoder = nn.Linear(4, 2), nn.Linear(2, 4)
discriminator = nn.Linear(2, 2)
vae_optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=0.01)
d_optimizer = torch.optim.Adam(OVER, lr=0.01)
x = torch.randn(16, 4)
for step in range(4):
    z = encoder(x)
    vae_loss = F.mse_loss(decoder(z), x) + discriminator(z).logsumexp(1).mean()
    vae_optimizer.zero_grad()
    vae_loss.backward()
    vae_optimizer.step()
    d_loss = F.cross_entropy(discriminator(z.detach()), torch.zeros(16, dtype=torch.long))
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
"""


def test_the_copied_optimizer_is_built_over_the_network_its_loss_trains(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("OVER", "discriminator.parameters()"),
                   SCRIPT.replace("OVER", "[*encoder.parameters(), *decoder.parameters()]"))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "it is built over the wrong parameters" in done.stdout, done.stdout
    assert "-> discriminator.parameters()" in done.stdout, done.stdout
