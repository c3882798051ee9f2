"""RegMixup at a tiny size, written after Pinto, Yang, Lim, Torr and Dokania, "Using Mixup as a
Regularizer Can Surprisingly Improve Accuracy and Out-of-Distribution Robustness" (NeurIPS 2022,
arXiv:2206.14502) and FrancescoPinto/RegMixup (models/regmixup.py, ``training_step`` and
``regmixup_criterion``): the cross-entropy of the clean batch plus the mixup cross-entropy of a
mixed batch (``lam * CE(pred, y_a) + (1 - lam) * CE(pred, y_b)``, ``lam`` drawn from
Beta(alpha, alpha) with a large alpha), both predictions trained. The repository concatenates
the two batches into one forward pass; here they are two passes, and between them the training
accuracy of the clean batch is computed for the log under ``torch.inference_mode()``. Points
made in the script (a cluster per class). SGD with momentum. As published: clean. ``--out
PATH`` saves the classifier's weights."""

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
