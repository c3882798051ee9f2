"""Deep mutual learning of two students at a tiny size, written after Zhang, Xiang, Hospedales
and Lu, "Deep Mutual Learning" (CVPR 2018, arXiv:1706.00384; Eq. 1-4) and
AberHu/Knowledge-Distillation-Zoo (train_dml.py, ``train``: ``criterionKD(out1, out2.detach())``).
Injected bug: the targets are computed below the ``torch.no_grad()`` block that computes the
logged accuracy, not in it (``targets = [F.softmax(z, dim=1) for z in logits]`` dedented), so
each student's KL term also trains its peer towards it. The fix is that line, into the block;
a cut of the targets where ``pairs`` is made or where the KL reads them is as right. Two SGD
optimizers, one backward of the summed losses. Found at iteration 0. ``--out PATH`` saves both
students' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

nets = nn.ModuleList([
    nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes)),
    nn.Sequential(nn.Linear(dim, 24), nn.Tanh(), nn.Linear(24, classes)),
])
optimizers = [torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9) for net in nets]

for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits = [net(x) for net in nets]
    with torch.no_grad():
        accuracy = [(z.argmax(1) == y).float().mean().item() for z in logits]
    targets = [F.softmax(z, dim=1) for z in logits]
    pairs = zip(logits, targets[::-1])
    kl = [F.kl_div(F.log_softmax(z, dim=1), t, reduction="batchmean") for z, t in pairs]
    losses = [F.cross_entropy(z, y) + term for z, term in zip(logits, kl)]
    for optimizer in optimizers:
        optimizer.zero_grad()
    sum(losses).backward()
    for optimizer in optimizers:
        optimizer.step()
    print(f"step {step} losses {losses[0].item():.4f} {losses[1].item():.4f} acc {accuracy}")

if args.out:
    torch.save({f"nets.{k}": v for k, v in nets.state_dict().items()}, args.out)
