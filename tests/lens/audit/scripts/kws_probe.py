"""Keyword spotting with a convolutional front end kept fixed and a classifier trained on it,
written after torchaudio's tutorials "Speech Command Classification with torchaudio" (a 1-D
convolutional network over raw waveforms, M5 of Dai et al., arXiv:1610.00087) and "Speech
Recognition with Wav2Vec2" (features from a pretrained front end, read under
``torch.inference_mode()`` when it is only used, not trained). Here the front end is only used, as in
the Wav2Vec2 tutorial: its features are read under ``torch.inference_mode()`` and cloned, and
the optimizer holds the classifier alone (a linear probe). Data: two synthetic
"words", chirps rising or falling, with noise, made in the script."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=4)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=8)
args = parser.parse_args()
torch.manual_seed(args.seed)

frontend = nn.Sequential(nn.Conv1d(1, 8, 9, stride=4), nn.ReLU(), nn.Conv1d(8, 8, 5, stride=2),
                         nn.ReLU())
classifier = nn.Sequential(nn.Flatten(), nn.LazyLinear(2))
classifier(frontend(torch.zeros(1, 1, 256)))   # the lazy layer learns its input size
optimizer = torch.optim.Adam(classifier.parameters(), lr=1e-3)


def words(n):
    label = torch.randint(0, 2, (n,))
    t = torch.linspace(0, 1, 256)
    sign = (2 * label - 1).float()[:, None]
    wave = torch.sin(2 * math.pi * (20 + 30 * sign * t) * t) + 0.3 * torch.randn(n, 256)
    return wave[:, None], label


for step in range(args.steps):
    wave, label = words(args.batch_size)
    with torch.inference_mode():
        features = frontend(wave)
    features = features.clone()   # an inference tensor cannot be saved for backward
    loss = F.cross_entropy(classifier(features), label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
