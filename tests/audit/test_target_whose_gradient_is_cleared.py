"""A target that carries gradient only into tensors whose gradient from that loss is cleared
before any step uses it changes no weight: VAE-GAN's encoder and decoder losses read the
discriminator's features of the data as their target (Larsen et al. 2016), and the
discriminator's optimizer clears its gradients right before its own backward. That is no
``target`` failure, only the ``wasted`` note. With the discriminator's gradients cleared before
the encoder's backward instead, the encoder's loss trains it: a failure. Both sides of that loss
are the discriminator's first layer, on the data and on the encoder's output (feature
matching), so neither is a target: the failure is the gradient of the encoder's loss left in
the discriminator's ``.grad`` when its optimizer steps (``leak``), whose edit clears it before
the discriminator's own backward."""

from __future__ import annotations

import pytest
from script_audit import cli, twins

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
encoder = nn.Linear(4, 4)
discriminator = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
enc_optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
dis_optimizer = torch.optim.SGD(discriminator.parameters(), lr=0.1)
x = torch.randn(16, 4)
for step in range(4):
    feat_x = discriminator[0](x)
    enc_loss = F.mse_loss(discriminator[0](encoder(x)), feat_x)
    real = torch.ones(16, 1)
    fake = torch.zeros(16, 1)
    dis_loss = F.binary_cross_entropy_with_logits(discriminator(x), real) \\
        + F.binary_cross_entropy_with_logits(discriminator(encoder(x).detach()), fake)
    enc_optimizer.zero_grad()
FIRST    enc_loss.backward()
SECOND    dis_loss.backward()
    enc_optimizer.step()
    dis_optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
"""

CLEAR = "    dis_optimizer.zero_grad()\n"


def test_a_target_whose_gradient_is_cleared_before_any_step_is_no_failure(tmp_path):
    script = SCRIPT.replace("FIRST", "").replace("SECOND", CLEAR)
    folder = twins(tmp_path, script, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
    assert "info    wasted: `enc_loss`" in done.stdout, done.stdout


def test_a_feature_target_whose_gradient_reaches_a_step_is_a_failure(tmp_path):
    script = SCRIPT.replace("FIRST", CLEAR).replace("SECOND", "")
    folder = twins(tmp_path, script, script)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    leak: the gradient of `enc_loss`" in done.stdout, done.stdout
    assert "insert before it: dis_optimizer.zero_grad()" in done.stdout, done.stdout
