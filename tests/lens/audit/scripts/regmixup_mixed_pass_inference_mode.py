"""RegMixup at a tiny size, written after Pinto, Yang, Lim, Torr and Dokania, "Using Mixup as a
Regularizer Can Surprisingly Improve Accuracy and Out-of-Distribution Robustness" (NeurIPS 2022,
arXiv:2206.14502) and FrancescoPinto/RegMixup (models/regmixup.py): the clean cross-entropy plus
the mixup cross-entropy of a mixed batch, both predictions trained, in two passes with the
clean batch's accuracy computed for the log in between, under ``torch.inference_mode()``. Bug
twin of regmixup.py: the mixed batch's forward pass is written inside that block (``logits_mix
= model(x_mix)`` indented under ``with torch.inference_mode():``), so the mixup term is made of
cut values only: it changes the printed loss and trains nothing, and the model is trained by
the clean cross-entropy alone. The fix is that line, out of the block; the block's own line may
be changed instead, the accuracy in it trains nothing. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--alpha", type=float, default=20.0)
parser.add_argument("--eta", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (128,))
points = centers[labels] + 0.7 * torch.randn(128, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
beta = torch.distributions.Beta(torch.tensor(args.alpha), torch.tensor(args.alpha))

for step in range(args.steps):
    x = points[16 * (step % 8):16 * (step % 8) + 16]
    y = labels[16 * (step % 8):16 * (step % 8) + 16]
    lam = beta.sample()
    perm = torch.randperm(len(x))
    x_mix = lam * x + (1 - lam) * x[perm]
    logits = model(x)
    with torch.inference_mode():
        accuracy = (logits.argmax(1) == y).float().mean()
        logits_mix = model(x_mix)
    mixup = lam * F.cross_entropy(logits_mix, y) + (1 - lam) * F.cross_entropy(logits_mix, y[perm])
    loss = F.cross_entropy(logits, y) + args.eta * mixup
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} accuracy {accuracy.item():.2f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
