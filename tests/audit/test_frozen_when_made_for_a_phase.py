"""A layer made for the second phase and frozen with the weights it should not be: BitFit
(Ben Zaken et al. 2022) pretrains a model, puts a new classifier on it, switches off every
weight except the biases and the classifier's, and builds a new optimizer. Leaving the
classifier out of what is switched back on (``trainable = ["bias"]``) keeps its weight at the
values it was made with: ``frozen``, with the weight switched on before the phase's loop, after
which the script trains as published. The published script, whose pretrained weights stay
frozen on purpose, is no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
model[2] = nn.Linear(8, 2)
trainable = ["bias", "2."]
for name, param in model.named_parameters():
    param.requires_grad = any(part in name for part in trainable)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
y2 = torch.randint(0, 2, (32,))
for step in range(3):
    loss = F.cross_entropy(model(x), y2)
    loss.backward()
    optimizer.step()
    model.zero_grad()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

HEAD_LEFT_FROZEN = PUBLISHED.replace('trainable = ["bias", "2."]', 'trainable = ["bias"]')


def test_a_new_layer_left_frozen_is_switched_on_before_its_phase(tmp_path):
    folder = twins(tmp_path, PUBLISHED, HEAD_LEFT_FROZEN)
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert "insert before it: model[2].weight.requires_grad_(True)" in done.stdout, done.stdout


# Latent diffusion (Rombach et al. 2022, CompVis/latent-diffusion, ldm/models/diffusion/ddpm.py:
# LatentDiffusion freezes its first-stage autoencoder and trains its conditioning model with
# the denoiser): a class embedder made with the second phase's model, frozen by a line of its
# own that copies the autoencoder's freeze above it.
DIFFUSION = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
autoencoder = nn.Linear(6, 4)
x = torch.randn(32, 6)
ae_opt = torch.optim.Adam(autoencoder.parameters(), lr=0.01)
for step in range(3):
    loss = F.mse_loss(autoencoder(x) @ autoencoder.weight, x)
    ae_opt.zero_grad()
    loss.backward()
    ae_opt.step()


class Latent(nn.Module):
    def __init__(self, first_stage):
        super().__init__()
        self.denoiser = nn.Linear(4, 4)
        self.first_stage = first_stage
        self.first_stage.requires_grad_(False)
        self.embedder = nn.Embedding(3, 4)

    def forward(self, x, labels):
        with torch.no_grad():
            z = self.first_stage(x)
        noise = torch.randn_like(z)
        return F.mse_loss(self.denoiser(z + noise + self.embedder(labels)), noise)


model = Latent(autoencoder)
opt = torch.optim.AdamW([*model.denoiser.parameters(), *model.embedder.parameters()], lr=0.01)
labels = torch.randint(0, 3, (32,))
for step in range(3):
    loss = model(x, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

EMBEDDER_FROZEN = DIFFUSION.replace(
    "        self.embedder = nn.Embedding(3, 4)\n",
    "        self.embedder = nn.Embedding(3, 4)\n        self.embedder.requires_grad_(False)\n")


def test_a_new_module_frozen_by_its_own_line_has_that_line_taken_away(tmp_path):
    folder = twins(tmp_path, DIFFUSION, EMBEDDER_FROZEN)
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert "remove: self.embedder.requires_grad_(False)" in done.stdout, done.stdout
    assert "(model.embedder.requires_grad_(True))" in done.stdout, done.stdout
