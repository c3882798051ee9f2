"""Temporal ensembling at a tiny size, written after Laine and Aila, "Temporal Ensembling for
Semi-Supervised Learning" (arXiv:1610.02242), Algorithm 2: each epoch the network's predictions
``z_i`` on every (noisy, dropped-out) training input are collected; after the epoch the ensemble
``Z <- alpha Z + (1 - alpha) z`` is accumulated and the bias-corrected targets
``z~ <- Z / (1 - alpha^t)`` are what the next epoch's unsupervised term ``w(t) ||z_i - z~_i||^2``
pulls towards; the supervised cross-entropy uses the few labelled inputs only, and ``w(t)`` ramps up
along a Gaussian curve from zero in the first epoch. The collected predictions are stored outside
the graph. A softmax-regression classifier with input noise and dropout on vectors made in the
script, a quarter of them labelled. Injected bug: the predictions are collected with their graph
(``outputs[idx] = z`` for ``z.detach()``), so the ensemble and its targets hold every earlier
epoch's graph; ``backward(retain_graph=True)`` lets the run go on, and from the second epoch the
consistency term trains the earlier predictions towards the new ones as well."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=0.6)
parser.add_argument("--max-weight", type=float, default=10.0)
parser.add_argument("--rampup-epochs", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, dim, classes = 128, 16, 4
means = torch.randn(classes, dim)
labels = torch.randint(0, classes, (n,))
inputs = means[labels] + 0.8 * torch.randn(n, dim)
labelled = torch.zeros(n, dtype=torch.bool)
labelled[torch.randperm(n)[: n // 4]] = True


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        x = x + 0.15 * torch.randn_like(x)
        return self.fc(self.drop(x))


def rampup(epoch):
    if epoch >= args.rampup_epochs:
        return 1.0
    p = epoch / args.rampup_epochs
    return math.exp(-5.0 * (1.0 - p) ** 2) if epoch > 0 else 0.0


model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
ensemble = torch.zeros(n, classes)
targets = torch.zeros(n, classes)
model.train()
for epoch in range(args.epochs):
    w = args.max_weight * rampup(epoch)
    outputs = torch.zeros(n, classes)
    for idx in torch.randperm(n).split(args.batch_size):
        logits = model(inputs[idx])
        z = F.softmax(logits, dim=1)
        mask = labelled[idx]
        sup = F.cross_entropy(logits[mask], labels[idx][mask], reduction="sum") / len(idx)
        unsup = F.mse_loss(z, targets[idx])
        loss = sup + w * unsup
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        outputs[idx] = z
    ensemble = args.alpha * ensemble + (1 - args.alpha) * outputs
    targets = ensemble / (1 - args.alpha ** (epoch + 1))
    print(f"epoch {epoch} sup {sup.item():.4f} unsup {unsup.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
