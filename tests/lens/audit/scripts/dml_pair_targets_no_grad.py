"""Deep mutual learning of two students at a tiny size, written after Zhang, Xiang, Hospedales
and Lu, "Deep Mutual Learning" (CVPR 2018, arXiv:1706.00384; Eq. 1-4: each network's loss is its
cross-entropy plus KL(p_peer || p_self), the peer's posterior a target) and
AberHu/Knowledge-Distillation-Zoo (train_dml.py, ``train``: ``criterionKD(out1, out2.detach())``
and ``criterionKD(out2, out1.detach())``). The two posteriors used as targets are computed under
``torch.no_grad()``, in the block that also computes each student's batch accuracy for the log.
Two students of different shapes, each with its own SGD optimizer, one backward of the summed
losses. Points made in the script (a cluster per class). As published: clean. ``--out PATH``
saves both students' weights."""

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
